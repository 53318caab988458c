"""The Python API: the same figures as the CLI, function objects, no state between calls, errors
as InspectorError, nothing printed, HTML for Jupyter, the example notebook."""
import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

import inspector
from inspector.base.errors import InspectorError, TargetFailure, UsageError

NAIVE = "samples/attention.py:naive"
SPECS = "f32[2,128,32] f32[2,128,32] f32[2,128,32]"


def _strip_timings(stages: dict) -> dict:
    return {k: v for k, v in stages.items() if k not in ("timings", "compile_cached", "compile_options")}


def test_api_and_cli_give_the_same_figures(cli_run, monkeypatch):
    monkeypatch.chdir(ROOT)
    report = inspector.inspect(NAIVE, SPECS)
    out = cli_run("show", NAIVE, "--args", SPECS, "--json")
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    api = report.to_dict()
    assert report.fusions.totals["hbm_bytes"] == cli["totals"]["hbm_bytes"] > 0
    assert api["totals"] == cli["totals"]
    assert api["xla_cost"] == cli["xla_cost"]
    assert api["kernels"] == cli["kernels"]
    assert api["findings"] == cli["findings"]
    assert api["inputs"] == cli["inputs"] and api["target"] == cli["target"]
    assert _strip_timings(api["stages"]) == _strip_timings(cli["stages"])
    assert [dataclasses.asdict(p) for p in report.pallas] == cli["pallas"] == []
    # the stage texts are there too
    assert "dot_general" in report.stages.jaxpr and "HloModule jit_naive" in report.stages.hlo
    assert "stablehlo.dot_general" in report.stages.stablehlo


def test_function_objects_with_the_same_name_do_not_collide():
    import jax
    import jax.numpy as jnp

    def make(kind):
        def f(x):  # the same name, file and line for both
            return jnp.tanh(x) if kind == "tanh" else jnp.exp(x) * 2.0
        return f

    x = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    a, b = inspector.inspect(make("tanh"), x), inspector.inspect(make("exp"), x)
    assert a.target.spec == b.target.spec
    assert "tanh" in a.stages.op_counts["jaxpr"] and "tanh" not in b.stages.op_counts["jaxpr"]
    assert "exp" in b.stages.op_counts["jaxpr"] and "exp" not in a.stages.op_counts["jaxpr"]

    # the in-process memo the terminal UI uses keys by the function object, not by its name
    from inspector.compilation.backends import Backend
    from inspector.base.chips import get_chip
    from inspector.compilation.stages import capture
    from inspector.compilation.target import callable_target

    cpu = Backend(get_chip("cpu"))
    first = capture(callable_target(make("tanh"), (x,), {}), cpu, compile=False)
    second = capture(callable_target(make("exp"), (x,), {}), cpu, compile=False)
    assert [e.primitive for e in first.stages.jaxpr_eqns] != [e.primitive for e in second.stages.jaxpr_eqns]
    fn = make("tanh")
    assert capture(callable_target(fn, (x,), {}), cpu, compile=False) is capture(callable_target(fn, (x,), {}), cpu, compile=False)


def test_each_call_traces_afresh():
    """A function reading a global changed between calls: the API does not serve the old trace."""
    import jax.numpy as jnp

    namespace = {"jnp": jnp, "SCALE": 1}
    exec("def g(x):\n    return jnp.sin(x) if SCALE == 1 else jnp.cos(x)\n", namespace)
    first = inspector.inspect(namespace["g"], "f32[8,128]")
    namespace["SCALE"] = 2
    second = inspector.inspect(namespace["g"], "f32[8,128]")
    assert "sin" in first.stages.op_counts["jaxpr"] and "cos" in second.stages.op_counts["jaxpr"]


def test_inputs_params_and_jit_wrapped_functions():
    import jax
    import jax.numpy as jnp
    import numpy as np

    def scaled(x, y, *, scale: int = 1):
        return (x @ y) * scale

    report = inspector.inspect(jax.jit(scaled, static_argnames="scale"), np.ones((16, 32), np.float32),
                               "f32[32,8]", params={"scale": 3})
    assert [i.type for i in report.inputs] == ["f32[16,32]", "f32[32,8]"]
    assert [i.name for i in report.inputs] == ["x", "y"]
    assert report.target.function == "scaled" and report.target.params == {"scale": 3}
    assert report.target.spec.endswith("test_api.py:test_inputs_params_and_jit_wrapped_functions.<locals>.scaled")
    assert report.ok and report.fusions.totals["flops"] >= 2 * 16 * 32 * 8
    keyword = inspector.inspect(scaled, "f32[16,32]", y=jax.ShapeDtypeStruct((32, 8), jnp.float32))
    assert [i.name for i in keyword.inputs] == ["x", "y"]
    # a spec's INSPECT params stay the defaults, params= wins
    from inspector.api import make_target

    t = make_target("samples/attention.py:flash", ("bf16[1,256,128] bf16[1,256,128] bf16[1,256,128]",),
                    params={"block_q": 128}, reference=None)
    assert t.params == {"block_q": 128, "block_k": 512} and t.reference_name == "reference"


@pytest.mark.parametrize("call, message", [
    (lambda: inspector.inspect("samples/nope.py:f", "f32[8]"), "no such file"),
    (lambda: inspector.inspect("samples/attention.py:nothere"), "no function named 'nothere'"),
    (lambda: inspector.inspect(42, "f32[8]"), "expected a function"),
    (lambda: inspector.inspect(lambda x: x), "no example inputs"),
    (lambda: inspector.inspect(lambda x: x, "f32[8"), "f32[8"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", "f32[8]"), "do not match the signature"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", params={"block": 2}), "no parameter 'block'"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", target="tpu-v99"), "unknown target"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", target="b200"), "no XLA target config"),
    (lambda: inspector.check(lambda x: x, "f32[8]", targets="cpu"), "check is about TPU and GPU targets"),
    (lambda: inspector.check(lambda x: x, "f32[8]", targets=["local"]), "check is about TPU and GPU targets, not "),
    (lambda: inspector.diff(lambda x: x, None, "f32[8]"), "no reference"),
    (lambda: inspector.diff(lambda x: x, lambda x: x, "f32[8]", atol=-1), "atol must be"),
    (lambda: inspector.diff(lambda x: x, lambda x: x, "f32[8]", target="b200"), "diff runs on this machine"),
    (lambda: inspector.diff(lambda x: x, "samples/attention.py:missing", "f32[8]"), "no function named 'missing'"),
    (lambda: inspector.compare(NAIVE, None, SPECS), "compare needs two different variants"),
    (lambda: inspector.compare(NAIVE, None, SPECS, params_a=3), "params_a must be a dict"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", shardings="P('data')"), "shardings without a mesh"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", mesh={"data": 2}, shardings="P(data)"), "PartitionSpec entry"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", mesh={"data": 0}), "sizes are whole numbers"),
    (lambda: inspector.inspect(lambda x: x, "f32[8]", mesh={"data": 2}, shardings=5), "shardings must be"),
])
def test_bad_input_raises_one_clear_usage_error(call, message):
    with pytest.raises(UsageError) as err:
        call()
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_failing_function_is_a_target_failure():
    def broken(x):
        raise RuntimeError("boom")

    with pytest.raises(TargetFailure, match="RuntimeError: boom") as err:
        inspector.inspect(broken, "f32[8]")
    assert isinstance(err.value, InspectorError)


def test_nothing_prints(capfd):
    import jax.numpy as jnp

    report = inspector.inspect(lambda x: jnp.exp(x).sum(), "f32[64,128]")
    result = inspector.diff(lambda x: x * 2.0, lambda x: x + x, "f32[64,128]", runs=1)
    assert report.ok and result.ok
    out, err = capfd.readouterr()
    assert out == "" and err == ""
    assert repr(report).startswith("<Report ") and len(repr(report)) < 300  # no stage texts in the repr
    with pytest.raises(UsageError, match="no view 'bogus': use one of overview"):
        report.show("bogus")  # one line, not an AttributeError from inside


def test_diff_finds_a_wrong_output_and_uses_given_arrays():
    import jax.numpy as jnp

    x = jnp.arange(8 * 128, dtype=jnp.float32).reshape(8, 128)
    result = inspector.diff(lambda x: x.at[7, 127].set(0.0), lambda x: x, x, runs=0)
    assert not result.ok
    (leaf,) = result.outputs
    assert leaf.bad == 1 and leaf.worst_index == [7, 127] and leaf.worst_reference == 8 * 128 - 1
    assert [f.code for f in result.findings] == ["mismatch"]
    assert result.timing is None
    assert "mismatch" in result._repr_html_()


def test_html_shows_overview_fusions_and_graph(tmp_path):
    from inspector.hlo.graph import dot_available
    from inspector.views.html import plain

    report = inspector.inspect(NAIVE, SPECS)
    html = report._repr_html_()
    text = plain(html)
    assert "samples/attention.py:naive on cpu" in text and "no findings" in text
    assert "kernels in schedule order" in text and "HBM r+w" in text  # the fusions table
    assert "totals against XLA's cost analysis" in text
    assert 'style="' in html and "<html" not in html  # inline styles, a fragment
    if dot_available():
        assert "<svg" in html
        path = report.export_svg(tmp_path / "naive.svg")
        assert path.read_text().lstrip().startswith("<?xml") and "<svg" in path.read_text()
        assert report.fusions.kernels[0].name in path.read_text()
    else:
        assert "needs Graphviz" in text
        with pytest.raises(UsageError, match="dot"):
            report.export_svg(tmp_path / "naive.svg")


def test_local_target_is_jax_default_backend(monkeypatch):
    import jax

    from inspector.api import resolve_chip

    assert resolve_chip("local").name == "cpu"
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert resolve_chip("local").name == "gpu"
    monkeypatch.setattr(jax, "default_backend", lambda: "metal")
    with pytest.raises(UsageError, match="metal"):
        resolve_chip("local")


def _python(code: str, env_drop=("JAX_PLATFORMS", "TF_CPP_MIN_LOG_LEVEL", "GLOG_minloglevel", "TPU_SKIP_MDS_QUERY",
                                 "TPU_WORKER_HOSTNAMES", "TPU_ACCELERATOR_TYPE")) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in env_drop}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)


def test_import_prepares_the_environment_before_and_after_jax():
    out = _python("""
        import os, inspector
        from inspector.base import environment
        print(environment.import_state, os.environ["JAX_PLATFORMS"], os.environ["TPU_SKIP_MDS_QUERY"])
        import jax, logging
        print(jax.devices()[0].platform, logging.getLogger("jax").level)  # the user's jax logger is left alone
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["before-jax", "cpu", "1", "cpu", "0"]
    assert out.stderr == ""
    # jax imported first, no backend yet: jax_platforms set through jax.config, libtpu kept quiet
    out = _python("""
        import jax, inspector
        from inspector.base import environment
        print(environment.import_state, jax.config.jax_platforms, jax.devices()[0].platform)
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["jax-configured", "cpu", "cpu"]
    assert "TPU" not in out.stderr and "InitGoogle" not in out.stderr
    # a user's JAX_PLATFORMS is theirs; a running jax is left as it is
    out = _python("""
        import os
        os.environ["JAX_PLATFORMS"] = "cpu"
        import jax
        jax.devices()
        import inspector
        from inspector.base import environment
        print(environment.import_state, jax.config.jax_platforms)
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["jax-running", "cpu"]


def test_debug_undoes_the_quiet_logs_import_set():
    out = _python("""
        import os, inspector
        from inspector.base import environment
        before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
        environment.prepare(debug=True)
        print(before, os.environ.get("TF_CPP_MIN_LOG_LEVEL", "unset"))
        """)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["3", "unset"]
    out = _python("""
        import os
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "1"   # the user's own: kept
        import inspector
        from inspector.base import environment
        environment.prepare(debug=True)
        print(os.environ["TF_CPP_MIN_LOG_LEVEL"])
        """)
    assert out.stdout.split() == ["1"]


def test_the_api_names_are_no_module_names():
    """inspector.diff and inspector.compare are the API's functions; no module of the package
    has those names, so importing the whole package cannot rebind them."""
    import pkgutil

    import inspector.run.run  # noqa: F401
    import inspector.verbs.comparison  # noqa: F401

    modules = {m.name.rsplit(".", 1)[-1] for m in pkgutil.walk_packages(inspector.__path__, "inspector.")
               if m.name.count(".") == 1}
    assert not modules & {"inspect", "check", "diff", "compare", "tune"}
    for name in ("inspect", "check", "diff", "compare"):
        assert callable(getattr(inspector, name)) and getattr(inspector, name).__module__ == "inspector.api"


@pytest.mark.libtpu
def test_check_api_on_a_tpu_target():
    from inspector.views.html import plain

    result = inspector.check("samples/matmul.py:tiled", "bf16[256,512] bf16[512,256]", targets=["tpu-v5e", "tpu-v6e"],
                             params={"bm": 128, "bk": 256, "bn": 128}, estimate_only=True)
    assert result.ok, result.findings
    assert [t.chip for t in result.targets] == ["tpu-v5e", "tpu-v6e"]
    assert result.targets[0].fits and result.targets[0].compiler_fits is None
    assert result.kernels[0].call.name == "matmul"
    too_big = inspector.check("samples/matmul.py:tiled", "bf16[2048,2048] bf16[2048,2048]", targets="tpu-v5e",
                              params={"bm": 2048, "bk": 2048, "bn": 2048}, estimate_only=True)
    assert not too_big.ok and "vmem-over-limit" in [f.code for f in too_big.findings]
    text = plain(too_big._repr_html_())
    assert "DOES NOT FIT" in text and "vmem-over-limit" in text


@pytest.mark.slow
@pytest.mark.libtpu  # its pods section compiles for tpu-v5e:2x2 (in the notebook's kernel process)
def test_example_notebook_runs_clean():
    """samples/inspector_api.ipynb executes without an error; its HTML shows the fusions table
    and nothing reached stderr."""
    import nbformat
    from nbclient import NotebookClient

    path = ROOT / "samples" / "inspector_api.ipynb"
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert not [o for o in outputs if o.output_type == "stream" and o.name == "stderr"]
    html = "\n".join(o.get("data", {}).get("text/html", "") for o in outputs)
    assert "kernels in schedule order" in html and "HBM r+w" in html  # the fusions table
    assert "diff " in html and "matmul.py:tiled against xla" in html
    assert "totals (ratio: B / A)" in html  # compare
    assert "HBM per device on tpu-v5e:2x2" in html and "collectives in schedule order" in html  # the pods section


def test_compare_api_gives_what_the_cli_prints(cli_run, monkeypatch):
    monkeypatch.chdir(ROOT)
    flash = "samples/attention.py:flash"
    args = "f32[1,256,128] f32[1,256,128] f32[1,256,128]"
    result = inspector.compare(NAIVE, flash, args)
    out = cli_run("compare", NAIVE, flash, "--args", args, "--json")
    assert out.returncode == 0, out.stderr
    cli = json.loads(out.stdout)
    api = json.loads(json.dumps(dataclasses.asdict(result), default=str))
    strip = lambda totals: [t for t in totals if t["name"] != "compile time"]
    assert strip(api["totals"]) == strip(cli["totals"]) and len(api["totals"]) > 3
    assert (api["only_a"], api["only_b"], api["paired"]) == (cli["only_a"], cli["only_b"], cli["paired"])
    assert result.ok and result.b.label.startswith(flash)
    assert repr(result).startswith("<Compare ") and "totals (ratio: B / A)" in result._repr_html_()
    # one function, two parameter sets: params_a / params_b over params
    tiled = inspector.compare("samples/matmul.py:tiled", None, "bf16[256,512] bf16[512,256]", params={"bk": 256},
                              params_a={"bm": 128, "bn": 128}, params_b={"bm": 256, "bn": 256})
    assert tiled.a.params == {"bm": 128, "bk": 256, "bn": 128} and tiled.b.params == {"bm": 256, "bk": 256, "bn": 256}


SHARDED = "tests/data/sharded.py:step"


@pytest.mark.libtpu
def test_sharded_targets_through_the_api(cli_run, monkeypatch):
    """A topology target: INSPECT's mesh and shardings for a spec, mesh= and shardings= for a function
    object; memory and collectives as `show --json` gives them; the HTML shows both."""
    from jax.sharding import PartitionSpec as P

    from inspector.views.html import plain

    monkeypatch.chdir(ROOT)
    report = inspector.inspect(SHARDED, target="tpu-v5e:2x2", buffers=True)
    cli = {view: json.loads(cli_run("show", SHARDED, "--target", "tpu-v5e:2x2", "--view", view, "--json").stdout)
           for view in ("memory", "collectives")}
    api = report.to_dict()
    assert api["memory"] == cli["memory"]["memory"] and api["memory"]["largest"]
    assert api["collectives"] == cli["collectives"]["collectives"] != []
    assert api["collective_totals"] == cli["collectives"]["collective_totals"]
    assert report.stages.mesh == {"data": 2, "model": 2}
    text = plain(report._repr_html_())
    assert "memory: HBM per device on tpu-v5e:2x2" in text and "fits:" in text
    assert "collectives: " in text and "by mesh axis" in text

    from conftest import DATA
    import importlib.util

    spec = importlib.util.spec_from_file_location("sharded_for_api", DATA / "sharded.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    w1, w2, x = "f32[256,512]", "f32[512,256]", "f32[64,256]"
    same = inspector.inspect(module.step, w1, w2, x, target="tpu-v5e:2x2", mesh={"data": 2, "model": 2},
                             shardings=[P("data", "model"), P("model", "data"), P("data", None)])
    assert same.memory.argument_bytes == report.memory.argument_bytes
    assert same.memory.temp_bytes == report.memory.temp_bytes
    assert [c.kind for c in same.collectives.collectives] == [c.kind for c in report.collectives.collectives]
    other = inspector.inspect(module.step, w1, w2, x, target="tpu-v5e:2x2", mesh="data=4,model=1",
                              shardings="P('data','model') P('model','data') P('data',None)")
    assert other.stages.mesh == {"data": 4, "model": 1}
    assert other.memory.argument_bytes == (256 * 512 + 512 * 256 + 64 * 256) * 4 // 4
    with pytest.raises(UsageError, match="has 4 devices but tpu-v5e:4x4 has 16"):
        inspector.inspect(module.step, w1, w2, x, target="tpu-v5e:4x4", mesh={"data": 2, "model": 2})
    result = inspector.check(SHARDED, targets="tpu-v5e:2x2")
    assert result.ok and result.targets[0].hbm_fits is True and result.targets[0].mesh == {"data": 2, "model": 2}
    too_big = inspector.check("tests/data/sharded.py:big_step", targets="tpu-v5e:2x2")
    assert not too_big.ok and too_big.targets[0].hbm_fits is False
    assert [f.code for f in too_big.findings if f.severity == "error"] == ["hbm-over-capacity"]
    assert "hbm-over-capacity" in plain(too_big._repr_html_())


@pytest.mark.libtpu
def test_many_calls_in_one_session_keep_no_state():
    """Calls alternating between targets give the same figures each time; no file handles pile up."""
    import jax
    import jax.numpy as jnp

    def f(x, w):
        return jax.nn.relu(x @ w).sum(axis=0)

    x, w = jax.ShapeDtypeStruct((64, 256), jnp.float32), jax.ShapeDtypeStruct((256, 128), jnp.float32)
    seen: dict[str, set] = {}
    handles = []
    for i in range(8):
        chip = ("cpu", "tpu-v5e", "tpu-v6e", "cpu")[i % 4]
        r = inspector.inspect(f, x, w, target=chip)
        assert r.chip.name == chip and r.ok
        seen.setdefault(chip, set()).add((r.fusions.totals["hbm_bytes"], r.fusions.totals["flops"], len(r.fusions.kernels),
                                          r.memory.argument_bytes))
        handles.append(len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0)
    assert all(len(v) == 1 for v in seen.values()), seen
    assert handles[4:] == handles[:4] or handles[-1] == handles[3]
