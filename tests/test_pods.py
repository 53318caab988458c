"""Sharded programs on TPU topologies without a TPU: targets with a topology, meshes and
shardings, HBM per device, collectives, and the HBM verdict of `check`."""
import json

import pytest

from conftest import DATA
from inspector.compilation.backends import Backend
from inspector.base.chips import CHIPS, get_chip
from inspector.base.errors import UsageError
from inspector.hlo.collectives import KINDS
from inspector.hlo.module import parse_hlo
from inspector.results.report import build_report
from inspector.compilation.sharding import parse_mesh, parse_specs
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

SHARDED = str(DATA / "sharded.py")


# ----------------------------------------------------------------------------- no TPU needed


def test_specs_are_parsed_never_evaluated():
    assert parse_specs("P('data',None) P(None,'model') P() P(('data','model'),)") == [
        ("data", None), (None, "model"), (), (("data", "model"),)]
    # "P('a')] + [P()": a bracket that closes the list early (was an AttributeError)
    for bad in ("P(__import__('os').system('true'))", "os.system('true')", "P('a'", "P(1)", "P(x='a')", "", "P('a')] + [P()"):
        with pytest.raises(UsageError):
            parse_specs(bad)


def test_mesh_flags():
    assert parse_mesh("data=4,model=-1") == {"data": 4, "model": -1}
    for bad in ("data", "data=x", "data=2,data=2", "a=-1,b=-1", "a=0", "1a=2"):
        with pytest.raises(UsageError):
            parse_mesh(bad)


def test_topology_targets():
    chip = get_chip("tpu-v5e:16x16")
    assert (chip.name, chip.topology, chip.devices) == ("tpu-v5e:16x16", "v5e:16x16", 256)
    assert get_chip("ironwood:2x2x1").devices == 8  # a jax device per TensorCore
    assert get_chip("tpu-v5e:4x4") is get_chip("v5e:4x4")
    for bad in ("tpu-v5e:3x3", "tpu-v5e:1x1", "cpu:2x2", "h100:2x2"):
        with pytest.raises(UsageError):
            get_chip(bad)
    for c in CHIPS:
        if c.is_tpu:
            assert c.topologies and c.hbm_device_bytes and c.ici_bytes_per_s and c.sources["ici_bytes_per_s"]


def test_chips_lists_topologies(cli_run):
    out = cli_run("chips")
    assert out.returncode == 0 and "16x16" in out.stdout and "4x4x4" in out.stdout
    rows = {r["name"]: r for r in json.loads(cli_run("chips", "--json").stdout)}
    assert "16x16" in rows["tpu-v5e"]["topologies"] and rows["tpu-v5e"]["hbm_device_bytes"] == round(15.75 * 2**30)


# ----------------------------------------------------------------------------- deviceless compiles

tpu = pytest.mark.libtpu


@tpu
@pytest.mark.parametrize("chip", [c for c in CHIPS if c.is_tpu], ids=lambda c: c.name)
def test_every_listed_topology_is_accepted(chip):
    """Each shape `inspector chips` lists compiles: a sum sharded over all its devices (a fraction
    of a second each, 2 s for the largest) is an all-reduce over the one mesh axis."""
    from jax.experimental import topologies

    import inspector

    for shape in chip.topologies:
        named = get_chip(f"{chip.name}:{shape}")
        devices = topologies.get_topology_desc(platform="tpu", topology_name=named.topology).devices
        assert len(devices) == named.devices, shape
        report = inspector.inspect(lambda x: x.sum(), f"f32[{named.devices * 8},128]", target=named.name,
                                   mesh={"d": -1}, shardings="P('d')", cache=False)
        assert report.stages.compile_error is None and report.stages.mesh == {"d": named.devices}, shape
        assert [(c.kind, c.axes) for c in report.collectives.collectives] == [("all-reduce", ["d"])], shape


def _step_report(chip="tpu-v5e:2x2", spec="step", **kw):
    target = load_target(f"{SHARDED}:{spec}", **kw)
    captured = capture(target, Backend(get_chip(chip)), buffers=True)
    return target, captured, build_report(target, get_chip(chip), captured, fusions=True, collectives=True)


@tpu
def test_a_small_topology_compiles_sharded():
    _, captured, report = _step_report()
    s = captured.stages
    assert s.compile_error is None and s.mesh == {"data": 2, "model": 2} and s.devices == 4
    assert "num_partitions=4" in s.hlo or "all-gather" in s.hlo
    assert report.fusions.kernels  # the fusions and the graph work per device
    assert report.ok
    # every collective is a collective kernel, XLA:TPU's fused reduce-scatter (a kCustom fusion) too
    collective_kernels = {k.name for k in report.fusions.kernels if k.kind == "collective"}
    assert collective_kernels == {c.fusion or c.name for c in report.collectives.collectives}
    assert any(c.fusion for c in report.collectives.collectives)
    # ... and each is a node of its own in the kernel graph, never folded into a neighbour
    from inspector.hlo.graph_model import build_graph

    graph = build_graph(report.fusions, "step", max_nodes=1000)
    drawn = {name for n in graph.nodes if n.kind == "kernel" for name in n.kernels}
    folded = {name for n in graph.nodes for name in n.folded}
    assert collective_kernels <= drawn and not collective_kernels & folded


@tpu
def test_memory_per_device_is_jaxs_memory_analysis():
    import jax
    import jax.numpy as jnp
    from jax.experimental import topologies
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

    target, _, report = _step_report()
    devices = topologies.get_topology_desc(platform="tpu", topology_name="v5e:2x2").devices
    mesh = jax.make_mesh((2, 2), ("data", "model"), devices=devices, axis_types=(AxisType.Auto,) * 2)
    specs = (P("data", "model"), P("model", "data"), P("data", None))
    args = [jax.ShapeDtypeStruct(a.shape, jnp.float32, sharding=NamedSharding(mesh, p)) for a, p in zip(target.args, specs)]
    with jax.set_mesh(mesh):
        stats = jax.jit(target.fn).lower(*args).compile().memory_analysis()
    m = report.memory
    assert (m.argument_bytes, m.output_bytes, m.temp_bytes, m.alias_bytes) == (
        stats.argument_size_in_bytes, stats.output_size_in_bytes, stats.temp_size_in_bytes, stats.alias_size_in_bytes)
    assert m.argument_bytes == (256 * 512 // 4 + 512 * 256 // 4 + 64 * 256 // 2) * 4  # x is split over data only
    assert m.hbm_capacity_bytes == round(15.75 * 2**30) and m.fits is True
    assert m.largest and {b["op_name"] for b in m.largest} >= {"w1", "w2", "x"}  # the buffer assignment at the peak
    data = report.to_dict()["memory"]
    for key in ("argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "hbm_capacity_bytes"):
        assert key in data


def _hlo_collectives(hlo: str) -> set[str]:
    """Every collective instruction in the compiled module's text, any computation."""
    module = parse_hlo(hlo)
    ops = set(KINDS) | {f"{k}-start" for k in KINDS}
    return {i.name for c in module.computations.values() for i in c.instructions if i.opcode in ops}


@tpu
def test_collectives_are_exactly_those_of_the_compiled_hlo():
    _, captured, report = _step_report()
    a = report.collectives
    assert {c.name for c in a.collectives} == _hlo_collectives(captured.stages.hlo) != set()
    by_name = {c.name: c for c in a.collectives}
    for c in a.collectives:
        assert c.kind in KINDS and c.bytes > 0 and c.axes and set(c.axes) <= {"data", "model"}
        assert c.time_s is not None and c.time_s > 0
    # the bytes are those of the HLO: an all-gather's result per device
    module = parse_hlo(captured.stages.hlo)
    gathers = [i for comp in module.computations.values() for i in comp.instructions if i.opcode == "all-gather"]
    assert gathers
    for g in gathers:
        assert by_name[g.name].bytes == g.shapes[0].logical_bytes
    assert sum(r["count"] for r in a.by_kind.values()) == len(a.collectives)
    assert sum(r["bytes"] for r in a.by_axis.values()) == a.total_bytes
    data = report.to_dict()
    assert {"kind", "bytes", "axes", "time_s"} <= set(data["collectives"][0])
    assert set(data["collective_totals"]["by_kind"]) <= set(KINDS)


@tpu
def test_hbm_verdict_on_a_step_that_does_not_fit(cli_run):
    out = cli_run("check", f"{SHARDED}:big_step", "--target", "tpu-v5e:2x2", "--json")
    assert out.returncode == 1, out.stderr
    result = json.loads(out.stdout)
    [row] = result["targets"]
    assert row["hbm_fits"] is False and row["hbm_limit_bytes"] == round(15.75 * 2**30)
    assert row["hbm_bytes"] > row["hbm_limit_bytes"]
    [finding] = [f for f in result["findings"] if f["code"] == "hbm-over-capacity"]
    assert finding["severity"] == "error" and finding["data"]["bytes"] == row["hbm_bytes"]
    largest = finding["data"]["largest"]
    assert largest and largest[0]["bytes"] == 32768 * 131072 * 4 // 4  # a weight, a quarter per device
    assert any(b["source"] and "sharded.py" in b["source"] for b in largest)


@tpu
def test_hbm_verdict_on_a_step_that_fits(cli_run):
    out = cli_run("check", f"{SHARDED}:step", "--target", "tpu-v5e:2x2", "--json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)["targets"]
    assert row["hbm_fits"] is True and 0 < row["hbm_bytes"] < row["hbm_limit_bytes"]


@tpu
def test_memory_and_collectives_views_print(cli_run):
    out = cli_run("show", f"{SHARDED}:step", "--target", "tpu-v5e:2x2", "--view", "memory")
    assert out.returncode == 0, out.stderr
    assert "HBM per device on tpu-v5e:2x2" in out.stdout and "fits:" in out.stdout and "live in HBM at the peak" in out.stdout
    out = cli_run("show", f"{SHARDED}:step", "--target", "tpu-v5e:2x2", "--view", "collectives", "--mesh", "data=4,model=1")
    assert out.returncode == 0, out.stderr
    assert "all-gather" in out.stdout and "by mesh axis" in out.stdout


@tpu
@pytest.mark.parametrize("args, message", [
    (("--target", "tpu-v5e:4x4"), "has 4 devices but tpu-v5e:4x4 has 16"),
    (("--target", "tpu-v5e"), "has 4 devices but tpu-v5e has 1"),
    (("--target", "tpu-v5e:2x2", "--mesh", "data=2,modl=2"), "unknown mesh axis 'model'"),
    (("--target", "tpu-v5e:2x2", "--shard", "P('data',None,'model') P() P()"), "has 3 entries but w1 (f32[256,512]) has rank 2"),
    (("--target", "tpu-v5e:2x2", "--shard", "P() P()"), "2 shardings for 3 positional inputs"),
    (("--target", "tpu-v5e:2x2", "--args", "f32[256,512] f32[512,256] f32[63,256]"),
     "dimension 0 of x (f32[63,256]) is 63, not divisible by data = 2"),
])
def test_bad_sharding_is_one_line_and_exit_2(cli_run, args, message):
    out = cli_run("show", f"{SHARDED}:step", *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1


@tpu
def test_shard_mapped_kernel_is_checked_per_device(cli_run):
    out = cli_run("check", f"{SHARDED}:sharded_kernel", "--target", "tpu-v5e:2x2", "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    [kernel] = result["kernels"]
    assert kernel["call"]["grid"] == [2]  # 64 rows over data=4: 16 rows per device, blocks of 8
    assert result["targets"][0]["hbm_fits"] is True


@tpu
def test_a_one_step_kernel_per_shard_is_single_buffered(cli_run):
    """A shard_map'd kernel that takes each device's shard as one block: a one-step grid has
    nothing to pipeline, Mosaic gives each block one buffer, and the estimate says the same
    (not a false vmem-over-limit from counting two)."""
    out = cli_run("check", f"{SHARDED}:whole_shard_kernel", "--target", "tpu-v5e:2x2", "--json")
    assert out.returncode == 0, out.stdout
    result = json.loads(out.stdout)
    [row] = result["targets"]
    assert row["fits"] and row["compiler_fits"]
    assert row["vmem_bytes"] == row["compiler_vmem_bytes"] == 2 * 12288 * 128 * 4
    [kernel] = result["kernels"]
    assert kernel["call"]["grid"] == [1]


@tpu
def test_all_to_all_and_async_collective_permute_are_listed():
    _, captured, report = _step_report(spec="mixed_collectives")
    listed = report.collectives.collectives
    assert {c.name for c in listed} == _hlo_collectives(captured.stages.hlo)
    assert [c.kind for c in listed] == ["all-to-all", "collective-permute", "all-reduce"]
    a2a, permute, reduce = listed
    assert a2a.bytes == 4 * 64 * 256 * 4 and a2a.axes == ["data"]  # the (1024/4, 256) shard, regrouped
    assert permute.asynchronous and permute.done and permute.bytes == 256 * 256 * 4 and permute.groups == 4
    assert reduce.bytes == 256 * 256 * 4 and reduce.axes == ["data"]
    assert set(report.collectives.by_kind) == {"all-to-all", "collective-permute", "all-reduce"}


@tpu
def test_the_terminal_ui_session_takes_mesh_and_shard():
    """`inspector TARGET --target tpu-v5e:2x2 --mesh ... --shard ...` opens the UI on that sharding
    (the session the UI's worker compiles from carries both), not INSPECT's."""
    from inspector.session import Session

    session = Session(f"{SHARDED}:step", "tpu-v5e:2x2", mesh="data=4,model=1",
                      shard="P('data','model') P('model','data') P('data',None)")
    report = session.with_params({}).report()  # the UI's variants (chip, params, buffers) keep the sharding
    assert report.stages.mesh == {"data": 4, "model": 1}
    assert report.memory.argument_bytes == (256 * 512 + 512 * 256 + 64 * 256) * 4 // 4
    assert Session(f"{SHARDED}:step", "tpu-v5e:2x2").report().stages.mesh == {"data": 2, "model": 2}  # INSPECT's


@tpu
def test_compare_two_slices_with_one_mesh(cli_run):
    """`compare --mesh data=-1,model=2`: the same step on 4 and 8 chips, -1 filled per slice."""
    out = cli_run("compare", f"{SHARDED}:step", "--target-a", "tpu-v5e:2x2", "--target-b", "tpu-v5e:2x4",
                  "--mesh", "data=-1,model=2", "--json")
    assert out.returncode == 0, out.stderr
    totals = {t["name"]: t for t in json.loads(out.stdout)["totals"]}
    assert totals["flops"]["ratio"] == pytest.approx(0.5, rel=0.05)  # twice the devices, half the work each
