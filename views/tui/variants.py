"""The keys that change what the terminal UI analyses, and load again: another chip (t),
parameters (x), options (o: show's and check's, and the baseline the overview compares with),
the backward pass (G), the compiles with more to show (P, T, D, M, B); and the export (e)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ...base.chips import get_chip
from ...base.errors import UsageError
from ...compilation.static_params import parse_value
from ...families import family_of
from .calls import message_of
from .jobs import TARGETS
from .screens import ParamsScreen, TargetScreen

if TYPE_CHECKING:
    from ...base.families import FamilyInfo
    from .host import Host

# key's action -> (the session's flag, the report's field that holds its result (None: the flag says), the
# tab it fills, what the status line says when it is there already)
MORE = {
    "pass_dumps": ("passes", "passes", "passes", "already compiled with pass dumps: Enter on a step shows its diff"),
    "time": ("time", "time", "", ""),  # its tab and words: the family's kind of time (TIME_TAB)
    "measure": ("measure", "measured", "fusions", "already measured: the measured column in the Fusions tab"),
    "mosaic_dumps": ("mosaic_passes", "mosaic_passes", "mosaic-passes", "already compiled with Mosaic's pass dumps"),
    "buffers": ("buffers", None, "memory", "already compiled with the buffer assignment"),
}
# what the time key estimates with, by the family's kind of time: libtpu's simulation has the Bundles tab,
# a floor only the Fusions tab's est. time column
TIME_TAB = {"simulated": ("bundles", "the Bundles tab, and est. time in the Fusions tab"),
            "floor": ("fusions", "est. time in the Fusions tab")}


def family_info(chip: str) -> FamilyInfo:
    """The family of the session's chip (its name, as the session holds it): what it can, in its words."""
    return family_of(get_chip(chip)).info


def time_key_words(info: FamilyInfo) -> str:
    """What T does on the family, in its own words (the palette): what makes the estimate, where it shows."""
    if info.can.time not in TIME_TAB:
        return f"{info.time_method} on this chip: t picks a TPU or a GPU"
    return f"{info.time_method}: {TIME_TAB[info.can.time][1]}"


def _refused(action: str, chip: str) -> tuple[str | None, FamilyInfo]:
    """Why the target's family cannot give what ``action`` asks for (one line, what to do; None: it
    can), and the family: it says what it can (base/families.Capabilities), never the chip's name."""
    info = family_info(chip)
    if action == "time" and info.can.time not in TIME_TAB:
        return f"{chip} has no time estimate beyond the roofline (the Fusions tab's time): t picks a TPU or a GPU", info
    if action == "mosaic_dumps" and info.can.kernel_dumps != "Mosaic passes":
        return f"Mosaic runs only for a TPU target ({info.compiler} compiles {chip}): t picks one", info
    return None, info


class Variants:
    """The keys that change the app's session (and load it), owned by the app."""

    def __init__(self, app: Host) -> None:
        self.app = app

    def more(self, action: str) -> None:
        """P, T, D, M, B: compile again with more to show (pass dumps, the family's time estimate, a
        measurement on the attached TPU, Mosaic's pass dumps, the buffer assignment); its tab fills in."""
        app, session = self.app, self.app.session
        flag, field, tab, already = MORE[action]
        refused, family = _refused(action, session.chip)
        if refused is not None:
            app.status(refused, "yellow")
            return
        if action == "time":
            tab, where = TIME_TAB[family.can.time or ""]
            already = f"already estimated ({family.time_estimate}): {where}"
        if getattr(session, flag) and app.report is not None and (field is None or getattr(app.report, field) is not None):
            app.action_tab(tab)
            app.status(already)
            return
        if action == "measure":
            from ...families.measuring import attached_for

            try:
                attached_for(get_chip(session.chip))
            except UsageError as err:  # no TPU here, or not the target's (NoChip is one)
                app.status(str(err), "yellow")
                return
        app.change(_with(session, flag))
        app.action_tab(tab)

    def backward(self) -> None:
        """The function's backward pass (jax.vjp), or its forward again: a jax.custom_vjp kernel's
        backward kernels (flash's dq and dk/dv) in the Pallas tab, the Fusions tab, the findings."""
        session = self.app.session.with_backward(not self.app.session.backward)
        self.app.change(session, why="the backward pass (G: the forward again)" if session.backward else "the forward pass")

    def target(self) -> None:
        app = self.app

        def chosen(chip: str | None) -> None:
            if chip and chip != app.session.chip:
                app.change(app.session.with_chip(chip))

        app.push_screen(TargetScreen(TARGETS, app.session.chip), chosen)

    def params(self) -> None:
        app = self.app
        known = app.report or app.lowered  # the lowering knows the parameters: no need to wait for the compile
        if known is None:
            app.status("the parameters can be edited once the function is traced (its own are known then)", "yellow")
            return
        signature = app.session.keyword_params()

        def chosen(params: dict | None) -> None:
            if params:
                app.change(app.session.with_params(params))

        app.push_screen(ParamsScreen(known.target.params, known.target.param_choices,
                                     signature[0] if signature else None, parse_value), chosen)

    def export(self, loading: bool) -> None:
        app = self.app
        report = app.report
        if report is None:  # the export needs the compiled program: say so rather than do nothing
            app.status("e exports once the compile is done" if loading else
                       "nothing to export: the compile did not finish (r reloads)", "yellow")
            return
        session = app.session

        def work() -> None:
            try:
                written = session.export(report)
            except Exception as err:
                app.calls.deliver(app.notify, message_of(err), severity="error")
                return
            app.calls.deliver(app.notify, "wrote " + ", ".join(written))

        app.calls.start("export", work)


def _with(session, flag: str):
    return {"passes": session.with_passes, "time": session.with_time, "measure": session.with_measure,
            "mosaic_passes": session.with_mosaic_passes, "buffers": session.with_buffers}[flag](True)


class Baselines:
    """o: the options screen; the baseline the overview compares with (--baseline) and its
    tolerances, owned by the app."""

    def __init__(self, app: Host, baseline=None) -> None:
        self.app = app
        self.baseline = baseline  # a saved baseline (inspector.baseline.record.Baseline), or None
        self.tolerance: str | None = None  # the options screen's --tolerance, as typed
        self.tolerances: dict | None = None  # parsed (inspector.baseline.compare); None: the defaults

    def options(self) -> None:
        """The options screen (o): show's and check's options that no key sets; a changed one compiles again."""
        from .options_screen import GATE, OptionsScreen

        app = self.app
        current = {**{name: getattr(app.session, name) for name in app.session.OPTIONS},
                   "baseline": self.baseline.path if self.baseline is not None else None, "tolerance": self.tolerance}

        def chosen(changed: dict | None) -> None:
            if not changed:
                return
            if "loaded" in changed or changed.get("baseline", "") is None:
                self.baseline, self.tolerances = changed.get("loaded"), changed.get("tolerances")
                self.tolerance = changed.get("tolerance", self.tolerance) if self.baseline is not None else None
            options = {k: v for k, v in changed.items() if k not in GATE + ("loaded", "tolerances")}
            if options:
                # a value only the worker can judge (--ref's function): refused, the report on screen comes back
                undo = (app.session, app.report) if app.report is not None else None
                app.change(app.session.with_options(**options), undo=undo)
            elif app.report is not None:
                app.tabs["overview"].show_baseline(app.report)

        app.push_screen(OptionsScreen(current), chosen)
