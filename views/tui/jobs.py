"""What the terminal UI runs on request, each in the worker process and cancellable: the diff
(d), pass dumps and a pass's diff (P, Enter), the buffer assignment (B), a measurement on the
attached TPU (D), a comparison (c), another
chip (t), parameters (x) or options (o), the export (e)."""
from __future__ import annotations

from textual import work

from .app_base import AppBase
from ...base.chips import CHIPS, get_chip
from ...base.errors import UsageError
from ...session import Session
from ...compilation.static_params import parse_value
from .fix_keys import clock_time
from .loading import message_of
from .screens import CompareScreen, ParamsScreen, TargetScreen

TARGETS = [c.name for c in CHIPS if c.kind != "gpu" and c.name != "gpu"]


class Jobs(AppBase):
    """The App's jobs on request: mixed into InspectorApp (``self`` is the app)."""

    def action_diff(self) -> None:
        self.action_tab("diff")
        if "diff" in self._running_groups():  # a second run would queue behind the first
            self.status("the diff is running (Esc cancels)", "yellow")
            return
        self._diff_began = self.clock()
        self._diff_progress()
        self.run_diff(self._generation, self.session)

    def _diff_progress(self) -> None:
        """Every half second while d runs (a minute, jax's compiles of both sides): the time so far,
        on the Diff tab and the status line, as the compile's progress says it."""
        if self._diff_began is None or not self.is_running:
            return
        text = f"running the diff, {clock_time(self.clock() - self._diff_began)}: the kernel and the reference (Esc cancels)"
        self.tabs["diff"].running(text)
        if self._fix_began is None:  # F's line, when it runs too, keeps the status line (no flicker between the two)
            self.status(text, "yellow")

    @work(thread=True, exclusive=True, group="diff")
    def run_diff(self, generation: int, session: Session) -> None:
        self._answer(generation, lambda: self.remote.call(session, "diff"), self._show_diff, self._diff_failed)

    def _diff_took(self) -> str:
        took, self._diff_began = self._diff_began, None
        return f" in {clock_time(self.clock() - took)}" if took is not None else ""

    def _diff_failed(self, message: str) -> None:
        self.status(f"diff failed{self._diff_took()}: {message}", "bold red")
        self.tabs["diff"].show_error(message)

    def _show_diff(self, result) -> None:
        self.tabs["diff"].show_result(result)
        self.diff_verdict = "ok" if result.ok else "WRONG (see the Diff tab)"
        self.tabs["overview"].show_diff(self.diff_verdict)
        self.status(f"diff{self._diff_took()}: {self.diff_verdict}", "green" if result.ok else "bold red")

    def action_backward(self) -> None:
        """The function's backward pass (jax.vjp), or its forward again: a jax.custom_vjp kernel's
        backward kernels (flash's dq and dk/dv) in the Pallas tab, the Fusions tab, the findings."""
        self.session = self.session.with_backward(not self.session.backward)
        self.load(why="the backward pass (G: the forward again)" if self.session.backward else "the forward pass")

    # ------------------------------------------------------------------ passes

    def action_pass_dumps(self) -> None:
        """Compile again with XLA's pass dumps: the Passes tab fills in, kernels name their pass."""
        if self.session.passes and self.report is not None and self.report.passes is not None:
            self.action_tab("passes")
            self.status("already compiled with pass dumps: Enter on a step shows its diff")
            return
        self.session = self.session.with_passes(True)
        self.load()
        self.action_tab("passes")

    def show_pass_diff(self, row: int) -> None:
        tab = self.tabs["passes"]
        step = tab.step_at(row)
        if step is None:
            return
        if step.index in self._pass_diffs:
            tab.show_diff(self._pass_diffs[step.index])
            self.status(f"{step.label}: its diff")
            return
        tab.diff_message(f"{step.label}: compiling with pass dumps for its diff… (Esc cancels)", "yellow")
        self.status(f"{step.label}: compiling with pass dumps for its diff…", "yellow")
        self._pass_diff(self._generation, self.session, step.index, step.label)

    @work(thread=True, exclusive=True, group="passes")
    def _pass_diff(self, generation: int, session: Session, index: int, label: str) -> None:
        self._answer(generation, lambda: self.remote.call(session, "pass_diff", str(index)),
                     lambda diff: self._show_pass_diff(index, label, diff),
                     lambda m: self.tabs["passes"].diff_message(m, "bold red"))

    def _show_pass_diff(self, index: int, label: str, diff) -> None:
        self._pass_diffs[index] = diff
        self.tabs["passes"].show_diff(diff)
        self.status(f"{label}: its diff" + (f" (+{diff.added} -{diff.removed} lines)" if diff else ""))

    def action_time(self) -> None:
        """Estimate time with libtpu: the Bundles tab fills in, the Fusions tab gets an est. time column."""
        if self.session.time and self.report is not None and self.report.time is not None:
            self.action_tab("bundles")
            self.status("already estimated: the Bundles tab, and est. time in the Fusions tab")
            return
        if not self.session.chip.startswith("tpu"):
            self.status("libtpu's time estimate is for TPU targets: t picks one", "yellow")
            return
        self.session = self.session.with_time(True)
        self.load()
        self.action_tab("bundles")

    def action_measure(self) -> None:
        """Run the program on the attached TPU: the Fusions tab gets a measured column, the overview a line."""
        if self.session.measure and self.report is not None and self.report.measured is not None:
            self.action_tab("fusions")
            self.status("already measured: the measured column in the Fusions tab")
            return
        from ...measure.run import attached_for

        try:
            attached_for(get_chip(self.session.chip))
        except UsageError as err:  # no TPU here, or not the target's (NoChip is one)
            self.status(str(err), "yellow")
            return
        self.session = self.session.with_measure(True)
        self.load()
        self.action_tab("fusions")

    def action_mosaic_dumps(self) -> None:
        """Compile again with Mosaic's pass dumps: the Mosaic passes tab fills in."""
        if self.session.mosaic_passes and self.report is not None and self.report.mosaic_passes is not None:
            self.action_tab("mosaic-passes")
            self.status("already compiled with Mosaic's pass dumps")
            return
        if not self.session.chip.startswith("tpu"):
            self.status("Mosaic runs only for a TPU target: t picks one", "yellow")
            return
        self.session = self.session.with_mosaic_passes(True)
        self.load()
        self.action_tab("mosaic-passes")

    def show_mosaic_pass_diff(self, row: int) -> None:
        """Enter on a Mosaic pass: its diff (the first compiles with Mosaic's dumps, which the worker
        keeps for the module: the other passes' diffs are read at once)."""
        tab = self.tabs["mosaic-passes"]
        at = tab.pass_at(row)
        if at is None:
            return
        kernel, k, p = at
        label = f"{k.kernel}: {p.label}"
        if (kernel, p.index) in tab.diffs:
            tab.show_diff(kernel, p.index, tab.diffs[(kernel, p.index)])
            self.status(f"{label}: its diff")
            return
        tab.diff_message(f"{label}: compiling with Mosaic's pass dumps for its diff… (Esc cancels)", "yellow")
        self.status(f"{label}: compiling with Mosaic's pass dumps for its diff…", "yellow")
        self._mosaic_pass_diff(self._generation, self.session, kernel, k.kernel, p.index, label)

    @work(thread=True, exclusive=True, group="mosaic-passes")
    def _mosaic_pass_diff(self, generation: int, session: Session, kernel: int, name: str, index: int,
                          label: str) -> None:
        tab = self.tabs["mosaic-passes"]
        self._answer(generation, lambda: self.remote.call(session, "mosaic_pass_diff", name, str(index), kernel),
                     lambda diff: self._show_mosaic_pass_diff(kernel, index, label, diff),
                     lambda m: tab.diff_message(m, "bold red"))

    def _show_mosaic_pass_diff(self, kernel: int, index: int, label: str, diff) -> None:
        self.tabs["mosaic-passes"].show_diff(kernel, index, diff)
        self.status(f"{label}: its diff" + (f" (+{diff.added} -{diff.removed} lines)" if diff else ""))

    def action_buffers(self) -> None:
        """Compile again asking for the compiler's buffer assignment: the Memory tab's largest
        buffers live at the peak (the compile cache keeps it for next time)."""
        if self.session.buffers and self.report is not None:
            self.action_tab("memory")
            self.status("already compiled with the buffer assignment")
            return
        self.session = self.session.with_buffers(True)
        self.load()
        self.action_tab("memory")

    # ------------------------------------------------------------------ compare

    def action_compare(self) -> None:
        if self.report is None:
            self.status("compare needs this variant compiled first (wait, or r)", "yellow")
            return

        def picked(what: str | None) -> None:
            if what == "chip":
                self.push_screen(TargetScreen(TARGETS, self.session.chip), chip_chosen)
            elif what == "params":
                if self.report is None:  # a reload began while the choice was open (a saved file)
                    self.status("compare needs this variant compiled first (wait, or r)", "yellow")
                    return
                signature = self.session.keyword_params()
                self.push_screen(ParamsScreen(self.report.target.params, self.report.target.param_choices,
                                              signature[0] if signature else None, parse_value), params_chosen)

        def chip_chosen(chip: str | None) -> None:
            if chip and chip != self.session.chip:
                self.start_compare(self.session.with_chip(chip), f"on {chip}")
            elif chip:
                self.status(f"{chip} is this variant's chip: pick another to compare", "yellow")

        def params_chosen(params: dict | None) -> None:
            if params:
                self.start_compare(self.session.with_params(params),
                                   "with " + " ".join(f"{k}={v}" for k, v in params.items()))

        self.push_screen(CompareScreen(), picked)

    def start_compare(self, other: Session, what: str) -> None:
        other = other.with_passes(False)  # side B as `inspector compare` builds it
        self.action_tab("compare")
        self.tabs["compare"].running(f"{other.spec} {what}")
        self.status(f"compiling {other.spec} {what} to compare…", "yellow")
        self.run_compare(self._generation, self.report, other)

    @work(thread=True, exclusive=True, group="compare")
    def run_compare(self, generation: int, report_a, other: Session) -> None:
        from ...verbs.comparison import compare_reports

        self._answer(generation, lambda: compare_reports(report_a, self.remote.call(other, "report", False)),
                     self._show_compare, lambda m: self.tabs["compare"].show_error(m))

    def _show_compare(self, result) -> None:
        self.tabs["compare"].show_result(result)
        self.status(f"compare: B = {result.b.label}; " + ("ok" if result.ok else "an error finding on one side"),
                    "green" if result.ok else "bold red", of_tab=True)

    def action_target(self) -> None:
        def chosen(chip: str | None) -> None:
            if chip and chip != self.session.chip:
                self.session = self.session.with_chip(chip)
                self.load()

        self.push_screen(TargetScreen(TARGETS, self.session.chip), chosen)

    def action_params(self) -> None:
        known = self.report or self.lowered  # the lowering knows the parameters: no need to wait for the compile
        if known is None:
            self.status("the parameters can be edited once the function is traced (its own are known then)",
                        "yellow")
            return
        signature = self.session.keyword_params()

        def chosen(params: dict | None) -> None:
            if params:
                self.session = self.session.with_params(params)
                self.load()

        self.push_screen(ParamsScreen(known.target.params, known.target.param_choices,
                                      signature[0] if signature else None, parse_value), chosen)

    def action_options(self) -> None:
        """The options screen (o): show's and check's options that no key sets; a changed one compiles again."""
        from .options_screen import GATE, OptionsScreen

        current = {**{name: getattr(self.session, name) for name in self.session.OPTIONS},
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
                undo = (self.session, self.report) if self.report is not None else None
                self.session = self.session.with_options(**options)
                self.load(undo=undo)
            elif self.report is not None:
                self.tabs["overview"].show_baseline(self.report)

        self.push_screen(OptionsScreen(current), chosen)

    def action_export(self) -> None:
        if self.report is not None:
            self.export(self.report)
        else:  # the export needs the compiled program: say so rather than do nothing
            self.status("e exports once the compile is done" if self._loading else
                        "nothing to export: the compile did not finish (r reloads)", "yellow")

    @work(thread=True, group="export")
    def export(self, report) -> None:
        try:
            written = self.session.export(report)
        except Exception as err:
            self._deliver(self.notify, message_of(err), severity="error")
            return
        self._deliver(self.notify, "wrote " + ", ".join(written))

    def _answer(self, generation: int, ask, show, show_error) -> None:
        """In a worker thread: ``ask()`` (a call into the worker process), then ``show(result)`` or
        ``show_error(message)`` on the UI thread, unless a newer request has been made since."""
        def if_current(fn, *args) -> None:
            # checked on the UI thread: an Esc pressed while this answer was on its way drops it
            if generation == self._generation:
                fn(*args)

        try:
            result = ask()
        except Exception as err:
            self._deliver(if_current, show_error, message_of(err))
            return
        self._deliver(if_current, show, result)

    def _deliver(self, fn, *args, **kwargs) -> None:
        """From a worker thread: ``fn`` on the UI thread, unless the app is shutting down by then
        (its widgets are going away; a result that arrives then is no news)."""
        def deliver():
            if self.is_running:
                fn(*args, **kwargs)

        try:
            self.call_from_thread(deliver)
        except RuntimeError:  # the event loop has already stopped
            pass
