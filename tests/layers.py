"""The layers of the inspector, bottom to top: the one statement of which code may import which.

A module imports only modules of its own layer and of the layers below it (imports inside
functions count; imports under ``TYPE_CHECKING`` do not, they are for the type checker only).
``tests/test_layering.py`` checks every import of the package against this table, and
``tests/gen_docs.py`` writes the README's Architecture table and docs/architecture.md's from it.
Whatever must cross the order upward is a ``Seam`` below, with the reason; there is none today.

A layer is a list of paths on disk: a folder (``inspector/base/``), a module (``inspector/cli.py``)
or the modules at the package's root (``inspector/*.py``); a module belongs to the most specific
path that holds it (a module's own path, then ``inspector/*.py``, then its folder). Within a layer
the paths are peers that may import each other, but never in a circle.

The analyses are layers of their own, in this order: ``hlo`` (text in, data out) sits under the jax
boundary and the compile path, which read the compiler's texts with it; ``pallas`` imports neither
``mosaic`` nor ``libtpu``; ``mosaic`` may import ``pallas`` (a VMEM refusal is explained with the
Pallas estimate beside it); ``libtpu`` may import both (it needs neither today).
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Layer:
    name: str
    paths: tuple[str, ...]  # on disk, from the repository's root
    what: str  # one line: what lives there (the README's table)


@dataclasses.dataclass(frozen=True)
class Seam:
    """An import that crosses the order upward and must stay: named, with why."""

    importer: str  # the module that imports, dotted as installed (inspector.views.doctor)
    imported: str  # the module it imports
    why: str


LAYERS: tuple[Layer, ...] = (
    Layer("base", ("inspector/base/",),
          "the bottom: errors and exit codes, units, the chip table with its sources, findings, the records the jax "
          "boundary writes and the capture stores (Pallas calls, a failed kernel explained), child processes, the "
          "core's one door to the views, settings made before jax starts"),
    Layer("hlo", ("inspector/hlo/",),
          "the compiler's texts read: the HLO parser, MLIR sources and locations, each kernel's HBM traffic, flops and "
          "roofline, the kernel graph, memory, collectives, XLA's passes; text in, data out, so the layers that make "
          "the texts read them with it"),
    Layer("jax_internals", ("inspector/jax_internals/", "inspector/families/gpu/jax/"),
          "the only code that reads private jax API (Pallas calls, kernel bodies, the Mosaic lowering, interpret "
          "mode); it returns base's records"),
    Layer("compilation", ("inspector/compilation/", "inspector/families/gpu/compile/"),
          "the compile path: the target and its INSPECT entry, backends and the compile paths a family hands them "
          "(libtpu's deviceless topologies, XLA:GPU's deviceless cuda topology, jax's local backend), the capture "
          "(stages), the compile cache, pass dumps; it keeps what a failed kernel left, the analyses explain it"),
    Layer("pallas", ("inspector/pallas/",),
          "an analysis: every pallas_call's grid walk, tiling rules, the VMEM rules and their estimate"),
    Layer("mosaic", ("inspector/mosaic/", "inspector/families/gpu/kernels/"),
          "an analysis: Mosaic's errors explained (the kernel, the line, the rule, the fix; with the Pallas VMEM "
          "estimate beside a VMEM refusal) and its passes (a compile with Mosaic's dump flags, in a child process, beside "
          "the reader of those dumps)"),
    Layer("libtpu", ("inspector/libtpu/",),
          "an analysis: libtpu's simulated time and VLIW bundles per kernel, from the compiles it drives with libtpu's "
          "dump flags (in child processes of its own: `runner`, `child`) beside the reader of those dumps"),
    Layer("measure", ("inspector/measure/",), "time on the attached TPU, read from jax's profiler"),
    Layer("families", ("inspector/families/",),
          "the backend seam: `family_of(chip)` and one `Family` per accelerator family (`tpu/`, the spec-only GPU "
          "rows, `local/`), each a call into the layers below; the layers above ask it what a chip's family can do "
          "(`info.can`) and how (its compile path, memory budget, compiler's verdict, time, fixes), never the "
          "chip's kind. A new family is a folder here and its chip rows"),
    Layer("run", ("inspector/run/",),
          "the diff: kernel and reference run on the same inputs, outputs compared onto the kernel's blocks, timing"),
    Layer("results", ("inspector/results/",),
          "the Report every verb and view reads (`report`: each analysis's data, made whole) and the table of "
          "views (`view_table`: each view's renderer and the analyses it needs)"),
    Layer("verbs", ("inspector/verbs/",),
          "the verbs' logic: check's findings per chip (`checking`), compare's rows (`comparison`), fix's trials "
          "(`fixing`) and its patches (`patching`), what each verb accepts (`rules`)"),
    Layer("front doors", ("inspector/*.py",),
          "the request every front door builds (`request`), the TUI's `Session` and its child process (`remote`)"),
    Layer("baseline", ("inspector/baseline/",),
          "the performance gate: each target's figures per chip saved (a Report's path per target and chip, in a "
          "child process each) and compared with a saved baseline (`check --baseline`'s gate)"),
    Layer("python api", ("inspector/api.py",),
          "the Python API (`inspect`, `check`, `diff`, `compare`): above the gate it fronts (`check(baseline=)`), "
          "below `inspector.tune`, which builds its targets with it"),
    Layer("tuning", ("inspector/tuning/",),
          "the tune sweep and `inspector.tune`: a Report's path per candidate, in worker processes or on Ray"),
    Layer("views", ("views/",), "rich printers and the Textual app, one module per tab (installed as `inspector.views`)"),
    Layer("top", ("inspector/commands/", "inspector/cli.py", "inspector/__main__.py", "inspector/__init__.py"),
          "the `inspector` command (the table of verbs, their options, help and work, streams and signals) and "
          "`import inspector`'s public names (`inspect`, `check`, `diff`, `compare`, `tune`)"),
    Layer("kernels", ("kernels/",),
          "the Pallas kernel library, each kernel beside its jnp reference (installed as `inspector.kernels`); "
          "nothing in the package imports it"),
)

SEAMS: tuple[Seam, ...] = ()
