"""pl.kernel / core_map kernels (TensorCore and SparseCore meshes): listed, budgeted against
libtpu's own verdict, their emit_pipelines walked, flops counted, and diffed (or said why not)."""
import pytest

from inspector.base.chips import get_chip
from inspector.verbs.checking import run_check
from inspector.compilation.target import load_target

SAMPLES = "samples/mesh_kernels.py"
BUGS = "tests/data/mesh_bugs.py"


def _target(name: str, path: str = SAMPLES, args: str | None = None, **params):
    target = load_target(f"{path}:{name}", args=args)
    target.params.update(params)
    return target


@pytest.mark.libtpu
def test_a_pl_kernel_is_listed_with_its_flops_and_its_pipeline_walked():
    result = run_check(_target("quantized_matmul"), [get_chip("tpu-v5e")], estimate_only=True)
    [kernel] = result.kernels
    assert kernel.call.name == "quantized_matmul_kernel" and kernel.call.style == "pl.kernel"
    assert kernel.call.core_type == "TensorCore" and kernel.call.source.endswith("mesh_kernels.py:98")
    assert kernel.flops == 2 * 512 * 1024 * 512  # one int8 dot per pipeline step, 8 steps of (256, 512, 256)
    [pipeline] = kernel.pipelines
    assert pipeline.steps == 2 * 2 * 2
    out = next(o for o in pipeline.operands if o.role == "output")
    assert out.transfers == out.distinct_blocks == 4  # each output block written back once
    assert result.ok


@pytest.mark.libtpu
def test_a_core_map_kernel_counts_its_run_scoped_vmem():
    [kernel] = run_check(_target("scaled_add"), [get_chip("tpu-v5e")], estimate_only=True).kernels
    assert kernel.call.style == "core_map"
    scoped = [s for s in kernel.call.scratch if s.scoped and s.memory_space == "vmem"]
    assert [s.shape for s in scoped] == [[64, 256], [64, 256]]
    assert kernel.budgets[0].total_bytes == 2 * 64 * 256 * 4


@pytest.mark.libtpu
def test_the_pipeline_walk_finds_output_blocks_a_pl_kernel_never_writes():
    result = run_check(_target("half_written", BUGS), [get_chip("tpu-v5e")], estimate_only=True)
    assert [f.code for f in result.findings if f.severity == "error"] == ["output-not-written"]
    assert not result.ok


@pytest.mark.libtpu
def test_a_pipeline_whose_index_map_reads_the_core_index_is_said_not_walked():
    result = run_check(_target("core_indexed", BUGS), [get_chip("tpu-v5e")], estimate_only=True)
    assert [f.code for f in result.findings] == ["pipeline-not-walked"]
    assert "tests/data/mesh_bugs.py:31" in result.findings[0].message
    assert "read a value of the kernel" in result.findings[0].message


def _agrees(target, chips: list[str]) -> list[tuple]:
    """Per chip: (estimate's verdict, libtpu's), from real deviceless compiles."""
    result = run_check(target, [get_chip(c) for c in chips], use_cache=False)
    rows = [(r.chip, r.fits, r.compiler_fits) for r in result.targets]
    for chip, fits, compiled in rows:
        assert compiled is not None, chip
        assert fits is not (not compiled), (chip, fits, compiled)  # never the opposite of libtpu: None is undecided
    return rows


@pytest.mark.libtpu
@pytest.mark.slow
def test_tensorcore_pl_kernel_budget_agrees_with_libtpu_on_three_chips():
    # grid (2, 2, 1): double-buffered (512, 4096) and (4096, 512) bf16 blocks, 18 MiB with the output and the
    # accumulator: over v5e's 16 MiB, within the 32 MiB of v6e and TPU7x
    target = _target("pipelined_matmul", args="bf16[1024,4096] bf16[4096,1024]", bm=512, bk=4096, bn=512)
    rows = _agrees(target, ["tpu-v5e", "tpu-v6e", "tpu-7x"])
    assert [r[2] for r in rows] == [False, True, True]
    assert [r[1] for r in rows] == [False, True, True]


@pytest.mark.libtpu
@pytest.mark.slow
def test_sparse_core_gather_budget_agrees_with_libtpu():
    # 640 gathered f32 rows of 128 per vector subcore: 320 KiB, over v6e's 256 KiB, within TPU7x's 512 KiB
    target = _target("sparse_core_gather", args="f32[4096,128] s32[20480]")
    rows = _agrees(target, ["tpu-v6e", "tpu-7x"])
    assert [(r[1], r[2]) for r in rows] == [(False, False), (True, True)]


@pytest.mark.slow
def test_tensorcore_mesh_kernels_diff_in_interpret_mode_and_sparse_core_ones_say_why_not():
    from inspector.run import run_diff

    for name in ("pipelined_matmul", "scaled_add"):
        result = run_diff(_target(name), runs=0)
        assert result.ok and result.outputs and all(o.ok for o in result.outputs), name
    gather = run_diff(_target("sparse_core_gather"), runs=0, chip="tpu-7x")
    assert [f.code for f in gather.findings] == ["interpret-unsupported"] and "SparseCore" in gather.findings[0].message
    assert not gather.outputs


def test_debug_shows_the_traceback_of_a_function_that_raised_while_running():
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "inspector", "diff", f"{BUGS}:raises_on_host"]
    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    debug = subprocess.run(cmd + ["--debug"], capture_output=True, text=True, timeout=300)
    assert plain.returncode == debug.returncode == 1
    assert "kernel-raised" in plain.stdout and "Traceback" not in plain.stderr
    assert "Traceback" in debug.stderr and 'mesh_bugs.py", line' in debug.stderr and "boom from the host" in debug.stderr


@pytest.mark.libtpu
def test_a_sparse_core_kernel_on_a_chip_without_sparse_cores_is_that_chips_finding():
    result = run_check(_target("sparse_core_gather"), [get_chip("tpu-v5e"), get_chip("tpu-7x")], estimate_only=True)
    assert [(f.code, f.data["chip"]) for f in result.findings] == [("no-sparse-core", "tpu-v5e")]
    assert [(r.chip, r.fits) for r in result.targets] == [("tpu-v5e", None), ("tpu-7x", True)]
    [kernel] = result.kernels
    assert kernel.call.core_type == "SparseCore vector subcore" and kernel.call.grid == [2, 16]
    assert not result.ok and result.failed


@pytest.mark.libtpu
def test_bounded_slice_pipelines_are_walked_and_give_the_kernels_hbm_traffic():
    # 1000 rows in blocks of 256: four block copies each way, the last a 232-row slice sized in the kernel
    [kernel] = run_check(_target("bounded_tail", BUGS), [get_chip("tpu-v5e")], estimate_only=True).kernels
    [pipeline] = kernel.pipelines
    assert pipeline.steps == 4 and [o.transfers for o in pipeline.operands] == [4, 4]
    block = 256 * 128 * 4
    assert kernel.walk.hbm_bytes_read == 4 * block == kernel.walk.hbm_bytes_written  # the walk's, not every copy's branch
    assert max(kernel.walk.dma_bytes) > kernel.walk.hbm_bytes  # what counting each conditional copy would say


@pytest.mark.libtpu
def test_the_fusions_view_gives_a_pl_kernels_mosaic_call_its_flops_and_the_overview_its_source():
    from inspector.results.report import make_report
    from inspector.results.view_table import Needs

    report = make_report(_target("quantized_matmul"), get_chip("tpu-v5e"), Needs(compile=True, fusions=True, pallas=True))
    [mosaic] = [k for k in report.fusions.kernels if k.kind.startswith("custom-call")]
    assert mosaic.flops == 2 * 512 * 1024 * 512
    assert mosaic.hbm_bytes_read == report.pallas[0].walk.hbm_bytes_read > 0
    [lowered] = report.stages.mosaic
    assert lowered.source and lowered.source.endswith("mesh_kernels.py:98")


@pytest.mark.libtpu
def test_complementary_pl_when_guards_count_one_branch_each_step():
    [kernel] = run_check(_target("when_complement", BUGS), [get_chip("tpu-v5e")], estimate_only=True).kernels
    assert kernel.flops_range == [2 * 256 * 256 * 256] * 2  # not twice that: k == 0 and k != 0 never both run


@pytest.mark.libtpu
def test_a_mesh_kernels_walk_is_keyed_by_what_it_is_not_by_where_its_jaxpr_lay():
    """grid_walk keeps walks by the call's signature for the whole process. The signature of a
    pl.kernel was made from its jaxpr's id, which a freed jaxpr passes on, so another kernel could be
    handed its walk; now it is made from the kernel itself: the same kernel traced twice has one
    signature, the kernel at another size another."""
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.pallas.discovery import find_pallas_calls

    def signature(args=None, memo=False):
        program = capture(_target("scaled_add", args=args), Backend(get_chip("tpu-v5e")), compile=False, memo=memo).program
        [call] = find_pallas_calls(program)
        return call.signature

    first = signature()
    assert signature() == first
    assert signature("f32[128,256] f32[128,256]") != first

