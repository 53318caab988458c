"""A page in headless Chromium, read once the page says it is ready.

`--dump-dom` with a virtual time budget dumps when the page goes idle, and a page that lays its
graph out with WebAssembly is idle while the compile runs on another thread: on a loaded machine
the dump came before the layout. Here the page is driven over the DevTools protocol (on a pipe, no
port, no extra package) and read when a promise of its own settles, whatever the load."""

import json
import os
import select
import shutil
import subprocess
import time

READY_DOM = "Promise.resolve(window.inspectorReady).then(() => document.documentElement.outerHTML)"


def find_browser() -> str | None:
    return next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


def page_value(browser: str, url: str, expression: str = READY_DOM, timeout: float = 120) -> str:
    """The value of ``expression`` (a promise is awaited) evaluated in ``url`` once it has loaded."""
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()

    # Chromium reads commands on fd 3 and writes answers on fd 4 (bash puts the pipes there: a
    # preexec_fn would make Python fork a process that runs jax's threads)
    proc = subprocess.Popen(["/bin/bash", "-c", f'exec "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', "bash", browser, "--headless",
                             "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "about:blank"],
                            pass_fds=(to_chrome_r, from_chrome_w), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    out, into = os.fdopen(to_chrome_w, "wb"), os.fdopen(from_chrome_r, "rb")
    pending = b""
    sent = 0
    deadline = time.monotonic() + timeout

    def call(method: str, session: str | None = None, **params) -> dict:
        nonlocal pending, sent
        sent += 1
        message = {"id": sent, "method": method, "params": params} | ({"sessionId": session} if session else {})
        out.write(json.dumps(message).encode() + b"\0")
        out.flush()
        while True:
            while b"\0" not in pending:
                if not select.select([into], [], [], max(0.0, deadline - time.monotonic()))[0]:
                    raise TimeoutError(f"the browser did not answer {method} in {timeout:.0f} s")
                chunk = os.read(into.fileno(), 1 << 16)
                if not chunk:
                    raise RuntimeError(f"the browser closed its pipe during {method}")
                pending += chunk
            raw, pending = pending.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == sent:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer["result"]

    try:
        target = call("Target.createTarget", url="about:blank")["targetId"]
        session = call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        call("Page.enable", session)
        call("Page.navigate", session, url=url)
        # wait for the load, then for the page's own promise
        loaded = "new Promise(r => document.readyState === 'complete' ? r() : addEventListener('load', () => r()))"
        call("Runtime.evaluate", session, expression=loaded, awaitPromise=True, timeout=timeout * 1000)
        result = call("Runtime.evaluate", session, expression=expression, awaitPromise=True, returnByValue=True,
                      timeout=timeout * 1000)
        if "exceptionDetails" in result:
            raise RuntimeError(f"the page threw: {result['exceptionDetails']}")
        return result["result"]["value"]
    finally:
        out.close()
        into.close()
        proc.kill()
        proc.wait()
