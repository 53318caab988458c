"""Output blocks no grid step writes are an error only where the program reads them: a recurrent
scan's backward (tests/data/scan_backward.py) leaves the first block of its 5-D boundary-gradient
output unwritten, and its caller never reads it (issue 56: a false `output-not-written`, exit 1,
on a kernel whose gradients match the reference)."""
import jax
import jax.numpy as jnp
import pytest

import inspector
from conftest import DATA

SCAN = f"{DATA}/scan_backward.py"


def _unwritten(entry: str) -> tuple[dict, set]:
    """The findings about unwritten output blocks ({code: (count, operand)}) and every severity."""
    from inspector.base.chips import get_chip
    from inspector.compilation.backends import Backend
    from inspector.compilation.stages import capture
    from inspector.compilation.target import load_target
    from inspector.pallas.analysis import analyse_pallas

    program = capture(load_target(f"{SCAN}:{entry}"), Backend(get_chip("cpu")), compile=False).program
    reports, unread = analyse_pallas(program, [], [get_chip("tpu-v5e")])
    findings = [f for r in reports for f in r.findings] + unread
    return ({f.code: (f.data["count"], f.operand) for f in findings if f.code.startswith("output-")},
            {f.severity for f in findings})


@pytest.mark.parametrize("entry", ["train_step", "backward_only"])
def test_unwritten_blocks_the_program_never_reads_are_no_error(entry):
    found, severities = _unwritten(entry)
    assert found == {"output-unwritten-unread": (8, "gcarry_ref")} and "error" not in severities


def test_unwritten_blocks_the_program_returns_are_still_an_error():
    found, severities = _unwritten("backward_unsliced")
    assert found == {"output-not-written": (8, "gcarry_ref")} and "error" in severities


def test_unwritten_blocks_read_at_run_time_offsets_are_undecided_not_an_error():
    found, severities = _unwritten("backward_picked")
    assert found == {"output-unwritten-undecided": (8, "gcarry_ref")} and "error" not in severities


@pytest.mark.libtpu
@pytest.mark.parametrize("verb", [["check", "--estimate-only"], ["show", "--target", "tpu-v5e"]])
def test_show_and_check_pass_the_scan_kernel(cli, verb):
    code, out, err = cli(verb[0], f"{SCAN}:train_step", *verb[1:])
    assert code == 0 and "output-not-written" not in out, out + err


def test_the_scan_kernels_gradients_match_the_reference():
    """The kernel is right: what the check says above is about a correct kernel."""
    result = inspector.diff(f"{SCAN}:scan", None, grad=True, runs=0)
    assert result.ok and len(result.gradients) == 3, [(o.name, o.verdict) for o in result.outputs + result.gradients]


def _reads(fn, *shapes):
    from inspector.jax_internals.output_reads import output_reads

    jaxpr = jax.make_jaxpr(fn)(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes])
    [reads] = output_reads(jaxpr).values()
    return [("all" if r.everything else sorted(r.boxes), [u.split(" at ")[0] for u in r.unfollowed]) for r in reads]


def _copy(x):
    from jax.experimental import pallas as pl

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x)


@pytest.mark.parametrize("after, boxes", [
    (lambda y: y, "all"),
    (lambda y: y[2:5, 8:], [((2, 5), (8, 16))]),
    (lambda y: y.T[:, 1:3], [((1, 3), (0, 16))]),  # through a transpose
    (lambda y: jnp.concatenate([y, y])[8:], [((0, 8), (0, 16))]),  # the second copy's part
    (lambda y: (y * 2.0 + 1.0)[:, ::4], [((0, 8), (0, 13))]),  # element-wise, then a strided slice (its hull)
    (lambda y: jnp.flip(y, 0)[:2], [((6, 8), (0, 16))]),
    (lambda y: y[None][:, 3], [((3, 4), (0, 16))]),  # a broadcast, then an index
    (lambda y: (y[:1], y[7:]), [((0, 1), (0, 16)), ((7, 8), (0, 16))]),
    (lambda y: jnp.split(y, 2)[1], [((4, 8), (0, 16))]),
    (lambda y: y.sum(), "all"),  # a reduction reads everything
    (lambda y: y.reshape(16, 8)[:2], []),  # boxes are not mapped through a reshape: unfollowed
])
def test_the_elements_read_of_an_output_are_followed(after, boxes):
    [(read, unfollowed)] = _reads(lambda x: after(_copy(x)), (8, 16))
    assert read == boxes
    assert unfollowed == (["reshape"] if boxes == [] else [])


def test_reads_at_run_time_offsets_are_named_not_guessed():
    [(read, unfollowed)] = _reads(lambda x, i: jax.lax.dynamic_slice_in_dim(_copy(x), i.astype(jnp.int32), 2), (8, 16), ())
    assert read == [] and unfollowed == ["dynamic_slice"]
    [(read, unfollowed)] = _reads(lambda x: jax.lax.dynamic_slice_in_dim(_copy(x), 3, 2), (8, 16))
    assert read == [((3, 5), (0, 16))] and unfollowed == []
