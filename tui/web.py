"""The TUI in a browser: textual-serve runs one `chatmem tui` process per page.

An operator on a server opens the same app from a browser instead of over ssh. The
server here only relays: each page that connects starts its own `chatmem tui` child (the
same interpreter, workspace, config and scope), so the serving process opens no core.

The address is loopback unless the operator gives a token; with one, every request must
carry it (`?token=` once, then a cookie the page's own requests send back). Without one,
the Host header must name the loopback address served, so a web page elsewhere cannot
reach the server through a name it controls (DNS rebinding).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memory_core.base.errors import ChatmemError

if TYPE_CHECKING:
    from aiohttp import web
    from aiohttp.typedefs import Handler, Middleware

TOKEN_COOKIE = "chatmem_tui_token"
EXTRA_HINT = "the web TUI needs the web extra: python -m pip install -e '.[web]'"


@dataclass(frozen=True)
class WebAddress:
    host: str
    port: int

    @property
    def url_host(self) -> str:
        """The host as a URL or a Host header writes it (IPv6 in brackets)."""
        return f"[{self.host}]" if ":" in self.host else self.host

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


def parse_address(value: str) -> WebAddress:
    """HOST:PORT (IPv6 in brackets); port 0 lets the system choose one."""
    host, sep, port_text = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port_text.isdigit() or int(port_text) > 65535:
        raise ChatmemError(f"--web wants HOST:PORT, e.g. 127.0.0.1:8080, not {value!r}")
    return WebAddress(host, int(port_text))


def check_exposure(address: WebAddress, token: str) -> None:
    """Anyone who reaches the page can edit and forget memories: off loopback, only with
    a token."""
    if not address.is_loopback and not token:
        raise ChatmemError(
            f"refusing to serve the TUI on {address.host}, which is not a loopback address, "
            "without --token (anyone who reaches it could read and change memories)"
        )


def child_command(workspace: Path, scope: str, config: str | None) -> str:
    """The shell command textual-serve runs for each page: this interpreter, so the
    child runs the very code and packages of the server."""
    argv = [sys.executable, "-m", "adapters.cli", "tui", "--workspace", str(workspace)]
    argv += ["--scope", scope]
    if config:
        argv += ["--config", str(Path(config).absolute())]
    return shlex.join(argv)


def token_ok(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def guard(token: str, hosts: set[str]) -> Middleware:
    """aiohttp middleware. Without a token (loopback only): the Host check. With one: the
    token (query once, cookie after), whatever name the server is reached by.
    `hosts` is filled once the port is bound (the app is frozen by then)."""
    from aiohttp import web

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not token:
            if request.host not in hosts:
                raise web.HTTPMisdirectedRequest(text="unknown host\n")
            return await handler(request)
        from_query = request.query.get("token")
        from_cookie = request.cookies.get(TOKEN_COOKIE)
        if not (token_ok(from_query, token) or token_ok(from_cookie, token)):
            raise web.HTTPForbidden(text="a valid token is needed: open the page with ?token=\n")
        response = await handler(request)
        if from_query is not None and not response.prepared:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return response

    return middleware


def served_hosts(address: WebAddress, port: int) -> frozenset[str]:
    """The Host headers a browser sends for this address (and `localhost` on loopback)."""
    names = {f"{address.url_host}:{port}"}
    if address.is_loopback:
        names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    return frozenset(names)


async def serve(
    address: WebAddress, token: str, command: str, announce: Callable[[str], None]
) -> None:
    """Serve until cancelled (Ctrl-C). `announce` gets the URL once the port is bound
    (never with the token in it)."""
    try:
        from aiohttp import web
        from textual_serve.server import Server
    except ImportError:
        raise ChatmemError(EXTRA_HINT) from None

    server = Server(command, host=address.host, port=address.port, title="chatmem")
    app = await server._make_app()  # serve() would own the event loop: ours runs it
    app.on_startup.clear()  # its startup banner prints a logo; the URL line below says it
    hosts: set[str] = set()
    app.middlewares.append(guard(token, hosts))
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, address.host, address.port)
        await site.start()
        port = int(runner.addresses[0][1])  # the chosen one when asked for port 0
        # The page builds its static and websocket URLs from public_url: the real port.
        server.public_url = f"http://{address.url_host}:{port}"
        hosts.update(served_hosts(address, port))
        suffix = " (open it with ?token=<your token>)" if token else ""
        announce(f"serving the TUI on {server.public_url}/{suffix}; Ctrl-C stops")
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
