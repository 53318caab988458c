"""Meshes and shardings of a sharded target: ``--mesh data=4,model=4`` and ``--shard "P('data',None) P()"``
(or INSPECT's ``"mesh"`` and ``"shardings"``), parsed, never evaluated, and checked against the
topology and the inputs: every mistake is one line and exit 2.

Parsing needs no jax (usage errors answer before it loads); ``device_mesh`` and ``resolve_specs``
import it when a target is placed.
"""
from __future__ import annotations

import ast
import math
from typing import Any

from ..base.errors import TargetFailure, UsageError
from ..base.specs import hlo_type
from ..base.user_code import describe_error

Entry = None | str | tuple  # one dimension of a PartitionSpec: replicated, one axis, or several axes
Spec = tuple  # a PartitionSpec as plain data: a tuple of entries


def parse_mesh(text: str) -> dict[str, int]:
    """``data=4,model=4`` -> {"data": 4, "model": 4}; one axis may be -1 (the devices left over)."""
    axes: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, size = part.partition("=")
        name, size = name.strip(), size.strip()
        if not sep or not name.isidentifier():
            raise UsageError(f"--mesh {text!r}: write axis=size pairs, e.g. --mesh data=4,model=4")
        if name in axes:
            raise UsageError(f"--mesh {text!r}: axis {name!r} is given twice")
        try:
            axes[name] = int(size)
        except ValueError:
            raise UsageError(f"--mesh {text!r}: the size of {name!r} is {size!r}, not a whole number") from None
    return check_mesh(axes, f"--mesh {text!r}")


def check_mesh(axes, where: str) -> dict[str, int]:
    if not isinstance(axes, dict) or not axes:
        raise UsageError(f"{where}: a mesh is axis sizes by name, e.g. {{\"data\": 4, \"model\": 4}}")
    for name, size in axes.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise UsageError(f"{where}: mesh axis {name!r} must be a name such as 'data'")
        if isinstance(size, bool) or not isinstance(size, int) or (size < 1 and size != -1):
            raise UsageError(f"{where}: axis {name!r} has size {size!r}; sizes are whole numbers >= 1 (one may be -1)")
    if sum(s == -1 for s in axes.values()) > 1:
        raise UsageError(f"{where}: only one axis may be -1 (the devices left over)")
    return dict(axes)


def fit_mesh(axes: dict[str, int], devices: int, target: str) -> dict[str, int]:
    """The axis sizes on ``devices`` devices (-1 filled in); a product that differs is one line."""
    known = math.prod(s for s in axes.values() if s != -1)
    if -1 in axes.values():
        if devices % known:
            raise UsageError(f"mesh {format_mesh(axes)}: {devices} devices of {target} do not divide by {known}")
        axes = {k: (devices // known if v == -1 else v) for k, v in axes.items()}
    if math.prod(axes.values()) != devices:
        hint = (f": name a topology with {math.prod(axes.values())} devices, --target CHIP:SHAPE (`inspector chips` lists them)"
                if devices == 1 else f": give --mesh axis sizes whose product is {devices}")
        raise UsageError(f"mesh {format_mesh(axes)} has {math.prod(axes.values())} devices but {target} has {devices}{hint}")
    return axes


def format_mesh(axes: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in axes.items())


def _entry(node: ast.AST, text: str) -> Entry:
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, str)):
        return node.value
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return tuple(e.value for e in node.elts if isinstance(e, ast.Constant))
    raise UsageError(f"--shard {text!r}: a PartitionSpec entry is an axis name in quotes, None, or a tuple of names "
                     f"('data','model'), not {ast.unparse(node)!r}")


def parse_specs(text: str) -> list[Spec]:
    """``P('data',None) P(None,'model') P()`` -> one tuple of entries per positional input.
    Read with ast.parse (a syntax tree, never run): only P(...)/PartitionSpec(...) of names,
    None and tuples of names."""
    try:
        tree = ast.parse(f"[{_commas(text)}]", mode="eval")
    except SyntaxError:
        raise UsageError(f"--shard {text!r}: write one PartitionSpec per input, e.g. \"P('data',None) P()\"") from None
    if not isinstance(tree.body, ast.List):  # a bracket that closed the list early: "P()] + [P()"
        raise UsageError(f"--shard {text!r}: write one PartitionSpec per input, e.g. \"P('data',None) P()\"")
    specs = []
    for node in tree.body.elts:
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("P", "PartitionSpec")
                and not node.keywords):
            raise UsageError(f"--shard {text!r}: {ast.unparse(node)!r} is not P(...): write one PartitionSpec per input, "
                             "e.g. \"P('data',None) P()\"")
        specs.append(tuple(_entry(a, text) for a in node.args))
        check_axes_once(specs[-1], f"--shard {text!r}")
    if not specs:
        raise UsageError("--shard is empty: give one PartitionSpec per input, e.g. \"P('data',None) P()\"")
    return specs


def check_axes_once(spec, where: str) -> None:
    """A mesh axis shards one dimension of an input at most (jax refuses P('data','data') with an
    error that cannot even be sent back from the analysis process)."""
    seen: set[str] = set()
    for entry in spec:
        for axis in () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry):
            if axis in seen:
                raise UsageError(f"{where}: mesh axis {axis!r} is used twice in {format_spec(tuple(spec))}; an axis "
                                 "shards one dimension of an input, e.g. P('data',None) or P('data','model')")
            seen.add(axis)


def _commas(text: str) -> str:
    """Specs are separated by spaces (or commas) at depth 0: make them a list's commas."""
    out: list[str]
    out, depth = [], 0
    for ch in text.strip():
        depth += ch in "(["
        depth -= ch in ")]"
        out.append("," if depth == 0 and ch.isspace() and out and out[-1] not in ", " else ch)
    return "".join(out)


def format_spec(spec) -> str:
    def entry(e):
        if e is None:
            return "None"
        if isinstance(e, tuple):
            return "(" + ",".join(repr(x) for x in e) + ")"
        return repr(e)
    return "P(" + ",".join(entry(e) for e in spec) + ")"


# ----------------------------------------------------------------------------- with jax (when placing inputs)


def device_mesh(devices, axes: dict[str, int]):
    """A jax Mesh of ``devices`` with the given axis sizes, in ICI-friendly order where jax knows
    the chip (jax.make_mesh), with Auto axes so with_sharding_constraint and GSPMD propagation work."""
    import jax
    import numpy as np
    from jax.sharding import AxisType, Mesh

    shape, names = tuple(axes.values()), tuple(axes)
    try:
        return jax.make_mesh(shape, names, devices=devices, axis_types=(AxisType.Auto,) * len(names))
    except Exception:  # a layout make_mesh does not know: the devices in id order
        return Mesh(np.array(devices).reshape(shape), names, axis_types=(AxisType.Auto,) * len(names))


def resolve_specs(shardings, mesh, args: tuple, arg_names: list[str], spec: str) -> list:
    """One PartitionSpec pytree per positional input, checked against the mesh and the inputs."""
    from jax.sharding import PartitionSpec

    if callable(shardings):
        try:
            made = shardings(mesh)
        except Exception as err:
            raise UsageError(describe_error(err, None, f"raised by the INSPECT shardings of {spec}")) from err
        except KeyboardInterrupt:
            raise
        except BaseException as err:
            raise TargetFailure(describe_error(err, None, f"raised by the INSPECT shardings of {spec}")) from err
        # one spec pytree per positional input; a lone PartitionSpec (a tuple itself) or dict is for one input
        made = list(made) if isinstance(made, (tuple, list)) and not isinstance(made, PartitionSpec) else [made]
    elif isinstance(shardings, str):
        made = [PartitionSpec(*s) for s in parse_specs(shardings)]
    else:
        made = [PartitionSpec(*s) if isinstance(s, tuple) else s for s in shardings]
    if len(made) != len(args):
        raise UsageError(f"{spec}: {len(made)} shardings for {len(args)} positional inputs: give one PartitionSpec "
                         "(or pytree of them) per input")
    for name, tree, specs in zip(arg_names, args, made):
        _check_tree(name, tree, specs, mesh)
    return made


def is_spec(x) -> bool:
    from jax.sharding import PartitionSpec
    return x is None or isinstance(x, PartitionSpec)


def spec_leaves(tree, specs) -> list[tuple[str, Any, Any]]:
    """(path, array, spec) for every array leaf, the spec tree a prefix of the input tree."""
    import jax

    found = []

    def visit(spec, sub):
        for path, leaf in jax.tree_util.tree_flatten_with_path(sub)[0]:
            found.append((jax.tree_util.keystr(path), leaf, spec))

    try:
        jax.tree.map(visit, specs, tree, is_leaf=is_spec)
    except (ValueError, TypeError) as err:
        raise UsageError(f"the shardings do not match the inputs' structure: {err}") from err
    return found


def _check_tree(name: str, tree, specs, mesh) -> None:
    for path, leaf, spec in spec_leaves(tree, specs):
        if not hasattr(leaf, "shape") or spec is None:
            continue
        where = f"{name}{path} ({hlo_type(str(leaf.dtype), tuple(leaf.shape))})"
        check_axes_once(tuple(spec), f"the sharding of {where}")
        if len(spec) > len(leaf.shape):
            raise UsageError(f"{format_spec(tuple(spec))} has {len(spec)} entries but {where} has rank {len(leaf.shape)}")
        for dim, entry in enumerate(spec):
            axes = () if entry is None else (entry,) if isinstance(entry, str) else tuple(entry)
            for axis in axes:
                if axis not in mesh.shape:
                    raise UsageError(f"unknown mesh axis {axis!r} in {format_spec(tuple(spec))} for {where}: "
                                     f"the mesh has {', '.join(mesh.axis_names)}")
            size = math.prod(mesh.shape[a] for a in axes)
            if axes and leaf.shape[dim] % size:
                raise UsageError(f"dimension {dim} of {where} is {leaf.shape[dim]}, not divisible by "
                                 f"{'x'.join(axes)} = {size} in {format_spec(tuple(spec))}")
