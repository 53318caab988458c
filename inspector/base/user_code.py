"""Where the user's code failed: one line naming their file and line, never ours or jax's."""
from __future__ import annotations

import os
import traceback

_OWN_DIR = os.path.dirname(os.path.abspath(__file__))  # the inspector's own frames are not the user's


def _is_library(filename: str) -> bool:
    return (filename.startswith("<") or filename.startswith(_OWN_DIR)
            or f"{os.sep}site-packages{os.sep}" in filename or f"{os.sep}lib{os.sep}python3" in filename)


def describe_error(err: BaseException, path: str | None, doing: str) -> str:
    """One line: where the user's code raised (the deepest frame in ``path``, else the deepest
    outside jax, the standard library and the inspector), the error, and what we were doing."""
    frames = traceback.extract_tb(err.__traceback__)
    wanted = os.path.abspath(path) if path else None
    mine = [f for f in frames if wanted and os.path.abspath(f.filename) == wanted]
    mine = mine or [f for f in frames if not _is_library(f.filename)]
    where = f"{short_path(mine[-1].filename)}:{mine[-1].lineno}: " if mine else ""
    if isinstance(err, SystemExit):  # sys.exit() in the user's code: say so, with its code
        return f"{where}the code called sys.exit({err.code!r}) ({doing}; remove the call, or --debug for the traceback)"
    text = str(err).strip()
    first = text.splitlines()[0] if text else ""
    what = f"{type(err).__name__}: {first}" if first else type(err).__name__
    return f"{where}{what} ({doing}; --debug shows the traceback)"


def reraise_interrupt(err: BaseException) -> None:
    """Re-raise a real Ctrl-C. In the CLI's child process SIGINT is ignored (the parent answers
    it), so a KeyboardInterrupt there was raised by the user's code: a failure like any other."""
    import signal

    if isinstance(err, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        raise err


def short_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path
