"""The patterns real kernels use, read and walked without false findings: manual DMA over HBM
refs, no grid, a grid sized at run time, vmap, a nested emit_pipeline, pl.when branches."""
from pathlib import Path

import pytest

from conftest import DATA

from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.pallas.analysis import analyse_pallas
from inspector.pallas.discovery import find_pallas_calls
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

PATTERNS = str(DATA / "real_patterns.py")
V5E = get_chip("tpu-v5e")


def analysed(name: str):
    program = capture(load_target(f"{PATTERNS}:{name}"), Backend(get_chip("cpu")), compile=False).program
    [report], unread = analyse_pallas(program, [V5E], [V5E])
    assert unread == []
    return report


def codes(report) -> set[str]:
    return {f.code for f in report.findings}


def test_manual_dma_counts_its_copies_and_leaves_hbm_operands_alone():
    r = analysed("manual_dma")
    [x, out] = r.call.operands
    assert not x.pipelined and out.pipelined
    [dma] = r.call.dmas
    assert (dma.src_space, dma.dst_space, dma.shape, dma.bytes, dma.per_step) == ("any", "vmem", [8, 128], 4096, [1.0, 1.0])
    # 4 steps x one 4 KiB copy in, plus the output blocks written back
    assert r.walk.hbm_bytes_read == 4 * 4096 and r.walk.hbm_bytes_written == 32 * 128 * 4
    assert r.cost_estimate["bytes_accessed"] == r.walk.hbm_bytes
    assert codes(r) == set()
    [budget] = r.budgets
    assert budget.total_bytes == 2 * 4096 + 4096  # the output block twice, the scratch once; no semaphore


def test_no_grid_is_one_step():
    r = analysed("no_grid")
    assert r.call.grid == [] and r.call.steps == 1 and r.walk.walked_steps == 1
    assert codes(r) == set()
    [budget] = r.budgets  # one step: libtpu gives every block a single buffer
    assert budget.total_bytes == 2 * 8 * 128 * 4


def test_index_maps_with_pl_multiple_of_are_walked():
    """pl.multiple_of (no vmap rule in jax 0.10) in index maps, over prefetched offsets and grid
    indices alike: the walk follows them instead of failing."""
    r = analysed("aligned_offsets")
    assert not r.walk.skipped and codes(r) == set()
    x, out = r.walk.operands
    assert x.distinct_blocks == 3 and out.distinct_blocks == 3
    assert r.walk.hbm_bytes_read == 3 * 16 * 128 * 4


def test_a_resident_vmem_input_is_one_buffer():
    """memory_space=VMEM without a block: the whole array copied in once (libtpu: one buffer),
    beside the output's two."""
    r = analysed("resident_input")
    x, out = r.call.operands
    assert x.resident and not out.resident and (x.buffers(4), out.buffers(4)) == (1, 2)
    [budget] = r.budgets
    assert budget.total_bytes == 64 * 128 * 4 + 2 * 16 * 128 * 4 and codes(r) == set()


def test_grid_sized_at_run_time_from_concrete_example_inputs():
    r = analysed("dyn_grid")
    assert r.call.grid == [4] and r.call.grid_dynamic == [True]
    assert not r.walk.skipped and codes(r) == set()


def test_grid_sized_at_run_time_without_values_is_unknown_not_an_error():
    r = analysed("dyn_grid_abstract")
    assert r.call.grid == [None] and r.call.steps is None
    assert r.walk.skipped and codes(r) == {"walk-needs-values"}
    assert r.flops is None and r.cost_estimate is None


def test_vmap_keeps_every_grid_axis():
    r = analysed("vmapped")
    assert r.call.grid == [4, 8] and r.call.vmapped_dims == [0]
    assert r.walk.operands[1].distinct_blocks == 32 and codes(r) == set()


def test_an_interpreter_limit_on_the_cpu_lowering_is_an_info_and_the_views_say_why():
    """The CPU lowers Pallas TPU kernels through the interpreter; one it cannot run (a vmapped
    call with dimension_semantics) is not the kernel's fault: info, with the Pallas analysis kept."""
    import io

    from inspector.results.report import build_report
    from inspector.views.printer import make_console, print_view

    target = load_target(f"{PATTERNS}:vmapped_parallel")
    r = build_report(target, get_chip("cpu"), capture(target, Backend(get_chip("cpu"))), fusions=True, pallas=True)
    assert r.stages.compile_error.interpreter_limit and "vmapped" in r.stages.compile_error.interpreter_limit
    assert [f.severity for f in r.findings if f.code == "interpret-unsupported"] == ["info"]
    assert not [f for f in r.findings if f.severity == "error"]
    assert r.pallas and r.pallas[0].call.grid == [2, 2]
    out = io.StringIO()
    print_view(r, "stablehlo", make_console(out))
    assert "cannot run in interpret mode" in out.getvalue()


def test_nested_emit_pipeline_counts_its_buffers_and_raises_no_race():
    r = analysed("nested")
    scoped = [s for s in r.call.scratch if s.scoped and s.memory_space == "vmem"]
    assert [s.shape for s in scoped] == [[3, 128, 128], [2, 128, 128]]  # pl.Buffered(3) in, default 2 out
    [budget] = r.budgets
    assert budget.total_bytes == 5 * 128 * 128 * 4
    assert "parallel-axis-race" not in codes(r) and "error" not in {f.severity for f in r.findings}
    low, high = r.walk.dma_bytes
    assert low < high and high >= 2 * 2 * 512 * 512 * 4 // 2  # every block in and out at the most
    # the printed budget says which way this estimate can be wrong, not "a lower bound"
    from inspector.views.pallas import estimate_kind
    assert "overstate" in estimate_kind(r) and "a lower bound" not in estimate_kind(r)
    assert estimate_kind(analysed("manual_dma")) == "estimate"


def test_a_pipeline_nested_in_a_pallas_call_is_walked_and_gives_its_traffic():
    """The emit_pipeline runs at each of the 2 grid steps over a (256, 512) slice: 8 steps of
    (128, 128) blocks, each read and written once, so x (1 MiB) is read once and written once."""
    r = analysed("nested")
    [pipeline] = r.pipelines
    assert pipeline.steps == 8 and [o.transfers for o in pipeline.operands] == [8, 8]
    assert r.walk.hbm_bytes_read == r.walk.hbm_bytes_written == 512 * 512 * 4
    assert "pipeline-not-walked" not in codes(r)


def test_a_pipeline_over_vmem_blocks_copies_within_vmem_and_adds_no_hbm_traffic():
    """The outer grid reads x (128 KiB) once and w (2 MiB) once, block by block, and writes the
    output (16 KiB); the pipeline in the body copies slices of those VMEM blocks (4 steps, twice)
    within VMEM, which is no HBM traffic (it was counted as HBM reads: 2.27 MiB more)."""
    r = analysed("nested_in_vmem")
    [pipeline] = r.pipelines
    assert pipeline.steps == 4 and [o.transfers for o in pipeline.operands] == [4, 4]
    assert pipeline.hbm_bytes_read == pipeline.hbm_bytes_written == 0
    assert pipeline.onchip_bytes == 4 * (16 * 512 + 512 * 128) * 4
    assert r.walk.hbm_bytes_read == (16 * 2048 + 2048 * 256) * 4
    assert r.walk.hbm_bytes_written == 16 * 256 * 4
    assert not [f for f in r.findings if f.severity in ("error", "warning")], r.findings


def test_a_pipeline_on_buffers_the_kernel_gives_it_is_said_not_walked():
    """pipeline(..., allocations=) under pl.with_scoped makes no scope of its own: it was seen by
    nobody (no walk, no finding). Now an info says it is not walked; its 2 x 2 buffers are counted
    and its copies come with the body's DMAs (every block in and out at the most)."""
    r = analysed("nested_given_buffers")
    assert r.pipelines == []
    [f] = [f for f in r.findings if f.code == "pipeline-not-walked"]
    assert f.severity == "info" and "allocations=" in f.message
    assert r.budgets[0].total_bytes == 4 * 128 * 128 * 4
    assert r.walk.dma_bytes[1] >= 2 * 512 * 512 * 4
    assert "pipeline-not-walked" not in codes(analysed("nested"))


def test_a_copy_of_a_size_known_at_run_time_is_bounded_by_its_smaller_end():
    """pl.ds(0, n) rows of a (64, 128) HBM array into an (8, 128) VMEM buffer move at most 8 rows
    (4 KiB), not the array's 64 (32 KiB): GDN decode's BoundedSlice copies were shown 8x too large."""
    r = analysed("dynamic_rows_copy")
    assert len(r.call.dmas) == 2 and all(not d.size_known for d in r.call.dmas)
    assert [d.shape for d in r.call.dmas] == [[8, 128], [8, 128]]
    assert r.walk.dma_bytes[1] == 2 * 8 * 128 * 4


def test_copies_the_pipelines_body_starts_by_hand_are_hbm_traffic_of_their_own():
    """The pipeline reads x and writes o block by block (1 MiB each); its body also copies each
    block to c by hand (1 MiB more written). Those copies were taken for the pipeline's own block
    copies and dropped from the kernel's traffic (DSv4's paged cache writes went missing)."""
    r = analysed("nested_body_dma")
    [pipeline] = r.pipelines
    assert pipeline.hbm_bytes_read == pipeline.hbm_bytes_written == 512 * 512 * 4
    [by_hand] = [d for d in r.call.dmas if not d.pipeline]
    assert by_hand.destination == "c_hbm" and by_hand.bytes == 128 * 128 * 4
    assert r.walk.hbm_bytes_read == 512 * 512 * 4 and r.walk.hbm_bytes_written == 2 * 512 * 512 * 4
    assert "pipeline-not-walked" not in codes(r) and "error" not in {f.severity for f in r.findings}


def test_a_pipeline_nested_in_a_pallas_call_that_leaves_output_blocks_unwritten_is_an_error():
    r = analysed("nested_half_written")
    [pipeline] = r.pipelines
    assert pipeline.steps == 4
    [f] = [f for f in r.findings if f.severity == "error"]
    assert f.code == "output-not-written" and f.kernel == "kernel", f


def test_a_vmem_limit_above_the_chips_vmem_stops_at_its_capacity():
    """vmem_limit_bytes sized for a 128 MiB chip (96 MiB): v4 has 16 MiB, TPU7x 64 MiB per core."""
    from inspector.pallas.budgets import budget

    [call] = find_pallas_calls(capture(load_target(f"{PATTERNS}:limit_of_a_larger_chip"), Backend(get_chip("cpu")),
                                       compile=False).program)
    v4, v5e, tpu7x = (budget(call.info, get_chip(c)) for c in ("tpu-v4", "tpu-v5e", "tpu-7x"))
    assert (v4.limit_bytes, v4.verdict) == (16 * 2**20, "over") and v4.limit_source.startswith("VMEM capacity")
    assert (v5e.limit_bytes, v5e.limit_source, v5e.verdict) == (96 * 2**20, "vmem_limit_bytes", "fits")
    assert (tpu7x.limit_bytes, tpu7x.verdict) == (64 * 2**20, "fits")


@pytest.mark.libtpu
@pytest.mark.slow
def test_a_vmem_limit_above_the_chips_vmem_against_libtpu():
    """libtpu on v4: out of memory (capacity), 32 MiB of 16; on TPU7x the 32 MiB fit."""
    from inspector.verbs.checking import run_check

    result = run_check(load_target(f"{PATTERNS}:limit_of_a_larger_chip"), [get_chip("tpu-v4"), get_chip("tpu-7x")])
    assert [(r.chip, r.fits, r.compiler_fits) for r in result.targets] == [("tpu-v4", False, False), ("tpu-7x", True, True)]


def test_an_in_place_update_through_input_output_aliases_is_not_an_unwritten_output():
    """Blocks the kernel leaves alone keep the aliased input's values: an info, never an error."""
    r = analysed("in_place_rows")
    out = r.call.operands[-1]
    assert out.role == "output" and out.aliased_input == r.call.operands[0].operand
    assert codes(r) == {"output-kept-from-input"}
    [f] = r.findings
    assert f.severity == "info" and f.data["count"] == 4 * 8 - 4 and f.data["input"] == out.aliased_input


def test_when_branches_give_a_flops_range():
    r = analysed("with_cond")
    assert r.flops_range == [0.0, 2 * 128 * 128 * 128 * 4]


def test_a_revisit_that_revisit_mode_any_allows_is_no_error():
    """pl.Buffered(1, revisit=pl.RevisitMode.ANY): Mosaic reloads a block visited again later, so
    non-consecutive visits of an output are legal (libtpu compiles it); jax's interpreter ignores
    the mode and refuses them, which is its limit, not a wrong kernel."""
    r = analysed("revisit_any")
    assert [op.revisit for op in r.call.operands] == [None, "any"]
    assert codes(r) == set()


@pytest.mark.slow
def test_revisit_mode_any_the_interpreter_refuses_is_an_interpreter_limit():
    from inspector.run import run_diff

    result = run_diff(load_target(f"{PATTERNS}:revisit_any"), runs=0)
    assert result.ok and [(f.severity, f.code) for f in result.findings] == [("info", "interpret-unsupported")]
    assert not run_diff(load_target(f"{PATTERNS}:revisit_any"), runs=0, strict=True).ok


def test_int4_blocks_count_half_a_byte_per_element():
    """numpy gives int4 a whole byte; the TPU packs 8 to a 32-bit word, in HBM and in VMEM."""
    r = analysed("int4_weights")
    x, w, out = r.walk.operands
    assert w.block_bytes == 256 * 128 // 2 and w.bytes == 512 * 256 // 2
    [budget] = r.budgets
    assert budget.total_bytes == 2 * 128 * 256 * 2 + 2 * 256 * 128 // 2 + 2 * 128 * 128 * 4 + 128 * 128 * 4


def test_bool_blocks_are_int32_in_vmem_no_packing_rule():
    """Mosaic keeps bool blocks as int32 (libtpu compiles an (8, 128) bool block on every chip):
    an 8-row bool block is no tiling-packing finding (it was a false error on TPU7x), and it
    takes 4 bytes an element in VMEM."""
    program = capture(load_target(f"{PATTERNS}:bool_mask"), Backend(get_chip("cpu")), compile=False).program
    tpu7x = get_chip("tpu-7x")
    [report], _ = analyse_pallas(program, [V5E, tpu7x], [V5E, tpu7x])
    assert not [f for f in report.findings if f.code.startswith("tiling")]
    assert all(sum(i.bytes for i in b.items) == 3 * 2 * 8 * 128 * 4 for b in report.budgets)


@pytest.mark.libtpu
def test_the_int4_estimate_is_the_compiler_s_figure():
    from inspector.verbs.checking import run_check

    [row] = run_check(load_target(f"{PATTERNS}:int4_weights"), [V5E], estimate_only=False).targets
    assert row.compiler_fits and row.compiler_vmem_bytes == row.vmem_bytes


@pytest.mark.libtpu
def test_nested_pipeline_estimate_against_the_compiler():
    from inspector.verbs.checking import run_check

    result = run_check(load_target(f"{PATTERNS}:nested"), [V5E])
    [row] = result.targets
    assert row.compiler_fits and row.fits and result.ok
    assert row.compiler_vmem_bytes == row.vmem_bytes  # run_scoped buffers: the estimate is the compiler's figure


@pytest.mark.libtpu
@pytest.mark.parametrize("name", ["no_grid", "resident_input"])
def test_single_buffered_estimates_are_the_compiler_s_figure(name):
    from inspector.verbs.checking import run_check

    [row] = run_check(load_target(f"{PATTERNS}:{name}"), [V5E]).targets
    assert row.compiler_fits and row.compiler_vmem_bytes == row.vmem_bytes


@pytest.mark.slow
def test_grad_through_a_kernel_jax_cannot_differentiate_says_why():
    """jax's own JVP of pallas_call fails on a kernel reading pl.program_id with an empty
    AssertionError: the finding names the rule and the way out, not a bare 'AssertionError: '."""
    from inspector.run import run_diff

    result = run_diff(load_target(f"{PATTERNS}:accumulate_rows"), grad=True, runs=0)
    assert all(leaf.ok for leaf in result.outputs)  # the forward pass is right
    [f] = [f for f in result.findings if f.severity == "error"]
    assert f.code == "kernel-raised" and "JVP rule" in f.message and "custom_vjp" in f.message


@pytest.mark.libtpu
def test_the_compiler_s_vmem_figure_of_kernels_inside_a_cond():
    """Kernels in lax.cond branches (or a scan body) are not in the entry computation: their
    compiled VMEM figure is read from every computation, not shown as unknown."""
    from inspector.verbs.checking import run_check

    [row] = run_check(load_target(f"{PATTERNS}:in_cond"), [V5E]).targets
    assert row.compiler_fits and row.compiler_vmem_bytes and row.compiler_vmem_bytes <= row.vmem_bytes


@pytest.mark.libtpu
def test_a_kernel_given_interpret_true_says_mosaic_never_saw_it():
    """On a TPU, pallas_call(interpret=True) lowers to the interpreter's HLO: the compile says
    nothing about the kernel's VMEM (unknown, not "fits"), and the views say why."""
    import io

    from inspector.verbs.checking import run_check
    from inspector.results.report import build_report
    from inspector.views.printer import make_console, print_view

    target = load_target(f"{PATTERNS}:interpret_flag")
    result = run_check(target, [V5E])
    [row] = result.targets
    assert row.fits and row.compiler_fits is None and result.ok
    assert [f.severity for f in result.findings if f.code == "kernel-interpret-flag"] == ["info"]
    r = build_report(target, V5E, capture(target, Backend(V5E)), pallas=True)
    assert r.pallas[0].call.interpret and r.stages.mosaic == []
    out = io.StringIO()
    print_view(r, "mosaic", make_console(out))
    assert "interpret=True" in out.getvalue()


@pytest.mark.libtpu
def test_reports_keep_their_pallas_analysis_across_chips_in_the_worker():
    """cpu -> tpu-v5e -> cpu in the UI's worker process: the second cpu report is as complete as the first."""
    from inspector.remote import Remote
    from inspector.session import Session

    remote, session = Remote(), Session("samples/bugs.py:dropped_tail")
    try:
        reports = [remote.call(session.with_chip(chip), "report") for chip in ("cpu", "tpu-v5e", "cpu")]
    finally:
        remote.close()
    for report in reports:
        assert "output-not-written" in {f.code for f in report.findings}
        assert report.pallas and report.pallas[0].walk.operands


def test_every_finding_code_produced_is_registered_with_its_data_keys():
    """Producers and views share one registry: a code used anywhere is declared there."""
    import re

    from inspector.base.findings import CODES

    root = Path(__file__).parent.parent / "inspector"
    used = set()
    for path in root.rglob("*.py"):
        used |= set(re.findall(r'Finding\(\s*"(?:error|warning|info)"(?: if [^,]+ else "\w+")?,\s*"([a-z0-9-]+)"', path.read_text()))
    assert used and used <= set(CODES), used - set(CODES)
    for name in ("samples/bugs.py:dropped_tail", "samples/bugs.py:parallel_reduction", "samples/bugs.py:element_offset", "samples/bugs.py:revisit_not_consecutive", "samples/bugs.py:bad_tiling"):
        program = capture(load_target(name), Backend(get_chip("cpu")), compile=False).program
        for report in analyse_pallas(program, [V5E], [V5E])[0]:
            for f in report.findings:
                assert set(f.data or {}) <= set(CODES[f.code].fields), (f.code, f.data)
                for block in (f.data or {}).get("blocks", []):
                    assert isinstance(block, list) and all(isinstance(i, int) for i in block)


def test_a_project_with_its_own_kernels_and_views_packages(tmp_path):
    """The inspector installs no top-level kernels/views: a user's own packages of those names win
    (run as the installed console script, whose sys.path does not start at the working folder)."""
    import os
    import subprocess
    import sys

    probe = "import importlib.util as u; print(u.find_spec('kernels'), u.find_spec('views'), u.find_spec('inspector.kernels').origin)"
    found = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert found.stdout.startswith("None None ") and "flash" not in found.stdout, found.stdout + found.stderr

    for package in ("kernels", "views"):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text(f"NAME = 'the user\\'s {package}'\n")
    (tmp_path / "model.py").write_text(
        "import jax.numpy as jnp\nimport kernels, views\n"
        "assert kernels.NAME == \"the user's kernels\" and views.NAME == \"the user's views\"\n"
        "def double(x):\n    return x * 2\n")
    script = Path(sys.executable).parent / "inspector"
    out = subprocess.run([str(script), "show", "model.py:double", "--args", "f32[8]", "--view", "jaxpr"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300, env=dict(os.environ, NO_COLOR="1"))
    assert out.returncode == 0, out.stderr
    assert "mul" in out.stdout


def test_the_scoped_limit_flag_in_libtpu_init_args_is_the_estimate_s_limit(monkeypatch):
    from inspector.pallas.budgets import budget

    [call] = find_pallas_calls(capture(load_target(f"{PATTERNS}:manual_dma"), Backend(get_chip("cpu")), compile=False).program)
    assert budget(call.info, V5E).limit_bytes == 16 * 2**20
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "--xla_enable_foo=true --xla_tpu_scoped_vmem_limit_kib=65536")
    b = budget(call.info, V5E)
    assert (b.limit_bytes, b.limit_source) == (64 * 2**20, "LIBTPU_INIT_ARGS")


def test_a_fori_loop_counts_its_trips_and_an_unknown_while_says_its_figures_are_a_floor():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from inspector.jax_internals.pallas import read_pallas_calls

    def loops(n_ref, x_ref, o_ref):
        def body(i, acc):
            return acc + jnp.dot(x_ref[...], x_ref[...])
        o_ref[...] = jax.lax.fori_loop(0, 4 * 2 - 3, body, jnp.zeros_like(o_ref))  # 5 trips, folded
        o_ref[...] += jax.lax.fori_loop(0, n_ref[0], body, jnp.zeros_like(o_ref))  # trips unknown here

    def f(n, x):
        spec = pl.BlockSpec((128, 128), lambda i, n: (0, 0))
        return pl.pallas_call(loops, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid_spec=pltpu.PrefetchScalarGridSpec(num_scalar_prefetch=1, grid=(1,), in_specs=[spec],
                                                                     out_specs=spec))(n, x)

    closed = jax.make_jaxpr(f)(jnp.array([3], jnp.int32), jnp.ones((128, 128), jnp.float32))
    [(_, found)] = read_pallas_calls(closed)
    one = 2 * 128 ** 3
    assert found.info.step_flops == 5 * one + one and found.info.unknown_loops == 1


def test_a_loop_bound_the_body_computes_from_prefetch_values_counts_its_trips():
    """tokamax's grouped matmul style: the body turns the group sizes (scalar prefetch) into a tile
    count with a fori_loop over SMEM, then loops over that many tiles under pl.when(count > 0).
    With the example inputs' values the loop counts its trips; without them, or where the count
    reads what an SMEM scratch held before the kernel, it is counted once; a loop whose bound is
    an outer loop's counter is not taken at the counter's first value."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    from inspector.jax_internals.pallas import read_pallas_calls

    def tiles(sizes_ref, x_ref, o_ref, table_ref):
        def count(g, n):  # each group's tiles of 128 rows, rounded up
            table_ref[g] = n
            return n + (sizes_ref[g] + 127) // 128
        n = jax.lax.fori_loop(0, 4, count, 0)
        o_ref[...] = jnp.zeros_like(o_ref)

        @pl.when(n > 0)
        def _():
            def tile(i, acc):
                return acc + jnp.dot(x_ref[...], x_ref[...])
            o_ref[...] += jax.lax.fori_loop(0, n, tile, jnp.zeros_like(o_ref))
        o_ref[...] += jax.lax.fori_loop(0, table_ref[5], lambda i, acc: acc + jnp.dot(x_ref[...], x_ref[...]),
                                        jnp.zeros_like(o_ref))  # an entry the body never wrote: unknown

        def triangle(i, acc):  # trips 0, 1, 2: not 0 each time (the counter's value on entry)
            return jax.lax.fori_loop(0, i, lambda j, a: a + jnp.dot(x_ref[...], x_ref[...]), acc)
        o_ref[...] += jax.lax.fori_loop(0, 3, triangle, jnp.zeros_like(o_ref))

    def f(sizes, x):
        spec = pl.BlockSpec((128, 128), lambda i, s: (0, 0))
        return pl.pallas_call(tiles, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              grid_spec=pltpu.PrefetchScalarGridSpec(
                                  num_scalar_prefetch=1, grid=(1,), in_specs=[spec], out_specs=spec,
                                  scratch_shapes=[pltpu.SMEM((8,), jnp.int32)]))(sizes, x)

    sizes, x = np.array([300, 0, 128, 129], np.int32), np.ones((128, 128), np.float32)
    closed = jax.make_jaxpr(f)(sizes, x)
    one = 2 * 128 ** 3
    [(_, known)] = read_pallas_calls(closed, (sizes, x))
    # 3 + 0 + 1 + 2 = 6 tiles at least; at most also the unwritten entry's loop once and the
    # triangle's inner loop once per outer trip (their bounds unknown)
    assert (known.info.step_flops_min, known.info.step_flops) == (6 * one, 6 * one + one + 3 * one)
    assert known.info.unknown_loops == 2
    [(_, abstract)] = read_pallas_calls(closed)
    assert abstract.info.step_flops_min == 0 and abstract.info.unknown_loops == 3


def test_list_reference_against_the_tuple_pallas_call_returns_is_no_structure_error():
    """out_shape given as a list comes back from pallas_call as a tuple: a reference that returns
    a list of the same arrays is the same output, not an output-structure error."""
    from inspector.run import run_diff

    result = run_diff(load_target(f"{PATTERNS}:two_outputs_list"), runs=0)
    assert [f.code for f in result.findings if f.severity == "error"] == [] and result.ok
    assert len(result.outputs) == 2 and all(o.ok for o in result.outputs)


def test_gpu_kernel_with_triton_params_lowers_and_runs_on_the_cpu():
    """The TPU interpreter asserts on Triton's compiler params: on the CPU such a kernel goes
    through the plain interpreter, so show and diff work instead of a compile-error."""
    from inspector.run import run_diff

    stages = capture(load_target(f"{PATTERNS}:triton_add"), Backend(get_chip("cpu")), compile=False).stages
    assert stages.compile_error is None and stages.stablehlo
    result = run_diff(load_target(f"{PATTERNS}:triton_add"), runs=0)
    assert result.ok and [f.code for f in result.findings if f.severity == "error"] == []


def test_diff_of_a_sharded_target_runs_its_shard_map_on_one_device():
    """diff runs on one CPU device; a shard_map over get_abstract_mesh() still finds the program's
    axes (each of size 1) instead of failing as the user's error."""
    from inspector.run import run_diff

    result = run_diff(load_target(f"{PATTERNS}:sharded_rows"), runs=0)
    assert result.ok and [f.code for f in result.findings if f.severity == "error"] == []
    [said] = [f for f in result.findings if f.code == "mesh-on-one-device"]  # and it says so
    assert said.severity == "info" and "every axis of size 1" in said.message


def test_identical_dmas_are_one_row_of_the_dma_table_with_their_copies_added():
    import dataclasses

    from rich.console import Console

    from inspector.base.units import fmt_bytes
    from inspector.views.pallas import dma_table

    r = analysed("manual_dma")
    [dma] = r.call.dmas
    twice = dataclasses.replace(r, call=dataclasses.replace(r.call, dmas=[dma] * 32))
    console = Console(width=160, record=True)
    console.print(dma_table(twice))
    rows = [line for line in console.export_text().splitlines() if "(any)" in line]
    assert len(rows) == 1 and " 32 " in rows[0] and fmt_bytes(32 * 4096) in rows[0]  # 32 copies of 4 KiB a step
