"""`inspector fix`'s numerics: a variant and the unfixed kernel run in TPU interpret mode on the
same random inputs and compared at the diff's tolerances (INSPECT's atol/rtol, else the dtype's).
The unfixed kernel runs once, and only when a variant needs it; a verdict is kept by content
(``fix_store``: both programs as lowered, the seed, the tolerances), so asking again runs nothing.
A change the interpreter never sees (compiler_params) is not run: its program is the unfixed one."""
from __future__ import annotations

import functools

from ..base.chips import Chip
from ..compilation import fix_store
from ..compilation.target import Target


class Numerics:
    """The unfixed kernel's outputs in TPU interpret mode, computed once; each variant's compared
    with them at the diff's tolerances (INSPECT's atol/rtol, else the dtype's)."""

    def __init__(self, target: Target, sim: Chip, said: str = "", keyed_on: Chip | None = None, seed: int = 0,
                 use_cache: bool | str = True):
        self.target, self.sim, self.seed, self.use_cache = target, sim, seed, use_cache
        self.said = said or f"{sim.name}, interpret mode"  # how a verdict names the run
        # the chip whose lowering keys a kept verdict (a GPU's: its kernels never lower for the TPU simulated)
        self.keyed_on = keyed_on
        self._inputs: tuple | None = None  # made when a variant first runs (a cached verdict needs none)
        self._unfixed: tuple | None = None

    def _run(self, target: Target):
        import jax

        from .interpreted import run

        from ..compilation.target_inputs import make_inputs

        if self._inputs is None:
            self._inputs = make_inputs(self.target, self.seed)
        kernel = jax.jit(functools.partial(target.fn, **target.params))
        args, kwargs = self._inputs
        outcome = run(kernel, args, kwargs, self.sim, cores=1, check=False)
        return outcome.output, outcome.error

    def verdict(self, target: Target) -> tuple[str, str]:
        """(match | differ | failed | not checked, what it rests on): from the cache when the same
        two programs were compared at the same inputs and tolerances (``fix_store``)."""
        k = self._key(target) if self.use_cache else None
        if self.use_cache is True and k is not None and (hit := fix_store.load(k)) is not None:
            if hit.get("verdict") in ("match", "differ", "failed") and isinstance(hit.get("detail"), str):
                return hit["verdict"], hit["detail"]
        verdict, detail = self._verdict(target)
        if k is not None and verdict != "not checked":
            fix_store.store(k, {"verdict": verdict, "detail": detail})
        return verdict, detail

    def _key(self, target: Target) -> str | None:
        """The two programs as lowered for the chip simulated, the seed and the tolerances."""
        from ..compilation.backends import Backend
        from ..compilation.stages import lowered_program
        from ..families import backend_for

        backend = backend_for(self.keyed_on) if self.keyed_on is not None else Backend(self.sim)
        _, lowered, text = lowered_program(target, backend)
        _, unfixed, unfixed_text = lowered_program(self.target, backend)
        if lowered is None or unfixed is None:
            return None
        options = {k: v for k, v in self.target.options.items() if k in ("atol", "rtol", "int_ranges")}
        return fix_store.key("numerics", unfixed_text, self.seed, options, module_text=text,
                             chip=self.sim.name if self.keyed_on is None else f"{self.sim.name} for {self.keyed_on.name}")

    def _verdict(self, target: Target) -> tuple[str, str]:
        from .trees import compare_trees

        if self._unfixed is None:
            self._unfixed = self._run(self.target)
        ref, ref_err = self._unfixed
        if ref_err is not None:
            return "not checked", f"the unfixed kernel does not run in interpret mode: {_line(ref_err)}"
        out, err = self._run(target)
        if err is not None:
            return "failed", f"raised in interpret mode: {_line(err)}"
        options = self.target.options
        leaves, findings = compare_trees(out, ref, [], options.get("atol"), options.get("rtol"))
        bad = [leaf for leaf in leaves if not leaf.ok]
        if bad or any(f.severity == "error" for f in findings):
            worst = bad[0] if bad else None
            return "differ", (f"{worst.output}: {worst.bad} elements off (max abs error {worst.max_abs:.3g}, atol "
                              f"{worst.atol:.3g}, rtol {worst.rtol:.3g})" if worst else findings[0].message)
        worst_abs = max((leaf.max_abs for leaf in leaves), default=0.0)
        return "match", f"max abs error {worst_abs:.3g} against the unfixed kernel ({self.said})"


# CompilerParams the interpreter ignores (it runs one core, with no VMEM limit): such a variant
# computes what the unfixed kernel computes, so it is not run again
UNSEEN_BY_INTERPRETER = {
    "vmem_limit": "vmem_limit_bytes does not change what the kernel computes",
    "semantics": "dimension_semantics does not change what each grid step computes (the grid walk found no output "
                 "block written from two indices of the axis)",
    "triton": "num_stages and num_warps change how Triton schedules the kernel, not what it computes",
}


def judge(kind: str, variant: Target, compiles: bool, checker: Numerics | None) -> tuple[str, str] | None:
    """The numerics verdict of a variant (a change of ``kind``) and what it rests on: None where it
    is not checked (--no-numerics, or it compiles on no chip)."""
    if kind in UNSEEN_BY_INTERPRETER:
        return "unchanged", UNSEEN_BY_INTERPRETER[kind] + ": the interpreter would run the unfixed program (not run again)"
    if checker is not None and compiles:
        return checker.verdict(variant)
    return None


def _line(err: BaseException) -> str:
    text = (str(err) or type(err).__name__).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


