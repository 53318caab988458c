"""What the terminal UI asks of the core, in one object: the report for the current chip and
parameters, a diff, an export. The app calls these from worker threads and only renders what
comes back; it never touches jax itself. The Report's modules (numpy, the analyses) are imported
by the methods that make one: the UI process imports this module before it paints."""
from __future__ import annotations

import dataclasses
import functools
import os
import sys
from pathlib import Path

from .base.atomic import write_atomic
from .compilation.backends import Backend
from .base.chips import get_chip
from .hlo.graph import dot_available
from .families.measuring import measure_on_chip
from .mosaic.kept import kept_mosaic_diff
from .compilation.user_files import split_spec
from .request import Cache, Request, report_for
from .results.view_table import Needs
from .families import family_of


def _read(name: str, needs: bool = False) -> property:
    """A field of the Session's Request (or of its needs), read through: the Session holds the
    Request and copies none of its fields."""
    if needs:
        return property(lambda self: getattr(self.template.needs, name), doc=f"the Request's needs.{name}")
    return property(lambda self: getattr(self.template, name), doc=f"the Request's {name}")


_TOGGLES = ("passes", "buffers", "mosaic_passes", "time")  # what a key adds to the report: the request's needs


@dataclasses.dataclass(frozen=True, init=False)
class Session:
    """What the terminal UI inspects: a Request (the target as the command line gives it, the chip,
    the options, and in its needs what the keys turned on), then what the UI alone changes; a
    change is a new Session (``with_chip``, ``with_time``, ...)."""

    template: Request  # what every report of the session starts from; each report adds the tabs' needs
    # fixes applied in the UI (A): base.fix_model.Change records made at trace time, the file untouched
    changes: tuple = ()
    backward: bool = False  # the function's backward pass (G): its vjp, so a custom_vjp's backward kernels show

    # the options the UI's options screen (o) sets, as the command line's --args, --ref, --mesh, --shard,
    # --roofline, --time-budget, --time-memory, --pass and --no-cache do
    OPTIONS = ("args", "ref", "mesh", "shard", "roofline", "time_budget", "time_memory", "pass_select", "use_cache")

    def __init__(self, spec: str | None = None, chip: str = "cpu", *, request: Request | None = None,
                 template: Request | None = None, changes: tuple = (), backward: bool = False, **fields) -> None:
        """``Session(request=...)``, the door's Request; or ``Session(spec, chip, **fields)``: the
        Request's fields by name (``use_cache`` for its cache, ``passes``, ``buffers``, ``mosaic_passes``
        and ``time`` for its needs)."""
        request = request or template
        if request is None:
            request = _request(Request(spec or "", chip), fields)
        elif spec is not None or fields:
            raise TypeError("Session(request=...) takes no other field of the request")
        object.__setattr__(self, "template", request)
        object.__setattr__(self, "changes", tuple(changes))
        object.__setattr__(self, "backward", backward)

    spec, chip, args, ref, mesh, shard = (_read(n) for n in ("spec", "chip", "args", "ref", "mesh", "shard"))
    chip_reason, roofline, pass_select = (_read(n) for n in ("chip_reason", "roofline", "pass_select"))
    time_budget, time_memory, measure, fixes = (_read(n) for n in ("time_budget", "time_memory", "measure", "fixes"))
    passes, buffers, mosaic_passes, time = (_read(n, needs=True) for n in _TOGGLES)

    @property
    def sets(self) -> list[str]:
        return list(self.template.sets)

    @property
    def use_cache(self) -> bool:
        return bool(self.template.cache)

    def _with(self, **fields) -> "Session":
        return dataclasses.replace(self, template=_request(self.template, fields))

    def request(self, needs: Needs) -> Request:
        """The Request this session makes for ``needs``: the one the command line and the Python
        API build for the same options."""
        return dataclasses.replace(self.template, needs=needs, memo=True, debug=False)

    def tune_budget(self):
        """libtpu's budget per candidate of the tune screen's sweep: the session's, as for --time."""
        return self.template.budget("the time budget")

    def target(self, fresh: bool = False):
        if fresh:  # --watch: import the file again so edits are seen
            where = split_spec(self.spec)[0]
            for name, module in list(sys.modules.items()):
                if (path := getattr(module, "__file__", None)) and os.path.abspath(path) == os.path.abspath(where):
                    del sys.modules[name]
            from .compilation.stages import forget_captures
            forget_captures()
        target = self.template.target()
        if self.changes:
            from .jax_internals.variants import changed_function

            target = dataclasses.replace(target, fn=changed_function(target.fn, tuple(target.params), list(self.changes)))
        if self.backward:  # the reference's backward too: d compares the gradients
            target = dataclasses.replace(target, name=f"{target.name} (backward)", fn=backward_of(target.fn),
                                         reference=backward_of(target.reference) if target.reference else None)
        return target

    def fix(self):
        """`inspector fix` on this chip: each change compiled, timed and checked (FixResult); a
        param the session sets is said as a change of it, as for --set."""
        from .verbs.fixing import fixes_on

        return fixes_on(self.target(), get_chip(self.chip), sets=self.template.sets, use_cache=self.template.cache.value,
                        pick="t picks one")

    def with_change(self, change) -> "Session":
        """The session with a fix applied: a block size as a param, anything else at trace time."""
        if change.kind == "params":
            return self.with_params({k: str(v) for k, v in change.value.items()})
        same = (change.kind, change.kernel, change.call, change.operand)  # a change of the same thing is replaced
        return dataclasses.replace(self, changes=(*[c for c in self.changes if (c.kind, c.kernel, c.call, c.operand) != same],
                                                  change))

    def lowering(self, fresh: bool = False):
        """The report as far as lowering goes (jaxpr, StableHLO, Mosaic; no compile, no kernel
        analyses), so the UI shows them while the compiler works. This process keeps the trace
        and lowering: the ``report`` that follows compiles from them instead of tracing again."""
        return report_for(dataclasses.replace(self.request(Needs(jaxpr_text=True)), measure=False, cache=Cache.ON,
                                              pass_select=None),
                          self.target(fresh))

    def report(self, fresh: bool = False):
        # measured through this module's name for it: a test fakes the chip there
        return report_for(self.request(self.needs()), self.target(fresh), measure_on_chip=measure_on_chip)

    def needs(self) -> Needs:
        """What the UI's report computes: what every tab needs (the table of views says), and what
        the session's keys turned on."""
        from .results.view_table import everyday_needs

        return everyday_needs() | self.template.needs | Needs(passes=self.pass_select is not None)

    def pass_diff(self, select: str):
        """The unified diff of one step of the pass pipeline (``--pass select``), from a compile
        with pass dumps this worker keeps for the module (the next step's diff is read, not compiled)."""
        from .compilation.pass_dumps import kept_diff

        return kept_diff(self.target(), Backend(get_chip(self.chip)), select)

    def mosaic_pass_diff(self, kernel: str, select: str, index: int = 0):
        """The diff of one Mosaic pass of a kernel (``--view mosaic --pass select``), from a compile
        with Mosaic's dumps this worker keeps for the module (the next pass's diff is read)."""
        return kept_mosaic_diff(self.target(), get_chip(self.chip), kernel, select, index)

    def diff(self):
        from .run import run_diff

        chip = get_chip(self.chip)  # a TPU target is the chip interpret mode simulates; a GPU's kernels run interpreted
        return run_diff(self.target(), runs=1, chip=chip if family_of(chip).info.can.kernels else None)

    def with_backward(self, backward: bool = True) -> "Session":
        return dataclasses.replace(self, backward=backward)

    def with_passes(self, passes: bool = True) -> "Session":
        return self._with(passes=passes)

    def with_time(self, time: bool = True) -> "Session":
        return self._with(time=time)

    def with_measure(self, measure: bool = True) -> "Session":
        return self._with(measure=measure)

    def with_mosaic_passes(self, mosaic_passes: bool = True) -> "Session":
        return self._with(mosaic_passes=mosaic_passes)

    def with_buffers(self, buffers: bool = True) -> "Session":
        return self._with(buffers=buffers)

    def with_options(self, **options) -> "Session":
        """Another value of some of ``OPTIONS`` (the options screen's)."""
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise TypeError(f"not an option of the session: {', '.join(sorted(unknown))}")
        return self._with(**options)

    def with_chip(self, chip: str) -> "Session":
        return self._with(chip=chip, chip_reason=None)  # the user's choice: no default to explain

    def with_params(self, params: dict[str, str]) -> "Session":
        sets = [s for s in self.sets if s.split("=", 1)[0] not in params] + [f"{k}={v}" for k, v in params.items()]
        return self._with(sets=sets)

    def keyword_params(self) -> tuple[dict, bool] | None:
        """The function's parameters that have defaults ({name: default}, the default when it is
        a literal, else None) and whether it takes **kwargs, read from the source with ast (no
        import: the UI process never loads jax); None when the file does not define it."""
        import ast

        path, function = self.source_file(), split_spec(self.spec)[1]
        if path is None:
            return None
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except (OSError, SyntaxError, ValueError):
            return None
        node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function), None)
        if node is None:
            return None

        def literal(expr):
            try:
                return ast.literal_eval(expr)
            except (ValueError, SyntaxError, TypeError):
                return None

        a = node.args
        positional = a.posonlyargs + a.args
        found = {p.arg: literal(d) for p, d in zip(positional[len(positional) - len(a.defaults):], a.defaults)}
        found.update({p.arg: literal(d) for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None})
        return found, a.kwarg is not None

    def source_file(self) -> Path | None:
        where = split_spec(self.spec)[0]
        return Path(where) if where.endswith(".py") else None

    def export(self, report, directory: str = ".") -> list[str]:
        """SVG (when Graphviz is there) and JSON of the current report, next to the user."""
        stem = Path(directory) / f"inspector-{report.target.function}-{report.chip.name}"
        written = [str(write_atomic(f"{stem}.json", report.to_json()))]
        if report.fusions is not None and dot_available():
            written.append(str(report.export_svg(f"{stem}.svg")))
        return written


def _request(request: Request, fields: dict) -> Request:
    """``request`` with ``fields`` changed: the Request's own, ``use_cache`` (its cache on or off)
    and the toggles of its needs."""
    fields = dict(fields)
    toggles = {name: bool(fields.pop(name)) for name in _TOGGLES if name in fields}
    if "use_cache" in fields:
        fields["cache"] = Cache.ON if fields.pop("use_cache") else Cache.OFF
    if "sets" in fields:
        fields["sets"] = tuple(fields["sets"])
    return dataclasses.replace(request, needs=dataclasses.replace(request.needs, **toggles), **fields)


@functools.cache  # one function per function: the trace this worker keeps is found again (its key is the function)
def backward_of(fn):
    """The backward pass of ``fn``: the gradients of its positional inputs for a cotangent of ones
    (jax.vjp); what a ``jax.custom_vjp`` kernel runs for training, its backward kernels included."""
    def backward(*args, **kwargs):
        import jax
        import jax.numpy as jnp

        out, pull = jax.vjp(lambda *inputs: fn(*inputs, **kwargs), *args)
        return pull(jax.tree.map(jnp.ones_like, out))

    backward.__name__ = backward.__qualname__ = f"{getattr(fn, '__name__', 'function')}_backward"
    return backward
