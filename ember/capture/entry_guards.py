"""The guard block of a generated entry function: every guard of a cache entry checked in one
expression, cheap checks first, a miss (not an error) when a check raises.

Shape guards read each tensor's ``size()`` / ``stride()`` once per call (bound just before the
first shape guard) instead of one ``size(i)`` / ``stride(i)`` call per read; and the value a failed
guard names in a recompile reason (``_describe_value``; a tensor's first difference in
torch.compile's words too: ``tensor_mismatch``).
"""
from __future__ import annotations

import re

import torch

from ember.capture import codegen
from ember.capture.guards import GuardKind, GuardSet
from ember.capture.sources import bind
from ember.exc import maybe_inject, where_raised


def _shape_guard_names(scope: dict, params) -> dict[str, str]:
    """Shape guards call ``torch.sym_float``, ``math.floor`` and the like by those names: put them in
    the guard function's scope. A parameter of the same name shadows one (``torch`` is a local of
    ``Optimizer._use_grad``, so of its resume functions): returns ``{name: private name}`` for those,
    which ``OutputGraph.install_shape_guards`` writes in the guards instead."""
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP
    shadowed = {}
    for name, value in SYMPY_INTERP.items():
        if name in params:
            shadowed[name] = bind(scope, value, f"sympy_{name}")
        else:
            scope.setdefault(name, value)
    return shadowed


def _inject_guard_fault() -> bool:
    maybe_inject("guard")
    return True


def _guard_block(guards: GuardSet) -> list[str]:
    """The entry's first statements: read the hoisted sources, check every guard, ``MISS`` if one
    fails (or raises: a source that no longer resolves, e.g. a deleted attribute)."""
    scope = guards.scope
    hoists = scope.get("___hoists", [])
    checks = _read_sizes_once(scope, guards.ordered())
    from ember.config import config
    if config.inject_fault == "guard":
        scope["___inject_guard_fault"] = _inject_guard_fault
        checks.append("___inject_guard_fault()")
    scope["___MISS"] = codegen.MISS
    scope["___guard_error"] = _GuardErrorLog()
    check = " and ".join(checks) or "True"
    return ["try:", *[f"    {hname} = {hcode}" for hname, hcode in hoists],
            f"    if not ({check}):", "        return ___MISS", "except Exception as ___e:",
            "    return ___guard_error(___e)"]


_SIZE_READ = re.compile(r"(?<![\w.\])'])([A-Za-z_]\w*(?:\.\w+|\['[^']*'\])*)\.(size|stride)\((\d+)\)")


def _read_sizes_once(scope: dict, ordered: list) -> list[str]:
    """The guards' checks, with the shape guards' ``x.size(i)`` / ``x.stride(i)`` reads replaced by
    indexing ``x.size()`` / ``x.stride()`` read once per tensor just before the first shape guard
    (one binding call per tensor instead of one per read: flat cost as dimensions and symbols
    grow). The tensors' type checks come earlier in the chain, so the reads run on tensors."""
    names: dict[tuple[str, str], str] = {}

    def local(m: re.Match) -> str:
        key = (m.group(1), m.group(2))
        if key not in names:
            names[key] = f"___{m.group(2)}_{len(names)}"
        return f"{names[key]}[{m.group(3)}]"

    checks, first_shape = [], None
    for g in ordered:
        code = g.code
        if g.kind is GuardKind.SHAPE_ENV:
            first_shape = len(checks) if first_shape is None else first_shape
            code = _SIZE_READ.sub(local, code)
        checks.append(f"({code})")
    if names:
        reads = " and ".join(f"({n} := {e}.{what}()) is not None" for (e, what), n in names.items())
        checks.insert(first_shape, f"({reads})")
    return checks


class _GuardErrorLog:
    """Called by an entry whose guard check raised: a miss, remembered (as text, so that no
    traceback keeps the call's arguments alive) for the report of an entry that misses at once."""

    def __init__(self):
        self.last: str | None = None

    def __call__(self, e: BaseException):
        self.last = f"{type(e).__name__}: {e} (at {where_raised(e)})"
        return codegen.MISS


def _describe_value(value) -> str:
    """A short description of a value for recompile reasons (the 'new value' of a failed guard)."""
    if isinstance(value, torch.Tensor):
        with torch._C.DisableTorchFunctionSubclass():
            return _describe_value_inner(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _describe_value_inner(value) -> str:
    if isinstance(value, torch.Tensor):
        return (f"{type(value).__name__} {value.dtype} {value.device} size={list(value.shape)} "
                f"stride={list(value.stride())} requires_grad={value.requires_grad}")
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _scalar_type_name(dtype) -> str:
    """``Float`` for torch.float32, as torch's guard failures name dtypes (c10's ScalarType)."""
    try:
        return torch.empty((), dtype=dtype).type().replace("torch.", "").replace("Tensor", "")
    except Exception:  # noqa: BLE001 (dtypes without a legacy tensor type: float8, uint16, ...)
        return str(dtype).replace("torch.", "")


def tensor_mismatch(value, expected: tuple, name: str) -> str:
    """What a failed tensor guard saw, and the first difference in torch.compile's words
    (``tensor 'x' size mismatch at index 0. expected 3, actual 4``); ``expected``: (dtype, device,
    requires_grad, number of dimensions, sizes or None, strides or None) as the trace saw them
    (None: symbolic sizes)."""
    text = _describe_value(value)
    if not isinstance(value, torch.Tensor):
        return text
    dtype, device, requires_grad, ndim, sizes, strides = expected
    with torch._C.DisableTorchFunctionSubclass():
        shape, stride = tuple(value.shape), tuple(value.stride())
        why = None
        if value.device != device:
            why = f"device mismatch. expected {device}, actual {value.device}"
        elif value.dtype != dtype:
            why = f"dtype mismatch. expected {_scalar_type_name(dtype)}, actual {_scalar_type_name(value.dtype)}"
        elif value.requires_grad != requires_grad:
            why = f"requires_grad mismatch. expected requires_grad={int(requires_grad)}"
        elif len(shape) != ndim:
            why = f"rank mismatch. expected {ndim}, actual {len(shape)}"
        elif sizes is not None:
            i = next((i for i, (a, b) in enumerate(zip(sizes, shape)) if a != b), None)
            j = next((i for i, (a, b) in enumerate(zip(strides, stride)) if a != b), None)
            if i is not None:
                why = f"size mismatch at index {i}. expected {sizes[i]}, actual {shape[i]}"
            elif j is not None:
                why = f"stride mismatch at index {j}. expected {strides[j]}, actual {stride[j]}"
    return text if why is None else f"{text}; tensor '{name}' {why}"
