"""The pictures of README.md and docs/tui.md, made from the real terminal UI (Textual's own SVG
screenshot, as the snapshot tests take them) on the samples, TPU targets compiled deviceless:

    .venv/bin/python tests/make_screenshots.py            # every picture into docs/images/
    .venv/bin/python tests/make_screenshots.py pallas     # those named

Run it after a change to what a tab shows; the pictures are committed (docs/images/*.svg)."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
SIZE = (120, 34)

# name: (target, chip, keys pressed once the load is done, Session switches)
SHOTS: dict[str, tuple[str, str, tuple[str, ...], dict]] = {
    "tui-flash": ("samples/attention.py:flash", "tpu-v5e", ("1",), {"sets": ["block_q=4096"]}),
    "tui-fusions": ("samples/attention.py:naive", "tpu-v5e", ("5",), {}),
    "tui-pallas": ("samples/attention.py:flash", "tpu-v5e", ("6", "right"), {}),
    "tui-bundles": ("samples/matmul.py:tiled", "tpu-v5e", ("v",), {"time": True}),
    "tui-diff": ("samples/bugs.py:dropped_tail", "cpu", ("7", "d"), {}),
}


async def _shoot(name: str) -> Path:
    from inspector.session import Session
    from inspector.views.tui.app import InspectorApp

    spec, chip, keys, extra = SHOTS[name]
    app = InspectorApp(Session(spec, chip, **extra))
    app.clock = lambda: 0.0  # the status line's seconds: 0.0, whatever the machine's load
    async with app.run_test(size=SIZE) as pilot:
        while not app.tabs_ready:
            await pilot.pause(0.05)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        return Path(app.save_screenshot(f"{name}.svg", str(IMAGES)))


def main(names: list[str]) -> int:
    IMAGES.mkdir(parents=True, exist_ok=True)
    for name in names or list(SHOTS):
        print(f"wrote {asyncio.run(_shoot(name)).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
