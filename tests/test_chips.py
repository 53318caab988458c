"""The chip table against jax's own TPU table (pltpu.get_tpu_info_for_chip)."""
import pytest
from jax.experimental.pallas import tpu as pltpu

from inspector.base.chips import CHIPS, TPU_INFO, get_chip, parse_targets
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


# MXUs per TensorCore at full rate: the Cloud TPU pages (4 on every generation); jax's table says 2
# for v6e and TPU7x, but libtpu's simulated dot runs faster than 2 MXUs of 256^2 could (chips.py)
_MXUS = {"tpu-v4": 4, "tpu-v5e": 4, "tpu-v5p": 4, "tpu-v6e": 4, "tpu-7x": 4}


@pytest.mark.parametrize("chip", TPUS, ids=lambda c: c.name)
def test_clock_is_the_peak_over_the_mxu_work_of_a_cycle(chip):
    flops_per_cycle = chip.tensor_cores * _MXUS[chip.name] * chip.mxu**2 * 2
    assert chip.clock_hz == pytest.approx(chip.bf16_flops / flops_per_cycle, rel=0.01)
    assert chip.sources["clock_hz"].startswith("derived")
