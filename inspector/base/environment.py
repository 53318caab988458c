"""Process settings that must be in place before jax is imported.

libtpu prints start-up noise (TPU_WORKER_HOSTNAMES, InitGoogle) when it looks for a TPU that is
not there, and takes a lock file that stops two processes from loading it. On a machine with no
TPU we set the variables that keep it quiet and shareable (without them libtpu prints start-up
warnings and locks /tmp/libtpu_lockfile against a second process). On a machine with a TPU the
inspector's own processes are deviceless too: they compile for the chip through libtpu without
opening it (JAX_PLATFORMS=cpu, the lock file skipped), so they work while a training job, a
notebook or another inspector holds the chip; only the work that runs a program on the chip
(``chip_env``: diff, --measure) opens it. A variable the user set is never changed.
"""
from __future__ import annotations

import contextlib
import glob
import importlib.util
import logging
import os
import traceback
import warnings
from typing import Callable

from .errors import ChipBusy, NoChip

_QUIET_LIBTPU = {
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",  # only silences the probe; the topology picks the chip
}
# libtpu's lock file lets one process load it at a time: a deviceless compile needs no lock, and a
# process that opens the chip finds it busy all the same when another holds it
_SHARED_LIBTPU = {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
# set (to "1") in the environment of a process whose JAX_PLATFORMS=cpu the inspector chose, so that
# its children know the choice was ours (chip_env undoes it), not the user's
DEVICELESS_MARK = "INSPECTOR_DEVICELESS"
# set in the environment of the one kind of process that opens the chip (chip_env)
ON_CHIP_MARK = "INSPECTOR_ON_CHIP"


def tpu_attached() -> bool:
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def libtpu_available() -> bool:
    """Whether libtpu is installed (TPU targets compile through it, without a TPU)."""
    return importlib.util.find_spec("libtpu") is not None


def _cuda_plugin_installed() -> bool:
    return any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


_QUIET_LOGS = {"TF_CPP_MIN_LOG_LEVEL": "3", "GLOG_minloglevel": "3"}
# jax's TPU start-up on a v5e or newer VM without transparent hugepages warns in two lines at every
# command, deviceless ones too: `inspector doctor` says it once (HUGEPAGES_FIX), the rest stay quiet
HUGEPAGES_WARNING = "Transparent hugepages are not enabled"
HUGEPAGES_FIX = 'sudo sh -c "echo always > /sys/kernel/mm/transparent_hugepage/enabled"'
_set_by_us: set[str] = set()  # the variables prepare() set itself (never the user's own)


def _setdefault(key: str, value: str) -> None:
    if key not in os.environ:
        os.environ[key] = value
        _set_by_us.add(key)


def local_platforms() -> str:
    """What jax's local backend should be where no TPU is attached: the CPU, plus CUDA where its
    plugin and a GPU are there (else jax probes libtpu for a TPU, slowly and noisily)."""
    gpu = os.path.exists("/dev/nvidiactl") and _cuda_plugin_installed()
    return "cuda,cpu" if gpu else "cpu"


_OWN_LOG_DIR: str | None = None


def _private_tpu_log_dir() -> None:
    """Point libtpu's logs (TPU_LOG_DIR, read when libtpu loads) at a folder removed at exit."""
    global _OWN_LOG_DIR
    if _OWN_LOG_DIR is not None or os.environ.get("TPU_LOG_DIR"):
        return
    from .tempdirs import new_folder  # removed at exit; swept by the next run if this process is killed

    try:
        _OWN_LOG_DIR = new_folder("tpu-logs")
    except OSError:
        return  # no writable temp folder: libtpu's default it is
    os.environ["TPU_LOG_DIR"] = _OWN_LOG_DIR


def prepare(debug: bool = False, *, jax_logs: bool = True, own_process: bool = True) -> None:
    """Set the environment for a quiet jax; call before the first ``import jax``. Only unset
    variables are set. ``debug`` undoes the log quieting an earlier call (``import inspector``)
    made, so ``--debug`` shows jax's and libtpu's logs; ``jax_logs`` also raises the jax logger
    to CRITICAL for the whole process (the CLI; the Python API does it per call, see quiet()).
    ``own_process``: the process is the inspector's (the CLI and its children), so on a machine
    with a TPU it stays off the chip; False in a user's process (``import inspector``), whose
    jax keeps the TPU it would have had."""
    if debug:
        for key in _QUIET_LOGS:
            if key in _set_by_us:
                os.environ.pop(key, None)
                _set_by_us.discard(key)
        if logging.getLogger("jax").level == logging.CRITICAL:
            logging.getLogger("jax").setLevel(logging.NOTSET)
    else:
        _private_tpu_log_dir()
        for key, value in _QUIET_LOGS.items():
            _setdefault(key, value)
        if jax_logs:
            # CRITICAL, not ERROR: a kernel that raises inside interpret mode makes jax log the
            # callback's whole traceback at ERROR; the diff reports it as a one-line finding instead.
            logging.getLogger("jax").setLevel(logging.CRITICAL)
    for key, value in _SHARED_LIBTPU.items():
        _setdefault(key, value)
    if own_process:
        _quiet_hugepages()
    if tpu_attached():
        if own_process and "JAX_PLATFORMS" not in os.environ and os.environ.get(ON_CHIP_MARK) != "1":
            _setdefault("JAX_PLATFORMS", "cpu")
            _setdefault(DEVICELESS_MARK, "1")
        return
    for key, value in _QUIET_LIBTPU.items():
        _setdefault(key, value)
    _setdefault("JAX_PLATFORMS", local_platforms())


def _quiet_hugepages() -> None:
    """jax's hugepages warning off in this process and, through PYTHONWARNINGS, in its children
    (the compile workers, the UI's worker), which start jax of their own."""
    warnings.filterwarnings("ignore", message=HUGEPAGES_WARNING, category=UserWarning)
    rule = f"ignore:{HUGEPAGES_WARNING}:UserWarning"
    current = os.environ.get("PYTHONWARNINGS", "")
    if rule not in current.split(","):
        os.environ["PYTHONWARNINGS"] = f"{current},{rule}" if current else rule


def platforms_ours() -> bool:
    """Whether JAX_PLATFORMS is the inspector's choice (this process's or a parent's), not the user's."""
    return "JAX_PLATFORMS" in _set_by_us or os.environ.get(DEVICELESS_MARK) == "1"


def chip_env() -> dict[str, str | None]:
    """The variables a process that runs programs on the attached TPU needs changed: the
    deviceless choice undone (None: unset), so jax opens the chip as it would for the user."""
    if os.environ.get(DEVICELESS_MARK) != "1":
        return {ON_CHIP_MARK: "1"}
    return {"JAX_PLATFORMS": None, DEVICELESS_MARK: None, ON_CHIP_MARK: "1"}


def may_use_chip() -> bool:
    """A TPU is attached and nothing the user set keeps jax off it."""
    if not tpu_attached():
        return False
    return platforms_ours() or "tpu" in os.environ.get("JAX_PLATFORMS", "tpu").split(",")


def prepare_on_import(backends_started: Callable[[], bool]) -> str:
    """What ``import inspector`` does. Before jax is imported: prepare() (variables only; the jax
    logger is left to the user). After: the libtpu variables still count (libtpu reads them when it
    loads, at the first TPU-target compile), and where jax has not started a backend yet and nobody
    chose its platforms, ``jax_platforms`` is set through jax.config as the variable would have;
    once the user's jax has started its backends, they stay as they are. Returns which case held:
    "before-jax", "jax-configured" or "jax-running". ``backends_started`` reads jax's private state
    (``jax_internals.runtime``, a layer above this one): the package's ``__init__`` hands it in."""
    global import_state
    import sys

    if "jax" not in sys.modules:
        prepare(jax_logs=False, own_process=False)
        import_state = "before-jax"
        return import_state
    user_platforms = "JAX_PLATFORMS" in os.environ
    prepare(jax_logs=False, own_process=False)
    if backends_started():
        import_state = "jax-running"
        return import_state
    import jax

    if not user_platforms and not tpu_attached() and not jax.config.jax_platforms:  # type: ignore[attr-defined]  # jax's flags are set at run time
        jax.config.update("jax_platforms", os.environ["JAX_PLATFORMS"])
    import_state = "jax-configured"
    return import_state


import_state: str | None = None  # what prepare_on_import() found: "before-jax", "jax-configured" or "jax-running"


def backend_failure(err: BaseException):
    """A UsageError when ``err`` is jax failing to start the backends JAX_PLATFORMS names (a
    platform this machine lacks, a misspelt one), else None: the user's setting, not our bug."""
    from .errors import UsageError

    platforms = os.environ.get("JAX_PLATFORMS")
    if not platforms or platforms_ours():
        return None
    frames = traceback.extract_tb(err.__traceback__)
    in_bridge = bool(frames) and frames[-1].filename.endswith("xla_bridge.py")
    if not ((isinstance(err, RuntimeError) and "Unable to initialize backend" in str(err))
            or (isinstance(err, AssertionError) and in_bridge)):
        return None
    why = str(err).split(" (set JAX_PLATFORMS", 1)[0].strip() or "no such backend here"
    return UsageError(f"JAX_PLATFORMS={platforms}: jax cannot start it ({why}); unset JAX_PLATFORMS "
                      "(the inspector picks cpu, or cuda where jax has a GPU) or set JAX_PLATFORMS=cpu")


def _utf8_of(text: str) -> str | None:
    """The UTF-8 reading of a name the locale could not decode (Python keeps its undecodable
    bytes as surrogates, PEP 383), or None when its bytes are not UTF-8 either."""
    import sys

    try:
        return text.encode(sys.getfilesystemencoding(), "surrogateescape").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def locale_hides_utf8(text: str) -> bool:
    """Whether ``text`` (a path or name from the command line) is valid UTF-8 that this process's
    locale could not decode (LC_ALL=C without UTF-8 mode): a fault of the locale, not of the name."""
    return _has_surrogates(text) and _utf8_of(text) is not None


LOCALE_FIX = "run with PYTHONUTF8=1 or a UTF-8 locale (e.g. LC_ALL=C.UTF-8)"


def reexec_for_utf8() -> None:
    """The command line holds a UTF-8 name that the C locale could not decode: run the same
    command again, now, in Python's UTF-8 mode (PEP 540), which reads it as the UTF-8 it is. jax
    needs the file name as text (its source locations), and what we print about the file must
    reach the terminal as the bytes it was given. Returns when nothing needs it (or exec failed:
    then the path check says what is wrong and how to fix it)."""
    import sys

    if sys.flags.utf8_mode or os.environ.get("PYTHONUTF8") == "1" or not any(map(locale_hides_utf8, sys.argv[1:])):
        return
    try:
        sys.stdout.flush()
        os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], dict(os.environ, PYTHONUTF8="1"))
    except OSError:
        return


@contextlib.contextmanager
def quiet(debug: bool = False):
    """Around one Python-API call: jax's logger at CRITICAL and Python warnings off (restored
    after), so a notebook cell prints nothing the user did not ask for."""
    if debug:
        yield
        return
    logger = logging.getLogger("jax")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    except (RuntimeError, AssertionError) as err:
        usage = backend_failure(err) or chip_failure(err)
        if usage is None:
            raise
        raise usage from err
    finally:
        logger.setLevel(level)


BUSY_SIGNS = ("Device or resource busy", "multi-process lockfile", "TPU is already in use", "already in use by process")


def chip_failure(err: BaseException) -> Exception | None:
    """ChipBusy or NoChip when ``err`` is jax failing to open the TPU, else None."""
    text = str(err)
    if any(sign in text for sign in BUSY_SIGNS):
        return ChipBusy("the TPU is held by another process (one process at a time can run on it: a training job, a "
                        "notebook, another `inspector diff/--measure`): run again when it is free; every deviceless verb "
                        "(show, check, tune, export without --measure) works meanwhile; in your own Python process, set "
                        "JAX_PLATFORMS=cpu before jax starts to compile for TPU targets without the chip")
    if "Unable to initialize backend 'tpu'" in text:
        return NoChip(f"jax cannot open the TPU here ({text.splitlines()[0][:200]})")
    return None
