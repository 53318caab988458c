"""The chip table against jax's own TPU table (pltpu.get_tpu_info_for_chip), and no chip fact
outside it."""
import ast
from pathlib import Path

import pytest
from jax.experimental.pallas import tpu as pltpu

from conftest import ROOT
from inspector.base.chips import CHIPS, MULTI_CORE_CHIPS, MXUS, TPU_INFO, get_chip, parse_targets
from inspector.base.errors import UsageError

TPUS = [c for c in CHIPS if c.is_tpu]


def _jax_info(chip):
    """jax reports per TensorCore; megacore chips (v4, v5p) are asked as one 2-core device."""
    version = pltpu.ChipVersion(chip.jax_chip_version)
    cores_per_device = 2 if chip.name in ("tpu-v4", "tpu-v5p") else 1
    return pltpu.get_tpu_info_for_chip(version, cores_per_device), chip.tensor_cores


@pytest.mark.parametrize("chip", TPUS, ids=lambda c: c.name)
def test_table_agrees_with_jax_tpu_info(chip):
    info, devices_per_chip = _jax_info(chip)
    assert chip.vmem_bytes == info.vmem_capacity_bytes
    assert chip.smem_bytes == info.smem_capacity_bytes
    assert chip.mxu == info.mxu_column_size
    assert (chip.sublanes, chip.lanes) == (info.num_sublanes, info.num_lanes)
    assert chip.hbm_bytes == info.hbm_capacity_bytes * devices_per_chip
    assert chip.hbm_bytes_per_s == pytest.approx(info.mem_bw_bytes_per_second * devices_per_chip, rel=0.01)
    assert chip.bf16_flops == pytest.approx(info.bf16_ops_per_second * devices_per_chip, rel=0.01)
    if info.int8_ops_per_second:
        assert chip.int8_ops == pytest.approx(info.int8_ops_per_second * devices_per_chip, rel=0.01)
    else:
        assert chip.int8_ops is None


def test_every_figure_has_a_source():
    for chip in CHIPS:
        for field in ("tensor_cores", "vmem_bytes", "scoped_vmem_bytes", "hbm_bytes", "hbm_bytes_per_s", "bf16_flops"):
            if getattr(chip, field) is not None:
                assert chip.sources.get(field), f"{chip.name}.{field} has no source"
    assert get_chip("tpu-v6e").sources["vmem_bytes"] == TPU_INFO


def test_scoped_limits_as_measured():
    # measured with libtpu 0.0.42.1: 16 MiB on v4/v5e/v5p, 32 MiB on v6e/TPU7x
    assert {c.name: c.scoped_vmem_bytes // 2**20 for c in TPUS} == {
        "tpu-v4": 16, "tpu-v5e": 16, "tpu-v5p": 16, "tpu-v6e": 32, "tpu-7x": 32}


def test_names_and_aliases():
    assert get_chip("ironwood") is get_chip("tpu-7x") is get_chip("TPU7X")
    assert [c.name for c in parse_targets("tpu-v5e, v6e,tpu-v5e")] == ["tpu-v5e", "tpu-v6e"]
    with pytest.raises(UsageError, match="unknown target"):
        get_chip("tpu-v9")


@pytest.mark.parametrize("chip", TPUS, ids=lambda c: c.name)
def test_clock_is_the_peak_over_the_mxu_work_of_a_cycle(chip):
    flops_per_cycle = chip.tensor_cores * MXUS[chip.name] * chip.mxu**2 * 2
    assert chip.clock_hz == pytest.approx(chip.bf16_flops / flops_per_cycle, rel=0.01)
    assert chip.sources["clock_hz"].startswith("derived")


def test_cores_per_device_as_libtpu_and_the_grid_split_say():
    """One count of a device's TensorCores: what libtpu's topology reports (tests/test_pods.py reads
    it), the cores a "parallel" grid axis is split over (measured), and every multi-core chip named."""
    for chip in TPUS:
        assert chip.cores_per_device == chip.parallel_grid_cores, chip.name
        if chip.tensor_cores > 1:
            assert chip.name.removeprefix("tpu-").replace("7x", "TPU7x") in MULTI_CORE_CHIPS
    assert sorted(MXUS) == sorted(c.name for c in TPUS)


# Chip facts outside inspector/base/chips.py that must stay, each with why (a path, or a path and a figure)
NOT_CHIP_FACTS = {
    "inspector/pallas/vmem_rules.py": "the VMEM rules' shares measured per chip and where XLA places a kernel's "
                                      "inputs: libtpu's allocations per chip, each with its evidence in "
                                      "vmem_rule_evidence.json, not figures of the hardware",
    ("inspector/libtpu/budget.py", 1.5e9): "CLOCK_GUESS_HZ: turns a roofline into cycles to plan the compiles "
                                           "of any chip, a guess that only happens to be v5e's clock",
}


def _chip_names() -> set[str]:
    names = set()
    for chip in CHIPS:
        if chip.is_tpu:
            names |= {chip.name, *chip.aliases, *(f"{chip.name}:{s}" for s in chip.topologies)}
            names |= {chip.topology, *(f"{chip.topology.split(':')[0]}:{s}" for s in chip.topologies)}
    return {n.lower() for n in names}


def _figures() -> set[float]:
    fields = ("hbm_bytes", "hbm_bytes_per_s", "bf16_flops", "int8_ops", "ici_bytes_per_s", "hbm_device_bytes", "clock_hz")
    return {float(getattr(c, f)) for c in CHIPS for f in fields if getattr(c, f)}


def chip_facts(root: Path = ROOT) -> list[str]:
    """Every chip name used as a value (a string that is the whole name: a key, a default, a test of
    the chip's name; names inside a message or a docstring are examples) and every chip figure
    written as a number, in inspector/ and views/ outside base/chips.py."""
    names, figures, found = _chip_names(), _figures(), []
    for path in sorted([*(root / "inspector").rglob("*.py"), *(root / "views").rglob("*.py")]):
        rel = path.relative_to(root).as_posix()
        if rel == "inspector/base/chips.py" or "/vendor/" in rel or rel in NOT_CHIP_FACTS:
            continue
        tree = ast.parse(path.read_text())
        docs = {id(node.body[0].value) for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or id(node) in docs:
                continue
            if isinstance(node.value, str) and node.value.strip().lower() in names:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
            elif isinstance(node.value, (int, float)) and not isinstance(node.value, bool) and node.value >= 1e8 \
                    and float(node.value) in figures and (rel, node.value) not in NOT_CHIP_FACTS:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_no_chip_fact_outside_the_chip_table():
    assert chip_facts() == []


@pytest.mark.parametrize("line", ['MEGACORE = ("tpu-v4", "tpu-v5p")', "PEAK = 197e12", 'TOPOLOGY = "v5e:2x2"'])
def test_a_chip_fact_added_elsewhere_fails_the_check(tmp_path, line):
    for top in ("inspector", "views"):
        (tmp_path / top).mkdir()
    (tmp_path / "views" / "added.py").write_text(f'"""A module that knows a chip: tpu-v5e in its docstring is fine."""\n{line}\n')
    assert [f.split(": ", 1)[0] for f in chip_facts(tmp_path)] == ["views/added.py:2"] * (2 if "v4" in line else 1)
