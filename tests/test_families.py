"""The backend seam (docs/backends.md): every chip row has a family, every family answers the
``Family`` interface, and no code outside ``inspector/families/`` and the chip table asks a chip's
kind (the layers above ask ``family_of(chip)``)."""
from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from conftest import ROOT
from inspector.base.chips import CHIPS, get_chip
from inspector.base.families import Capabilities, CompilePath, Family, FamilyInfo
from inspector.families import FAMILIES, family_of


# what asks a chip's kind: its kind compared with a family's name, the is_tpu/is_local properties,
# a compile platform compared with a name
KIND_TESTS = re.compile(r"\.is_tpu\b|\.is_local\b"
                        r"|\bkind\s*(?:==|!=)\s*['\"](?:tpu|gpu|local)['\"]"
                        r"|\bkind\s+(?:not\s+)?in\s+[(\[{]\s*['\"](?:tpu|gpu|local)['\"]"
                        r"|\bplatform\s*(?:==|!=)\s*['\"]")
ALLOWED = ("inspector/families/", "inspector/base/chips.py")


def kind_tests(root: Path = ROOT) -> list[str]:
    """``path:line: text`` of each kind test outside the families and the chip table."""
    found = []
    for top in ("inspector", "views"):
        for path in sorted((root / top).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(ALLOWED):
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if KIND_TESTS.search(line.split("#", 1)[0]):
                    found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_code_outside_the_families_asks_a_chips_kind():
    assert kind_tests() == [], "ask family_of(chip) (its info.can, compile_path, ...), not the chip's kind"


@pytest.mark.parametrize("line", ["if chip.is_tpu:", "ok = not c.is_local", 'if chip.kind == "gpu":',
                                  "x = [c for c in chips if c.kind in ('tpu', 'gpu')]", 'if backend.platform != "cpu":'])
def test_the_kind_check_finds_an_added_kind_test(tmp_path, line):
    (tmp_path / "inspector" / "verbs").mkdir(parents=True)
    (tmp_path / "inspector" / "families").mkdir()
    (tmp_path / "inspector" / "verbs" / "new.py").write_text(f"def f(chip, chips, c, backend):\n    {line}\n")
    (tmp_path / "inspector" / "families" / "own.py").write_text(f"def f(chip, chips, c, backend):\n    {line}\n")
    assert kind_tests(tmp_path) == [f"inspector/verbs/new.py:2: {line}"]


def test_kernel_and_change_kinds_are_not_chip_kinds(tmp_path):
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "v.py").write_text('a = k.kind == "custom-call:pallas"\nb = change.kind != "params"\n')
    assert kind_tests(tmp_path) == []


def test_every_chip_row_has_a_family():
    assert {c.kind for c in CHIPS} <= set(FAMILIES)
    for chip in CHIPS:
        assert family_of(chip).info.name == chip.kind


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_each_family_answers_the_interface(name):
    family = FAMILIES[name]
    assert isinstance(family.info, FamilyInfo) and isinstance(family.info.can, Capabilities)
    for method in (m for m in dir(Family) if not m.startswith("_") and m != "info"):
        ours, theirs = inspect.signature(getattr(Family, method)), inspect.signature(getattr(family, method))
        assert list(theirs.parameters) == list(ours.parameters)[1:], f"{name}.{method}{theirs} is not Family's {ours}"
    chip = next(c for c in CHIPS if c.kind == name)
    path = family.compile_path(chip)
    for member in (m for m in dir(CompilePath) if not m.startswith("_")):
        assert hasattr(path, member), f"{name}'s compile path has no {member}"


def test_what_each_family_can_do():
    """The rules the verbs ask, as the kind tests decided them before the seam."""
    tpu, gpu, spec, cpu = (family_of(get_chip(n)).info.can for n in ("tpu-v5e", "h100", "b200", "cpu"))
    assert (tpu.compile, tpu.fix, tpu.simulate, tpu.baseline, tpu.time, tpu.measure) == (True, True, True, True, "simulated", True)
    # a GPU's kernels run in the interpreter (diff), simulating no chip; --measure on the attached GPU
    assert (gpu.compile, gpu.kernels, gpu.run, gpu.simulate, gpu.check, gpu.sweep, gpu.fix, gpu.measure) == \
        (True, True, True, False, True, True, True, True)
    assert (spec.compile, spec.run, spec.check, spec.sweep, spec.fix, spec.measure) == (False, False, True, True, False, False)
    assert (cpu.check, cpu.sweep, cpu.run, cpu.kernels, cpu.measure) == (False, False, True, False, False)


def test_the_compile_path_a_family_hands_is_the_one_the_row_names():
    from inspector.compilation.compile_paths import LibtpuPath, LocalPath, SpecOnlyPath

    assert isinstance(family_of(get_chip("tpu-v5e")).compile_path(get_chip("tpu-v5e")), LibtpuPath)
    assert type(family_of(get_chip("cpu")).compile_path(get_chip("cpu"))) is LocalPath
    from inspector.families.gpu.compile.path import GpuCompilePath

    assert type(family_of(get_chip("h100")).compile_path(get_chip("h100"))) is GpuCompilePath
    path = family_of(get_chip("b200")).compile_path(get_chip("b200"))  # no XLA target config: spec only
    assert isinstance(path, SpecOnlyPath) and "spec-only target" in (path.available() or "")
