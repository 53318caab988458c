"""Stage extraction on small functions for the local backend (one compile per function, shared)."""
import pytest

from conftest import DATA
from inspector.compilation.backends import Backend
from inspector.base.chips import get_chip
from inspector.base.errors import TargetFailure
from inspector.compilation.stages import capture
from inspector.compilation.target import load_target

FUNCS = str(DATA / "funcs.py")


@pytest.fixture(scope="module")
def matmul_stages():
    return capture(load_target(f"{FUNCS}:matmul"), Backend(get_chip("cpu"))).stages


def test_jaxpr_has_each_equation_with_its_source_line(matmul_stages):
    s = matmul_stages
    prims = [e.primitive for e in s.jaxpr_eqns]
    assert prims == ["dot_general", "tanh"]
    assert all(e.source and e.source.endswith("funcs.py:9") for e in s.jaxpr_eqns)
    assert "funcs.py:9" in s.jaxpr and "dot_general" in s.jaxpr


def test_stablehlo_and_optimized_hlo(matmul_stages):
    s = matmul_stages
    assert "stablehlo.dot_general" in s.stablehlo and "stablehlo.tanh" in s.stablehlo
    assert s.hlo.startswith("HloModule") and "ENTRY" in s.hlo
    counts = s.op_counts
    assert counts["jaxpr"] == {"dot_general": 1, "tanh": 1}
    assert counts["stablehlo"]["stablehlo.dot_general"] == 1
    assert counts["hlo"]["parameter"] >= 2


def test_xla_cost_and_memory_analysis(matmul_stages):
    s = matmul_stages
    # (8,16) @ (16,4): 2*8*16*4 flops; tanh of 32 elements
    assert s.cost["flops"] == pytest.approx(2 * 8 * 16 * 4, rel=0.1)
    assert s.cost["transcendentals"] == 32
    assert s.memory["argument_size_in_bytes"] == (8 * 16 + 16 * 4) * 4
    assert s.memory["output_size_in_bytes"] == 8 * 4 * 4
    assert s.compile_error is None


def test_compiled_once_per_process(matmul_stages):
    again = capture(load_target(f"{FUNCS}:matmul"), Backend(get_chip("cpu"))).stages
    assert again is matmul_stages


def test_params_reach_the_trace():
    cpu = Backend(get_chip("cpu"))
    cube = capture(load_target(f"{FUNCS}:with_params"), cpu, compile=False).stages
    square = capture(load_target(f"{FUNCS}:with_params", sets=["power=2", "flag=true"]), cpu, compile=False).stages
    assert "integer_pow[y=3]" in cube.jaxpr and "integer_pow[y=2]" in square.jaxpr
    assert "neg" in [e.primitive for e in square.jaxpr_eqns]
    assert cube.hlo is None  # compile=False stops after lowering


def test_a_compile_after_the_lowering_starts_from_it(monkeypatch):
    """The terminal UI asks its worker for the lowering (shown at once), then for the compile:
    traced and lowered once, and the stages the lowering gave are left as they were."""
    from inspector.compilation import stages as stages_mod

    monkeypatch.setattr(stages_mod, "_MEMO", {})
    traces = []
    trace = stages_mod._trace
    monkeypatch.setattr(stages_mod, "_trace", lambda *a: traces.append(a) or trace(*a))
    cpu = Backend(get_chip("cpu"))
    target = load_target(f"{FUNCS}:with_params", sets=["power=4"])
    lowered = capture(target, cpu, compile=False)
    compiled = capture(load_target(f"{FUNCS}:with_params", sets=["power=4"]), cpu)
    assert len(traces) == 1
    assert compiled.stages.stablehlo == lowered.stages.stablehlo and compiled.program is lowered.program
    assert compiled.stages.hlo.startswith("HloModule") and "compile_s" in compiled.stages.timings
    assert lowered.stages.hlo is None and "compile_s" not in lowered.stages.timings  # not mutated
    assert capture(target, cpu, compile=False) is lowered
    capture(target, cpu, memo=False)  # the Python API traces afresh
    assert len(traces) == 2


def test_the_traced_program_alone_reads_as_the_lowered_one_without_lowering(monkeypatch):
    """traced_program (the VMEM estimate of a sweep's candidates, of the truth rows) gives the
    pallas_calls the lowering's program gives, without lowering (interpret mode's lowering costs
    more than the trace), and serves a lowering this process already keeps."""
    import jax

    from inspector.compilation import stages as stages_mod
    from inspector.compilation.stages import traced_program
    from inspector.pallas.discovery import find_pallas_calls
    from inspector.pallas.budgets import budget

    monkeypatch.setattr(stages_mod, "_MEMO", {})
    cpu = Backend(get_chip("cpu"))
    flash = dict(args="bf16[1,256,128] bf16[1,256,128] bf16[1,256,128]", sets=["block_q=128", "block_k=128"])
    lowered = capture(load_target("samples/attention.py:flash", **flash), cpu, compile=False).program
    assert traced_program(load_target("samples/attention.py:flash", **flash), cpu) is lowered
    lowerings = []
    lower = jax.stages.Traced.lower
    monkeypatch.setattr(jax.stages.Traced, "lower", lambda self, *a, **k: lowerings.append(self) or lower(self, *a, **k))
    monkeypatch.setattr(stages_mod, "_MEMO", {})
    alone = traced_program(load_target("samples/attention.py:flash", **flash), cpu)
    assert lowerings == [] and alone.interpreted and alone is not lowered
    v5e = get_chip("tpu-v5e")
    figures = lambda program: [(b.kernel, b.total_bytes, b.verdict) for c in find_pallas_calls(program)
                               if (b := budget(c.info, v5e))]
    assert figures(alone) == figures(lowered) and figures(alone)
    assert traced_program(load_target("samples/attention.py:flash", **flash), cpu) is alone  # kept


def test_jitted_function_and_pytree_inputs():
    cpu = Backend(get_chip("cpu"))
    assert "mul" in capture(load_target(f"{FUNCS}:jitted"), cpu, compile=False).stages.jaxpr
    tree = capture(load_target(f"{FUNCS}:tree_fn"), cpu).stages
    assert tree.memory["argument_size_in_bytes"] == 4 * 4 + 2 * 2 * 2


def test_disk_cache_skips_the_second_compile(tmp_path, monkeypatch):
    from inspector.compilation import stages as stages_mod

    monkeypatch.setenv("INSPECTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(stages_mod, "_MEMO", {})
    target = load_target(f"{FUNCS}:matmul", args="f32[4,8] f32[8,2]")

    def run():
        monkeypatch.setattr(stages_mod, "_MEMO", {})
        return capture(target, Backend(get_chip("cpu"))).stages

    # One call site (line and column): the key's source locations include the frames calling capture.
    first, second = [run() for _ in range(2)]
    assert not first.compile_cached and second.compile_cached
    assert second.hlo == first.hlo and second.cost == first.cost
    assert len(list(tmp_path.glob("*.json"))) == 1


def test_trace_failure_names_the_users_line():
    with pytest.raises(TargetFailure) as err:
        capture(load_target(f"{FUNCS}:raises_in_trace"), Backend(get_chip("cpu")))
    assert "funcs.py:23" in str(err.value) and "TypeError" in str(err.value)


def test_the_inspectors_own_frames_are_excluded_once_however_many_captures():
    """Each registration lengthens jax's excluded paths and drops its compiled pattern: registered at
    every capture, each source lookup after it recompiled a pattern that grew with the session."""
    from jax._src import source_info_util

    from inspector.jax_internals.tracing import PACKAGE_DIR

    cpu = Backend(get_chip("cpu"))
    for sets in (["power=2"], ["power=4"]):
        capture(load_target(f"{FUNCS}:with_params", sets=sets), cpu, compile=False)
    assert source_info_util._exclude_paths.count(PACKAGE_DIR) == 1
