"""The fixes in the terminal UI (Textual's pilot): F tries them and the overview shows the top one
under the finding it answers; A applies it and compiles again, the file untouched. The work runs
in this process (Remote.call faked), without libtpu's time or numerics, one block size besides
the raised limit: what F and A do with a FixResult is the subject, not its figures (test_fix.py)."""
import dataclasses

import pytest
from textual.widgets import DataTable

from conftest import loaded
from inspector.session import Session
from inspector.views.tui.app import InspectorApp
from test_tui import SIZE, plain, status

OOM = Session("samples/attention.py:flash", "tpu-v5e", args="bf16[1,4096,128] bf16[1,4096,128] bf16[1,4096,128]",
              sets=["block_q=4096"])


@pytest.mark.asyncio
@pytest.mark.libtpu
@pytest.mark.slow
async def test_f_shows_the_fix_under_the_vmem_finding_and_a_applies_it(monkeypatch):
    import inspector.verbs.fixing as fixing
    from inspector.remote import Remote

    real = fixing.run_fix

    def cheap(target, chips, **how):
        return real(dataclasses.replace(target, param_choices={"block_q": [1024]}), chips,
                    **{**how, "numerics": False, "time": False})

    monkeypatch.setattr(fixing, "run_fix", cheap)
    monkeypatch.setattr(Remote, "call", lambda self, session, method, *args, epoch=None: getattr(session, method)(*args))

    app = InspectorApp(OOM)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        codes = [f.code for f in app.report.findings]
        assert "compile-vmem-oom" in codes and app.report.fixes is None
        await pilot.press("A")
        await pilot.pause()
        assert "F tries the fixes first" in status(app)
        await pilot.press("F")
        await loaded(pilot)
        assert app.report.fixes is not None and "recommended" in status(app)
        table = app.query_one("#findings", DataTable)
        table.move_cursor(row=codes.index("compile-vmem-oom"))
        await pilot.pause()
        detail = plain(app, "#finding-detail")
        assert "fix #1" in detail and "vmem_limit_bytes=" in detail and "A applies" in detail
        # block_q is the command line's: A applies what works with it, at trace time
        await pilot.press("A")
        await loaded(pilot)
        change, = app.session.changes
        assert change.kind == "vmem_limit" and app.session.sets == ["block_q=4096"]
        assert app.report.stages.compile_error is None
        assert "compile-vmem-oom" not in [f.code for f in app.report.findings]


def test_a_refused_compiles_error_is_cut_between_words():
    """fix's "compiles" column cut the compiler's headline mid-word ("in flash_atte")."""
    from inspector.base.fix_model import Trial
    from inspector.views.fix import _compiles

    error = ("Ran out of memory in memory space vmem while allocating on stack for "
             "in flash_attention_fwd: 48.00M of 16.00M")
    said = _compiles(Trial(chip="tpu-v5e", compiles=False, compile_error=error)).plain
    assert said == "no: Ran out of memory in memory space vmem while allocating on stack for in…"
    assert _compiles(Trial(chip="tpu-v5e", compiles=False, compile_error="short")).plain == "no: short"
