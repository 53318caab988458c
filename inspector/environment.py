"""Process settings that must be in place before jax is imported.

libtpu prints start-up noise (TPU_WORKER_HOSTNAMES, InitGoogle) when it looks for a TPU that is
not there, and takes a lock file that stops two processes from loading it. On a machine with no
TPU we set the variables that keep it quiet and shareable (facts.md section 1); where a TPU is
attached, or the user set a variable, we leave it alone.

libtpu also writes a log file under /tmp/tpu_logs on every run that loads it, and nothing removes
them. Unless the user asks for logs (``--debug``, or their own ``TPU_LOG_DIR``), libtpu's log
folder is a temporary one, removed when this process exits; the child processes that compile
inherit it.
"""
from __future__ import annotations

import atexit
import glob
import importlib.util
import logging
import os
import shutil
import tempfile

_QUIET_LIBTPU = {
    "TPU_SKIP_MDS_QUERY": "1",
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_ACCELERATOR_TYPE": "v5litepod-4",  # only silences the probe; the topology picks the chip
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


def tpu_attached() -> bool:
    return bool(glob.glob("/dev/accel*") or glob.glob("/dev/vfio/[0-9]*"))


def _cuda_plugin_installed() -> bool:
    return any(importlib.util.find_spec(m) for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))


_OWN_LOG_DIR: str | None = None


def _private_tpu_log_dir() -> None:
    """Point libtpu's logs (TPU_LOG_DIR, read when libtpu loads) at a folder removed at exit."""
    global _OWN_LOG_DIR
    if _OWN_LOG_DIR is not None or os.environ.get("TPU_LOG_DIR"):
        return
    try:
        _OWN_LOG_DIR = tempfile.mkdtemp(prefix="inspector-tpu-logs-")
    except OSError:
        return  # no writable temp folder: libtpu's default it is
    os.environ["TPU_LOG_DIR"] = _OWN_LOG_DIR
    atexit.register(shutil.rmtree, _OWN_LOG_DIR, ignore_errors=True)


def prepare(debug: bool = False) -> None:
    """Set the environment for a quiet jax; call before the first ``import jax``."""
    if not debug:
        _private_tpu_log_dir()
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        os.environ.setdefault("GLOG_minloglevel", "3")
        # CRITICAL, not ERROR: a kernel that raises inside interpret mode makes jax log the
        # callback's whole traceback at ERROR; the diff reports it as a one-line finding instead.
        logging.getLogger("jax").setLevel(logging.CRITICAL)
    if tpu_attached():
        return
    for key, value in _QUIET_LIBTPU.items():
        os.environ.setdefault(key, value)
    # Without a TPU, jax would still probe libtpu for a local backend (slow and noisy):
    # the local backend is the CPU, plus CUDA where its plugin and a GPU are there.
    if "JAX_PLATFORMS" not in os.environ:
        gpu = os.path.exists("/dev/nvidiactl") and _cuda_plugin_installed()
        os.environ["JAX_PLATFORMS"] = "cuda,cpu" if gpu else "cpu"
