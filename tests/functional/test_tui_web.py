"""`chatmem tui --web`: the same app in a real browser (headless Chromium), its guard
(loopback or a token, the Host header), and what a page is served.

The browser test drives the system's Chromium through playwright (no browser is
downloaded). Where Chromium is missing it is skipped with the reason printed (`-rs`).
Every request the browser makes off loopback is refused before it leaves the machine.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.demo import build_demo
from tests.support import run_cli, unbound_environ

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SERVING = re.compile(r"serving the TUI on (http://\S+?)/")
ANSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>78]|\x1b\][^\x07]*\x07")
WAIT_SECONDS = 60.0
ARTIFACTS = Path(os.environ.get("CHATMEM_TEST_ARTIFACTS", "test-artifacts"))


@pytest.fixture(scope="module")
def demo_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("web") / "demo"
    asyncio.run(build_demo(path, now=NOW))
    return path


@contextmanager
def serving(ws: Path, *extra: str) -> Iterator[tuple[str, list[str]]]:
    """`chatmem tui --web 127.0.0.1:0` in its own process: its URL once it listens, and
    every line it printed (read by a thread, so no read can hang the test)."""
    argv = [sys.executable, "-m", "adapters.cli", "tui", "--web", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*argv, "--workspace", str(ws), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=unbound_environ(),
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    printed: list[str] = []
    assert proc.stdout is not None
    stdout = proc.stdout
    threading.Thread(target=_read_lines, args=(stdout, lines), daemon=True).start()
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            printed.append(line)
            if found := SERVING.search(line):
                break
        yield found.group(1), printed
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _read_lines(stream: Iterable[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=WAIT_SECONDS) as response:
            return response.status, dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers)


def test_off_loopback_needs_a_token(
    demo_ws: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHATMEM_TUI_TOKEN", raising=False)
    code, out, err = run_cli(capsys, "tui", "--web", "0.0.0.0:0", "--workspace", str(demo_ws))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "without --token" in err
    code, _, err = run_cli(capsys, "tui", "--web", "localhost", "--workspace", str(demo_ws))
    assert code == 2 and "HOST:PORT" in err
    code, _, err = run_cli(capsys, "tui", "--token", "x", "--workspace", str(demo_ws))
    assert code == 2 and "--token goes with --web" in err


def test_a_token_guards_every_request_and_is_never_printed(demo_ws: Path) -> None:
    token = "s3cret-token-for-the-test"
    with serving(demo_ws, "--token", token) as (url, printed):
        assert fetch(f"{url}/")[0] == 403
        assert fetch(f"{url}/?token=wrong")[0] == 403
        assert fetch(f"{url}/static/css/xterm.css")[0] == 403
        status, headers = fetch(f"{url}/?token={token}")
        assert status == 200
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in headers["Set-Cookie"]
        assert fetch(f"{url}/static/css/xterm.css", {"Cookie": cookie})[0] == 200
    assert token not in "".join(printed)


def test_a_foreign_host_name_is_refused(demo_ws: Path) -> None:
    """A page elsewhere that points its own name at 127.0.0.1 (DNS rebinding) sends that
    name as Host: the server answers it nothing."""
    with serving(demo_ws) as (url, _):
        port = url.rsplit(":", 1)[1]
        assert fetch(f"{url}/")[0] == 200
        assert fetch(f"{url}/", {"Host": f"localhost:{port}"})[0] == 200
        assert fetch(f"{url}/", {"Host": f"attacker.example:{port}"})[0] == 421


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no Chromium on this machine (Debian package `chromium`; .ci/run installs it)")


def screen_text(frames: list[bytes]) -> str:
    """What the app wrote to the page's terminal, without its escape sequences."""
    return ANSI.sub("", b"".join(frames).decode("utf-8", "replace"))


def wait_for(check: Callable[[], bool], what: str, pause: Callable[[], None]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"the page never showed {what}"
        pause()


def test_browser_shows_the_rankings_and_a_key_switches_tabs(demo_ws: Path) -> None:
    browser_path = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright (the dev extra)")
    frames: list[bytes] = []
    refused: list[str] = []
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with serving(demo_ws) as (url, _), sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=browser_path,
            # Root in a container has no sandbox; no name but loopback resolves.
            args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})

            def offline(route: object) -> None:
                request_url = route.request.url  # type: ignore[attr-defined]
                if request_url.startswith(url):
                    route.continue_()  # type: ignore[attr-defined]
                else:
                    refused.append(request_url)
                    route.abort()  # type: ignore[attr-defined]

            page.route("**/*", offline)
            page.on("websocket", lambda ws: ws.on("framereceived", _keep_bytes(frames)))
            page.goto(f"{url}/")
            pause = lambda: page.wait_for_timeout(100)  # noqa: E731 - the page's own clock

            wait_for(lambda: "sorted by score" in screen_text(frames), "the rankings", pause)
            shown = screen_text(frames)
            assert "Rankings" in shown and "Prefers pytest over unittest" in shown
            page.screenshot(path=str(ARTIFACTS / "tui-web-rankings.png"))

            seen = len(frames)
            page.locator(".xterm-screen").first.click()
            page.keyboard.press("4")  # the Recall tab
            wait_for(
                lambda: "recall query, e.g." in screen_text(frames[seen:]), "the Recall tab", pause
            )
            page.screenshot(path=str(ARTIFACTS / "tui-web-recall.png"))
        finally:
            browser.close()
    assert (ARTIFACTS / "tui-web-rankings.png").stat().st_size > 10_000
    assert all("127.0.0.1" not in u for u in refused)


def _keep_bytes(frames: list[bytes]) -> Callable[[bytes | str], None]:
    def keep(payload: bytes | str) -> None:
        if isinstance(payload, bytes):
            frames.append(payload)

    return keep
