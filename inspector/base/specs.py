"""Shape specs in HLO spelling (``bf16[4,2048,128]``, ``f32[]``, ``k=i32[16]``): parsed, never eval'd."""
from __future__ import annotations

import dataclasses
import re

from .errors import UsageError

# HLO names first, then the numpy-style aliases users type anyway.
DTYPES = {
    "pred": "bool", "bool": "bool",
    "s4": "int4", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "i4": "int4", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u4": "uint4", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "c64": "complex64", "c128": "complex128",
}
HLO_NAMES = {numpy: hlo for hlo, numpy in reversed(list(DTYPES.items()))}

_TOKEN = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*)=)?(?P<dtype>[A-Za-z]\w*)\[(?P<dims>[^\]]*)\]$")


@dataclasses.dataclass(frozen=True)
class ArgSpec:
    """One input: its keyword name (None when positional), numpy dtype name and shape."""

    dtype: str
    shape: tuple[int, ...]
    name: str | None = None

    def __str__(self) -> str:
        prefix = f"{self.name}=" if self.name else ""
        return f"{prefix}{hlo_type(self.dtype, self.shape)}"


def hlo_type(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{HLO_NAMES.get(dtype, dtype)}[{','.join(map(str, shape))}]"


def _split(text: str) -> list[str]:
    """Split on spaces and on commas outside brackets."""
    current: list[str]
    tokens, depth, current = [], 0, []
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if depth == 0 and (ch.isspace() or ch == ","):
            if current:
                tokens.append("".join(current))
                current = []
            continue
        current.append(ch)
    if current:
        tokens.append("".join(current))
    return tokens


def parse_token(token: str) -> ArgSpec:
    m = _TOKEN.match(token)
    if not m:
        raise UsageError(f"bad shape spec {token!r}: write dtype[dims], e.g. f32[8,128] or bf16[] (name=f32[4] for a keyword)")
    dtype = m["dtype"].lower()
    if dtype not in DTYPES:
        known = "bf16 f16 f32 f64 s8 s16 s32 s64 u8 u32 pred"
        raise UsageError(f"unknown dtype {m['dtype']!r} in {token!r}: use one of {known} (HLO spelling)")
    dims = []
    for d in (x.strip() for x in m["dims"].split(",")) if m["dims"].strip() else ():
        if not _DIM.match(d):  # ASCII digits only: '²'.isdigit() is True, int('²') is not
            raise UsageError(f"bad dimension {d!r} in {token!r}: dimensions are non-negative integers, e.g. f32[8,128]")
        dims.append(int(d))
    numpy_dtype = DTYPES[dtype]
    elements = 1
    for d in dims:
        elements *= d
    if any(d > _INT64_MAX for d in dims) or elements * _bits(numpy_dtype) // 8 > _INT64_MAX:
        raise UsageError(f"{token!r} is too large: its size in bytes must fit in int64 (at most {_INT64_MAX})")
    return ArgSpec(numpy_dtype, tuple(dims), m["name"])


_DIM = re.compile(r"^[0-9]+$", re.ASCII)
_INT64_MAX = 2**63 - 1


def _bits(numpy_dtype: str) -> int:
    if numpy_dtype == "bool":
        return 8
    if numpy_dtype.startswith("float8"):
        return 8
    width = re.search(r"(\d+)$", numpy_dtype)
    assert width is not None  # every other name in DTYPES ends in its width
    return int(width.group(1))


def parse_specs(text: str) -> list[ArgSpec]:
    """Parse a whole ``--args`` string; positional specs must come before keyword ones."""
    specs = [parse_token(t) for t in _split(text)]
    seen_kw: dict[str, ArgSpec] = {}
    for s in specs:
        if s.name is None and seen_kw:
            raise UsageError(f"positional input {s} comes after a keyword input: put name=... specs last")
        if s.name is not None and s.name in seen_kw:
            raise UsageError(f"keyword input {s.name!r} is given twice ({seen_kw[s.name]} and {s}): give each name once")
        if s.name is not None:
            seen_kw[s.name] = s
    if not specs:
        raise UsageError("empty shape spec: give inputs like \"f32[8,128] f32[8,128]\"")
    return specs
