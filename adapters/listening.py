"""One way a front end's aiohttp app starts listening (the webhook toolkit's servers,
the metrics endpoint): bound, or cleaned up and the error raised for the caller to name
its setting. Kept apart from the toolkit so a process that serves only metrics imports
no chat router."""

from __future__ import annotations

from aiohttp import web


async def start_listening(
    app: web.Application, host: str, port: int, *, access_log: bool = True
) -> web.AppRunner:
    """The app listening on host:port; OSError when the address is taken (the caller
    names its settings). Whatever stops the start (cancellation too) cleans up first.
    `access_log=False`: no line per request (a scraper's every few seconds)."""
    runner = web.AppRunner(app) if access_log else web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
