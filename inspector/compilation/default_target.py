"""The chip a verb compiles for when the command line names none: one rule for every verb, the
terminal UI, its overview in a pipe and the Python API alike:

1. the TPU attached to this machine (read without opening it), else
2. the project's default: ``$INSPECTOR_TARGET``, else ``target`` in the ``[tool.inspector]`` table
   of the nearest pyproject.toml from the current folder up, else
3. tpu-v5e (DEFAULT_TPU): TPU compiles need no TPU, and a Pallas TPU kernel compiled for the CPU
   is the interpreter's HLO, not the kernel (`--target cpu` still gives it).

check, fix and tune are about TPUs: a project default that is not a TPU leaves them at rule 3.
"""
from __future__ import annotations

import os
import tomllib
from pathlib import Path

from ..base.chips import DEFAULT_TPU, get_chip
from ..base.errors import UsageError
from .backends import attached_chip

TPU_VERBS = ("check", "fix", "tune")  # verbs about TPUs: never the CPU
ENVIRONMENT = "INSPECTOR_TARGET"
RULE = f"the attached TPU; else ${ENVIRONMENT} or [tool.inspector] target in pyproject.toml; else {DEFAULT_TPU}"


def project_default(start: Path | None = None) -> tuple[str, str] | None:
    """(chip, where it was set) from $INSPECTOR_TARGET or the nearest pyproject.toml's
    [tool.inspector] target; None where neither sets one. A chip that is not one raises
    UsageError naming where it was set."""
    if named := os.environ.get(ENVIRONMENT, "").strip():
        return _valid(named, f"${ENVIRONMENT}"), f"${ENVIRONMENT}"
    folder = (start or Path.cwd()).resolve()
    for parent in (folder, *folder.parents):
        path = parent / "pyproject.toml"
        if not path.is_file():
            continue
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("inspector", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise UsageError(f"cannot read {path} for [tool.inspector] target: {err} (fix it, or give --target)") from err
        value = table.get("target") if isinstance(table, dict) else None
        if value is None:
            return None  # the nearest project says nothing: the inspector's own default
        where = f"[tool.inspector] target in {path}"
        if not isinstance(value, str):
            raise UsageError(f"{where} is {value!r}: give one chip name as a string, e.g. target = \"tpu-v6e\"")
        return _valid(value, where), where
    return None


def _valid(value: str, where: str) -> str:
    try:
        return get_chip(value).name
    except UsageError as err:
        raise UsageError(f"{where} = {value!r}: {err}") from err


def default_target(verb: str) -> tuple[str, str]:
    """(chip, why) for ``verb`` when --target is not given."""
    attached = attached_chip()
    if attached is not None:
        return attached.name, "no --target: the TPU attached to this machine"
    configured = project_default()
    if configured is not None and (verb not in TPU_VERBS or get_chip(configured[0]).topology is not None):  # a TPU row
        return configured[0], f"no --target: {configured[1]}"
    return DEFAULT_TPU, f"no --target and no TPU here: {DEFAULT_TPU}, the default (--target cpu for the CPU)"
