"""For tests/bench/docs_on_vm.sh on a TPU VM, in every Python that inherits PYTHONPATH (the CLI's
workers too): the VM runs the docs as the dev machine does, so that only the CPU differs.

- The chip is hidden from the inspector (its one test of an attached TPU globs /dev/accel* and
  /dev/vfio/N): no --target is tpu-v5e by the default rule, and compiles are deviceless.
- With $H_DOCS_REPO set, inspector, inspector.kernels and inspector.views import from that checkout
  as the editable install maps them (kernels/ is then the project's code, not a library's, and a
  kernel's source reads kernels/matmul.py:53 as the docs show, not the sample's call).
Chains to any other sitecustomize on the path."""
import glob as _glob
import importlib.machinery as _machinery
import importlib.util as _util
import os as _os
import sys as _sys

_real_glob = _glob.glob


def _no_tpu(pattern, *args, **kwargs):
    if isinstance(pattern, str) and pattern.startswith(("/dev/accel", "/dev/vfio")):
        return []
    return _real_glob(pattern, *args, **kwargs)


_glob.glob = _no_tpu


class _Checkout:  # a meta path finder, first on the path: the editable install's three packages
    folders = {"inspector": "inspector", "inspector.kernels": "kernels", "inspector.views": "views"}

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname not in cls.folders:
            return None
        return _util.spec_from_file_location(fullname, _os.path.join(_os.environ["H_DOCS_REPO"], cls.folders[fullname], "__init__.py"))


if _os.environ.get("H_DOCS_REPO"):
    _sys.meta_path.insert(0, _Checkout)
_here = _os.path.dirname(_os.path.abspath(__file__))
_spec = _machinery.PathFinder.find_spec("sitecustomize", [p for p in _sys.path if _os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _spec.loader.exec_module(type(_sys)("_chained_sitecustomize"))
