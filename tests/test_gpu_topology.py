"""GPU targets over the GPUs of one node (h100:8), deviceless: the target parses to a chip row of N
devices, XLA:GPU compiles the program SPMD over its cuda topology of N GPUs (1x1xN), and the report
shows HBM per device and the collectives, as for a TPU slice (tests/test_pods.py)."""
from __future__ import annotations

import functools

import pytest

from inspector.base.chips import get_chip
from inspector.base.errors import UsageError
from inspector.jax_internals.cuda_topology import plugin_missing

needs_plugin = pytest.mark.skipif(plugin_missing() is not None, reason="the GPU extra is not installed")


@pytest.mark.parametrize("name", ["h100:8", "h200:8", "a100:8", "H100:4", "h100:2"])
def test_gpu_node_targets(name):
    chip = get_chip(name)
    base = get_chip(name.split(":")[0])
    assert chip.name == name.lower() and chip.devices == int(name.split(":")[1])
    assert chip.target_config == base.target_config and chip.hbm_device_bytes == base.hbm_device_bytes
    assert get_chip(name) is chip  # one object per name, like the plain chips


@pytest.mark.parametrize("bad", ["h100:0", "h100:3x3", "h100:3", "h100:16", "h100:", "h100:-8", "b200:8", "gpu:8"])
def test_gpu_node_nonsense_is_a_usage_error(bad):
    with pytest.raises(UsageError) as err:
        get_chip(bad)
    assert "\n" not in str(err.value) and bad.split(":")[0] in str(err.value)


def test_gpu_node_nonsense_on_the_command_line(cli):
    code, out, err = cli("show", "samples/gpu_matmul.py:matmul", "--target", "h100:0")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "h100:2, h100:4, h100:8" in err and "Traceback" not in err


@functools.cache
def _sum_over(target: str):
    import inspector

    return inspector.inspect(lambda x: x.sum(), "f32[64,128]", target=target, mesh={"d": -1}, shardings="P('d')",
                             cache=False)


@needs_plugin
@pytest.mark.parametrize("target", ["h100:8", "a100:4"])
def test_a_sharded_sum_is_an_all_reduce_over_the_node(target):
    report = _sum_over(target)
    s = report.stages
    assert s.compile_error is None and s.mesh == {"d": get_chip(target).devices} and s.devices == get_chip(target).devices
    assert [(c.kind, c.axes) for c in report.collectives.collectives] == [("all-reduce", ["d"])]
    memory = report.memory
    assert memory.devices == s.devices and memory.fits  # per device: a 64/N x 128 f32 shard


@needs_plugin
def test_show_on_a_gpu_node_names_memory_per_device_and_collectives(cli):
    code, out, err = cli("show", "tests/data/sharded.py:step", "--target", "h100:4")
    assert code == 0, err
    assert "data=2,model=2 (4 devices" in out and "HBM per device" in out and "of 79.11 GiB: fits" in out
    assert "compiled by XLA:GPU" in out and "libtpu" not in out  # was "compiled by libtpu" on every GPU target
    code, out, err = cli("show", "tests/data/sharded.py:step", "--target", "h100:4", "--view", "collectives")
    assert code == 0, err
    assert "all-reduce" in out and "all-gather" in out and "reduce-scatter" in out
