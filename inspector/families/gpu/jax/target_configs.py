"""XLA's per-GPU target configs (``specs/*.txtpb``, GpuTargetConfigProto text) and the figures a
chip row takes from them. Text in, data out: the scalar fields of ``gpu_device_info`` (nested
messages left out but the compute capability), as numbers or strings."""
from __future__ import annotations

import re
from pathlib import Path

SPECS = Path(__file__).resolve().parent.parent / "specs"

# `key: value` at the first level inside gpu_device_info { ... }; values are numbers, quoted strings
# or enum names
_FIELD = re.compile(r'^\s*(\w+):\s*("(?:[^"\\]|\\.)*"|[\w.+-]+)\s*$')


def spec_text(file: str) -> str:
    """The target config ``file`` (a name in ``specs/``) as text; FileNotFoundError when absent."""
    return (SPECS / file).read_text()


def _value(raw: str) -> int | float | str:
    if raw.startswith('"'):
        return raw[1:-1]
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def device_info(text: str) -> dict[str, int | float | str]:
    """The first-level scalar fields of ``gpu_device_info`` (and the top level's
    ``device_description_str``), and ``compute_capability`` as
    "MAJOR.MINOR" with an "a" for Hopper's accelerated features (sm_90a), as ptxas names it."""
    fields: dict[str, int | float | str] = {}
    depth = 0
    section: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith("{"):
            section.append(stripped[:-1].strip())
            depth += 1
            continue
        if stripped == "}":
            section.pop()
            depth -= 1
            continue
        match = _FIELD.match(line)
        if not match:
            continue
        key, value = match.group(1), _value(match.group(2))
        if depth == 0 and key == "device_description_str":  # the A100 spec has no device `name`
            fields[key] = value
        elif section[:1] != ["gpu_device_info"]:
            continue
        elif depth == 1:
            fields[key] = value
        elif section[1:] == ["cuda_compute_capability"]:
            fields[f"cc_{key}"] = value
    if "cc_major" in fields:
        accelerated = fields.pop("cc_feature_extension", "NONE") == "ACCELERATED_FEATURES"
        fields["compute_capability"] = f"{fields.pop('cc_major')}.{fields.pop('cc_minor', 0)}" + ("a" if accelerated else "")
    return fields
