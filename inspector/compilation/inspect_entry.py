"""A file's ``INSPECT`` entry for one function, checked: a dict of known keys (a mistyped key would
drop its setting silently, so it is refused with the nearest key), and diff's ``int_ranges`` naming
real integer inputs with ranges their dtype holds."""
from __future__ import annotations

import difflib

from ..base.errors import UsageError


OPTION_KEYS = ("atol", "rtol", "int_ranges", "shapes")  # read from Target.options: by diff; shapes by tune
INSPECT_KEYS = ("args", "params", "reference", *OPTION_KEYS, "mesh", "shardings")


def closest(word: str, known) -> str | None:
    """The known name nearest to a mistyped one, if any is close."""
    found = difflib.get_close_matches(word, [k for k in known if isinstance(k, str)], n=1)
    return found[0] if found else None


def _unknown_keys(entry: dict, spec: str, func: str) -> None:
    """A mistyped INSPECT key would be ignored and its setting silently lost: refuse it."""
    for key in entry:
        if key not in INSPECT_KEYS:
            close = closest(str(key), INSPECT_KEYS)
            raise UsageError(f"{spec}: INSPECT[{func!r}] has an unknown key {key!r}"
                             + (f" (did you mean {close!r}?)" if close else "") + f"; it takes {', '.join(INSPECT_KEYS)}")


def inspect_entry(module, spec: str, func: str) -> dict:
    """The file's ``INSPECT[func]`` (empty where there is none), its shape and keys checked."""
    table = getattr(module, "INSPECT", None) or {}
    if not isinstance(table, dict):
        raise UsageError(f"{spec}: INSPECT must be a dict keyed by function name")
    entry = table.get(func) or {}
    if not isinstance(entry, dict):
        raise UsageError(f"{spec}: INSPECT[{func!r}] must be a dict such as {{\"args\": \"f32[8,128]\", \"params\": {{...}}}}, "
                         f"not a {type(entry).__name__}")
    _unknown_keys(entry, spec, func)
    if not isinstance(entry.get("params") or {}, dict):
        raise UsageError(f"{spec}: INSPECT[{func!r}][\"params\"] must be a dict of static keyword values, "
                         f"e.g. {{\"block_q\": [128, 256]}}, not a {type(entry['params']).__name__}")
    return entry


def check_int_ranges(entry: dict, names: list[str], spec: str, func: str, inputs: dict | None = None) -> None:
    """diff reads int_ranges as {input name: (low, high)}: another shape would fail mid-run with an
    internal error, and a mistyped name would drop its range silently."""
    ranges = entry.get("int_ranges")
    if ranges is None:
        return
    where = f"{spec}: INSPECT[{func!r}][\"int_ranges\"]"
    if not isinstance(ranges, dict):
        raise UsageError(f"{where} must be a dict of input name to (low, high), e.g. {{{names[0] if names else 'x'!r}: "
                         f"(-8, 8)}}, not a {type(ranges).__name__}")
    for name, bounds in ranges.items():
        if name not in names:
            close = closest(str(name), names)
            raise UsageError(f"{where} names {name!r}, which is no input of {func}"
                             + (f" (did you mean {close!r}?)" if close else "") + f"; its inputs are {', '.join(names) or 'none'}")
        ok = (isinstance(bounds, (tuple, list)) and len(bounds) == 2
              and all(hasattr(b, "__index__") and not isinstance(b, bool) for b in bounds) and bounds[0] < bounds[1])
        if not ok:
            raise UsageError(f"{where}[{name!r}] must be two integers (low, high) with low < high (high excluded), not {bounds!r}")
        if inputs is not None and name in inputs:
            _check_range_fits(inputs[name], name, tuple(bounds), where)


def _check_range_fits(tree, name: str, bounds: tuple, where: str) -> None:
    """int_ranges sets the values of an input's integer arrays: one with none (a float input) would
    drop the range silently, and a range past the dtype would wrap around."""
    import jax  # only here: the rest of the entry is checked before jax loads
    import numpy as np

    dtypes = [np.dtype(leaf.dtype) for leaf in jax.tree.leaves(tree) if hasattr(leaf, "dtype")]
    integers = [d for d in dtypes if np.issubdtype(d, np.integer)]
    if dtypes and not integers:
        raise UsageError(f"{where} names {name!r}, a {', '.join(sorted({str(d) for d in dtypes}))} input: int_ranges "
                         "sets the values of integer inputs (floats are drawn from a normal distribution)")
    low, high = bounds
    for d in integers:
        info = np.iinfo(d)
        if low < info.min or high - 1 > info.max:
            raise UsageError(f"{where}[{name!r}] = {bounds!r} does not fit {d} ({info.min} to {info.max}): "
                             f"give a range inside it (high is excluded, so up to ({info.min}, {info.max + 1}))")
