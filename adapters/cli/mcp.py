"""`chatmem mcp`: the workspace's memory as an MCP server (stdio, or streamable HTTP)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from adapters.cli import command
from adapters.cli.bots import serve_until_signal
from memory_core.base.errors import ChatmemError, install_hint

if TYPE_CHECKING:
    from memory_core.engine import MemoryCore


@command(
    "mcp", "serve the scope's memory to agents over MCP (stdio, or --http HOST:PORT)", serves=True
)
class Mcp:
    @staticmethod
    def arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "--http",
            metavar="HOST:PORT",
            help="serve streamable HTTP here instead of stdio; clients send a bearer token "
            "(CHATMEM_MCP_TOKEN, mcp.clients), and without one only loopback is served",
        )
        parser.add_argument(
            "--create",
            action="store_true",
            help="serve --scope even when it holds nothing yet (without it a scope the "
            "workspace does not know is refused: most often a typo)",
        )

    @staticmethod
    async def run(core: MemoryCore, args: argparse.Namespace) -> int:
        if not args.create:
            from adapters.cli.running import refuse_unknown_scope  # imported once parsed

            await refuse_unknown_scope(core, args.scope_key, "; --create serves it anyway")
        try:
            from adapters import mcp_server
        except ImportError as exc:
            raise ChatmemError(
                f"the MCP server needs the mcp extra: {install_hint('mcp')} ({exc})"
            ) from None
        # stdout is the protocol's over stdio: log lines go to stderr (adapters/cli/logs.py).
        scope = args.scope_key
        if args.http is None:
            await mcp_server.serve_stdio(mcp_server.build_server(core, scope))
            return 0
        host, port = mcp_server.parse_listen(args.http)
        return await serve_until_signal(
            lambda stop: mcp_server.serve_http(core, scope, host, port, stop)
        )
