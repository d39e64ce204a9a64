"""Guards: the assumptions a captured graph bakes in, checked on every call.

Each guard is a Python boolean expression over the frame's arguments (via a
`Source`). All guards of a cache entry are compiled into one function with the
same signature as the user's function (see `ember.capture.codegen`), cheap
checks first: identity and type checks, then constant values, then tensor
metadata. When the combined check fails, `failing_guards` re-evaluates them one
by one to say which failed (for the recompile reason).
"""
from __future__ import annotations

import dataclasses
import enum
import math
import types
from typing import Any

import torch

from ember.capture.provenance import ENTRY
from ember.capture.sources import Source, bind


def on_mro(cls: type, name: str) -> bool:
    """Whether ``name`` is defined by ``cls`` or a base (what an instance attribute lookup finds
    on the class)."""
    return any(name in k.__dict__ for k in cls.__mro__)


class GuardKind(enum.IntEnum):
    # The order is the evaluation order: cheap, structural checks first.
    GLOBAL_STATE = 0
    ID_MATCH = 1
    TYPE_MATCH = 2
    LENGTH = 3
    DICT_KEYS = 4
    EQUALS_MATCH = 5
    DUPLICATE_INPUT = 6
    TENSOR_MATCH = 7
    SHAPE_ENV = 8


@dataclasses.dataclass(frozen=True)
class Guard:
    kind: GuardKind
    source: Source | None
    # Builds the boolean expression for generated code, given the scope.
    text: str           # readable form, e.g. "L['x'].shape == (2, 3)"
    code: str           # expression in generated-code form
    order: int          # discovery order, a tiebreak within a kind
    now: str | None = None  # expression describing the values it checks (for recompile reasons)
    #: the user's line and the operation that made the trace depend on it (capture/provenance.py)
    provenance: Any = None

    def __str__(self) -> str:
        return f"{self.kind.name}: {self.text}"

    def with_provenance(self) -> str:
        """``TYPE: text  ← file:line in fn (operation): source line`` (the guard and why it exists)."""
        return str(self) + (f"  ← {self.provenance}" if self.provenance is not None else "")


def dispatches_torch_function(cls: type) -> bool:
    """Whether reading metadata of a ``cls`` tensor calls a user ``__torch_function__``."""
    if cls is torch.Tensor or cls is torch.nn.Parameter:
        return False
    return getattr(cls, "__torch_function__", None) is not torch._C._disabled_torch_function_impl


def tensor_meta(t: torch.Tensor) -> tuple:
    """The metadata tensor guards compare, read without dispatching to a subclass's
    ``__torch_function__`` (ember's own checks must not show up as calls to it)."""
    with torch._C.DisableTorchFunctionSubclass():
        return (t.dtype, t.device, tuple(t.shape), t.stride(), t.requires_grad, t.layout, t.is_inference(),
                t.is_conj(), t.is_neg())


_SIMPLE_CONSTANT_TYPES = (int, float, bool, str, bytes, type(None), complex)


def sizes_now(pairs) -> str:
    """``L['x'].size()=[5, 3], L['n']=7``: the values a failing shape guard read."""
    return ", ".join(f"{name}.size()={list(v.shape)}" if isinstance(v, torch.Tensor) else f"{name}={v!r}"
                     for name, v in pairs)


# The attributes torch's mark_dynamic, maybe_mark_dynamic, mark_unbacked (and its strict form) and
# mark_static set on a tensor (ember's own marking functions set the same ones), and their names.
_MARK_ATTRS = ("_dynamo_dynamic_indices", "_dynamo_weak_dynamic_indices", "_dynamo_unbacked_indices",
               "_dynamo_strict_unbacked_indices", "_dynamo_static_indices")
_MARK_FUNCTIONS = ("mark_dynamic", "maybe_mark_dynamic", "mark_unbacked", "mark_unbacked(strict)", "mark_static")


def dim_marks(t: torch.Tensor) -> tuple:
    """Per kind of mark (``_MARK_ATTRS``), the dimensions ``t`` has marked, or None for none."""
    out = []
    for attr in _MARK_ATTRS:
        m = getattr(t, attr, None)
        out.append(frozenset(m) if m else None)
    return tuple(out)


def dim_marks_fit(t: torch.Tensor, symbolic: frozenset, compiled: tuple) -> bool:
    """The guard of GuardSet.marked_dims (runs on every call: no allocation on the common path)."""
    dyn = getattr(t, "_dynamo_dynamic_indices", None)
    if dyn and not dyn <= symbolic:
        return False
    for attr, had in zip(_MARK_ATTRS, compiled):
        now = getattr(t, attr, None)
        if now and (had is None or not now <= had):
            return False
    return True


def dim_marks_text(t: torch.Tensor) -> str:
    marks = [f"{fn} {sorted(m)}" for fn, m in zip(_MARK_FUNCTIONS, dim_marks(t)) if m is not None]
    return "marks " + ", ".join(marks) if marks else "no marks"


class GuardSet:
    """Guards collected while tracing one frame, deduplicated."""

    def __init__(self) -> None:
        self.scope: dict[str, Any] = {"___type": type, "___len": len, "___list": list,
                                      "___getattr": getattr}
        self._guards: dict[tuple, Guard] = {}
        self._global_getters: dict[str, tuple] = {}
        #: () -> Provenance of the instruction being traced (set for the trace: capture/provenance.py)
        self.locate = None

    def set_locator(self, locate) -> None:
        """Record provenance from now on; guards installed before (the global state the frame is
        entered with) get the locator's answer now (the frame's entry)."""
        self.locate = locate
        for k, g in list(self._guards.items()):
            if g.provenance is None:
                self._guards[k] = dataclasses.replace(g, provenance=self._where(g.source))

    # -- adding guards -------------------------------------------------------
    def _where(self, source: Source | None):
        prov = self.locate() if self.locate is not None else None
        if prov is not None and prov.operation == ENTRY and source is not None:
            prov = prov.with_operation(f"{ENTRY}: reading {source.name()}")
        return prov

    def _add(self, kind: GuardKind, source: Source | None, key: Any, text: str, code: str,
             provenance=None, now: str | None = None) -> None:
        k = (kind, source, key)
        if k not in self._guards:
            self._guards[k] = Guard(kind, source, text, code, len(self._guards), now=now,
                                    provenance=provenance if provenance is not None else self._where(source))

    def id_match(self, source: Source, obj: Any) -> None:
        e = source.expr(self.scope)
        name = bind(self.scope, obj, "obj")
        self._add(GuardKind.ID_MATCH, source, None,
                  f"{source.name()} is <{type(obj).__name__} at {id(obj):#x}>", f"{e} is {name}")

    def id_equals(self, source: Source, obj: Any) -> None:
        """``id(source) == id(obj)`` without holding ``obj``: if it dies and another object takes
        its address, that object's id() is the same number the trace used, so the graph is right."""
        e = source.expr(self.scope)
        self.scope.setdefault("___id", id)
        self._add(GuardKind.ID_MATCH, source, ("id",),
                  f"id({source.name()}) == {id(obj):#x}", f"___id({e}) == {id(obj)}")

    def retype(self, source: Source, obj: Any) -> None:
        """Replace the type guard on ``source``: its object changed class while tracing (a lazy
        module initialised by the trace)."""
        self._guards.pop((GuardKind.TYPE_MATCH, source, None), None)
        self.type_match(source, obj)

    def type_match(self, source: Source, obj: Any) -> None:
        t = type(obj)
        e = source.expr(self.scope)
        name = bind(self.scope, t, "type")
        self._add(GuardKind.TYPE_MATCH, source, None, f"type({source.name()}) is {t.__qualname__}",
                  f"___type({e}) is {name}")

    def constant_match(self, source: Source, value: Any) -> None:
        """Type and value of a Python constant (int, float, str, None, ...)."""
        e = source.expr(self.scope)
        if value is None or isinstance(value, bool):
            self._add(GuardKind.EQUALS_MATCH, source, None, f"{source.name()} is {value!r}",
                      f"{e} is {value!r}")
            return
        if isinstance(value, torch.device):
            self.equals(source, value)
            return
        if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)) or type(value) is type:
            self.id_match(source, value)
            return
        tname = bind(self.scope, type(value), "type")
        self._guards.pop((GuardKind.TYPE_MATCH, source, None), None)  # checked here as well
        if isinstance(value, float) and value != value:  # NaN never equals itself
            code = f"___type({e}) is {tname} and {e} != {e}"
        elif isinstance(value, float) and value == 0.0:  # -0.0 == 0.0, but copysign/1/x tell them apart
            sign = bind(self.scope, math.copysign, "copysign")
            code = f"___type({e}) is {tname} and {e} == 0.0 and {sign}(1.0, {e}) == {math.copysign(1.0, value)}"
        else:
            code = f"___type({e}) is {tname} and {e} == {bind(self.scope, value, 'value')}"
        self._add(GuardKind.EQUALS_MATCH, source, None, f"{source.name()} == {value!r}", code)

    def equals(self, source: Source, value: Any) -> None:
        """``source == value`` (no type check: for devices, slices, ranges, sets)."""
        e = source.expr(self.scope)
        self._add(GuardKind.EQUALS_MATCH, source, None, f"{source.name()} == {value!r}",
                  f"{e} == {bind(self.scope, value, 'value')}")

    def lru_cached(self, source: Source, wrapper: Any, key: Any, value: Any) -> None:
        """The ``lru_cache`` wrapper at ``source`` still holds ``value`` for ``key`` (read without
        calling it: see variables/lru_cached.py)."""
        from ember.capture.variables.lru_cached import holds
        e = source.expr(self.scope)
        self._add(GuardKind.EQUALS_MATCH, source, ("lru", key),
                  f"{source.name()} caches {value!r} for {key!r}",
                  f"{bind(self.scope, holds, 'lru_holds')}({e}, {bind(self.scope, key, 'key')}, "
                  f"{bind(self.scope, value, 'value')})")

    def length(self, source: Source, n: int) -> None:
        e = source.expr(self.scope)
        self._add(GuardKind.LENGTH, source, None, f"len({source.name()}) == {n}", f"___len({e}) == {n}")

    def min_length(self, source: Source, n: int) -> None:
        e = source.expr(self.scope)
        self._add(GuardKind.LENGTH, source, ("min", n), f"len({source.name()}) >= {n}", f"___len({e}) >= {n}")

    def dict_contains(self, source: Source, key, present: bool) -> None:
        """``key`` (a str or int) is, or is not, a key of the dict at ``source``."""
        e = source.expr(self.scope)
        op = "in" if present else "not in"
        self._add(GuardKind.DICT_KEYS, source, ("contains", key), f"{key!r} {op} {source.name()}",
                  f"{key!r} {op} {e}")

    def dict_keys(self, source: Source, keys: list, ordered: bool) -> None:
        """Key set of a dict; key order too when the program observes it. Numeric keys by type too
        (``{1: a}``, ``{True: a}`` and ``{1.0: a}`` have equal key sets)."""
        e = source.expr(self.scope)
        if any(isinstance(k, torch.Tensor) for k in keys):
            # tensor keys hash and compare by identity (a tensor's `==` is data): their ids, in
            # order, with the keys themselves held here so that no other object reuses an id
            bind(self.scope, list(keys), "held_keys")
            ids = bind(self.scope, [id(k) for k in keys], "key_ids")
            self.scope.setdefault("___id", id)
            self._add(GuardKind.DICT_KEYS, source, "ordered",
                      f"[id(k) for k in {source.name()}] == the ids of its {len(keys)} keys (tensors: by identity)",
                      f"[___id(k) for k in {e}] == {ids}")
            return
        if any(isinstance(k, (int, float, complex)) for k in keys):
            typed = [(k, type(k)) for k in keys]
            name = bind(self.scope, typed if ordered else frozenset(typed), "typed_keys")
            wrap = "___list" if ordered else bind(self.scope, frozenset, "frozenset")
            self.scope.setdefault("___list", list)
            self._add(GuardKind.DICT_KEYS, source, "ordered" if ordered else "set",
                      f"{'list' if ordered else 'set'}({source.name()}.keys()) == {keys!r} (key types too)",
                      f"{wrap}((k, ___type(k)) for k in {e}) == {name}")
            return
        if ordered:
            name = bind(self.scope, list(keys), "keys")
            self._add(GuardKind.DICT_KEYS, source, "ordered", f"list({source.name()}.keys()) == {keys!r}",
                      f"___list({e}.keys()) == {name}")
        else:
            name = bind(self.scope, frozenset(keys), "keys")
            self._add(GuardKind.DICT_KEYS, source, "set", f"set({source.name()}.keys()) == {set(keys)!r}",
                      f"{e}.keys() == {name}")

    def same_object(self, a: Source, b: Source) -> None:
        ea, eb = a.expr(self.scope), b.expr(self.scope)
        self._add(GuardKind.DUPLICATE_INPUT, a, b, f"{a.name()} is {b.name()}", f"{ea} is {eb}")

    def all_distinct(self, sources: list) -> None:
        """No two of ``sources`` are the same object (one guard, linear in their number)."""
        items = ", ".join(src.expr(self.scope) for src in sources)
        self.scope.setdefault("___id", id)
        self._add(GuardKind.DUPLICATE_INPUT, None, ("all_distinct", tuple(sources)),
                  f"the {len(sources)} tensor inputs are distinct objects",
                  f"___len({{___id(o) for o in ({items},)}}) == {len(sources)}")

    def distinct_objects(self, a: Source, b: Source) -> None:
        ea, eb = a.expr(self.scope), b.expr(self.scope)
        self._add(GuardKind.DUPLICATE_INPUT, a, ("not", b), f"{a.name()} is not {b.name()}",
                  f"{ea} is not {eb}")

    def storage_offset(self, source: Source, t: torch.Tensor) -> None:
        e = source.expr(self.scope)
        self._add(GuardKind.TENSOR_MATCH, source, "storage_offset",
                  f"{source.name()}.storage_offset() == {t.storage_offset()}",
                  f"{e}.storage_offset() == {t.storage_offset()}")

    def is_view(self, source: Source) -> None:
        """The input is a view (its ``_base``'s sizes are read by shape guards that follow)."""
        e = source.expr(self.scope)
        self._add(GuardKind.TENSOR_MATCH, source, "is_view", f"{source.name()}._base is not None",
                  f"{e}._base is not None")

    def scalar_tensor_value(self, source: Source, value: int) -> None:
        """``source.item() == value`` for a 0-dim integer tensor input whose value an operation
        read as an int (capture/scalar_inputs.py); last in order, after its tensor guards."""
        e = source.expr(self.scope)
        self._add(GuardKind.SHAPE_ENV, source, ("item",), f"{source.name()}.item() == {value}",
                  f"{e}.item() == {int(value)}")

    def tensor_match(self, source: Source, t: torch.Tensor, sizes: bool = True) -> None:
        """Everything about a tensor input that the graph specializes on (``sizes=False``: all but
        its sizes and strides, which the ShapeEnv's guards check; its number of dimensions here)."""
        self._guards.pop((GuardKind.TYPE_MATCH, source, None), None)  # (checked here as well)
        if dispatches_torch_function(type(t)):
            self._subclass_tensor_match(source, t)
            return
        e = source.expr(self.scope)
        tt = bind(self.scope, type(t), "type")
        dt = bind(self.scope, t.dtype, "dtype")
        dev = bind(self.scope, t.device, "device")
        shape, stride = tuple(t.shape), tuple(t.stride())
        parts = [f"___type({e}) is {tt}", f"{e}.dtype is {dt}", f"{e}.device == {dev}",
                 f"{e}.shape == {shape!r}", f"{e}.stride() == {stride!r}",
                 f"{e}.requires_grad is {t.requires_grad!r}"]
        if not sizes:
            parts[3:5] = [f"{e}.dim() == {t.dim()}"]
        if t.layout is not torch.strided:
            parts.append(f"{e}.layout is {bind(self.scope, t.layout, 'layout')}")
        # the dispatch-key bits torch.compile's tensor guard compares too: both ways (a plain tensor
        # first, then a lazily conjugated / negated view or an inference tensor, is a new graph:
        # the trace read them as constants, `x.is_conj()`, and kernels dispatch on them)
        parts.append(f"{e}.is_inference()" if t.is_inference() else f"not {e}.is_inference()")
        if t.is_complex():  # (only a complex tensor carries the conjugate bit)
            parts.append(f"{e}.is_conj() is {t.is_conj()!r}")
        parts.append(f"{e}.is_neg() is {t.is_neg()!r}")
        text = (f"{source.name()}: {type(t).__name__} {t.dtype} {t.device} size={list(shape)} "
                f"stride={list(stride)} requires_grad={t.requires_grad}")
        if not sizes:
            text = (f"{source.name()}: {type(t).__name__} {t.dtype} {t.device} {t.dim()}-d (sizes: shape "
                    f"guards) requires_grad={t.requires_grad}")
        self._add(GuardKind.TENSOR_MATCH, source, None, text, " and ".join(parts))
        # the recompile reason's "now": the new tensor, and its first difference as torch.compile says it
        from ember.capture.entry_guards import tensor_mismatch
        expected = bind(self.scope, (t.dtype, t.device, t.requires_grad, t.dim(), shape if sizes else None,
                                     stride if sizes else None), "expected_meta")
        name = source.local if type(source).__name__ == "LocalSource" else source.name()
        key = (GuardKind.TENSOR_MATCH, source, None)
        self._guards[key] = dataclasses.replace(
            self._guards[key], now=f"{bind(self.scope, tensor_mismatch, 'tensor_mismatch')}({e}, {expected}, {name!r})")

    def _subclass_tensor_match(self, source: Source, t: torch.Tensor) -> None:
        """tensor_match for a subclass with its own ``__torch_function__``: reading ``.shape`` would
        call it, so the metadata is read in one helper with subclass dispatch disabled."""
        e = source.expr(self.scope)
        tt = bind(self.scope, type(t), "type")
        meta = tensor_meta(t)
        m = bind(self.scope, meta, "meta")
        fn = bind(self.scope, tensor_meta, "tensor_meta")
        text = (f"{source.name()}: {type(t).__name__} {meta[0]} {meta[1]} size={list(meta[2])} "
                f"stride={list(meta[3])} requires_grad={meta[4]}")
        self._add(GuardKind.TENSOR_MATCH, source, None, text, f"___type({e}) is {tt} and {fn}({e}) == {m}")

    def marked_dims(self, source: Source, t: torch.Tensor, dims: frozenset) -> None:
        """The dimension marks (``mark_dynamic``, ``maybe_mark_dynamic``, ``mark_static``,
        ``mark_unbacked``) of the tensor at ``source`` fit this graph, as torch.compile decides:
        ``mark_dynamic`` dims are among ``dims`` (the graph's symbolic ones), and each kind of mark
        a later tensor carries was on the compiled tensor too, with no dimension added (a kind the
        compiled tensor had, absent now, is fine). ``mark_static`` on a tensor whose graph made that
        dimension a symbol, or a first ``maybe_mark_dynamic`` on a tensor whose graph is static,
        recompiles."""
        e = source.expr(self.scope)
        compiled = dim_marks(t)
        fits = bind(self.scope, dim_marks_fit, "dim_marks_fit")
        args = f"{bind(self.scope, dims, 'dims')}, {bind(self.scope, compiled, 'marks')}"
        had = ", ".join(f"{fn} {sorted(m)}" for fn, m in zip(_MARK_FUNCTIONS, compiled) if m is not None)
        self._add(GuardKind.TENSOR_MATCH, source, "marked_dims",
                  f"dimension marks of {source.name()}: mark_dynamic within {sorted(dims)}, "
                  f"{'no other marks than ' + had if had else 'no other marks'}",
                  f"(not ___getattr({e}, '__dict__', None) or {fits}({e}, {args}))")  # (no attributes: no marks)
        key = (GuardKind.TENSOR_MATCH, source, "marked_dims")
        self._guards[key] = dataclasses.replace(self._guards[key],
                                                now=f"{bind(self.scope, dim_marks_text, 'dim_marks_text')}({e})")

    def shape_env(self, codes: list[str], names: list[tuple[str, str]], provenance: list | None = None) -> None:
        """The ShapeEnv's guards (Python over the inputs' expressions), shown with the inputs'
        readable names (``names``: (expression, name) pairs); ``provenance``: per code, where the
        trace added it (None: from the inputs themselves, e.g. a static size or duck sizing)."""
        import re
        self.scope.setdefault("___sizes_now", sizes_now)
        for i, code in enumerate(codes):
            text, used = code, []
            for expr, name in names:
                pattern = r"(?<![\w.\]])" + re.escape(expr) + r"(?![\w(\[])"
                if re.search(pattern, text):
                    used.append((expr, name))
                text = re.sub(pattern, lambda _m, n=name: n, text)
            now = "___sizes_now((" + "".join(f"({n!r}, {e}), " for e, n in used) + "))" if used else None
            fast = re.sub(r"\.(size|stride)\(\)\[(\d+)\]", r".\1(\2)", code)  # (no Size tuple per read)
            prov = provenance[i] if provenance is not None else None
            if prov is None:  # from an input's sizes: where the tensor guard of that input came from
                prov = next((g.provenance for (_e, name) in used for g in self._guards.values()
                             if g.kind is GuardKind.TENSOR_MATCH and g.source is not None
                             and g.source.name() == name and g.provenance is not None), None)
            self._add(GuardKind.SHAPE_ENV, None, ("shape", code), text, fast, provenance=prov)
            key = (GuardKind.SHAPE_ENV, None, ("shape", code))
            self._guards[key] = dataclasses.replace(self._guards[key], now=now)

    def function_code(self, source: Source, fn) -> None:
        e = source.expr(self.scope)
        c, g = bind(self.scope, fn.__code__, "code"), bind(self.scope, fn.__globals__, "globals")
        self._add(GuardKind.ID_MATCH, source, "code", f"{source.name()}.__code__ is <code {fn.__qualname__}>",
                  f"{e}.__code__ is {c} and {e}.__globals__ is {g}")

    def not_in_instance_dict(self, source: Source, name: str) -> None:
        e = source.expr(self.scope)
        self._add(GuardKind.ID_MATCH, source, ("no_instance", name),
                  f"{name!r} not set on the instance {source.name()}", f"{name!r} not in {e}.__dict__")

    def no_attribute(self, source: Source, obj: Any, name: str) -> None:
        """``obj.name`` does not resolve (a failed ``hasattr``, ``getattr(obj, name, default)``).

        Spelled so that checking it never runs user code: an object whose class has a Python
        ``__getattr__`` (nn.Module's included) is checked through its dicts and its class."""
        e = source.expr(self.scope)
        self.scope.setdefault("___hasattr", hasattr)
        n = repr(name)
        if isinstance(obj, torch.nn.Module):
            # Instance part here; the class part (shared by every instance, whose type is pinned
            # already) once per class.
            from ember.capture.sources import ConstSource
            cls = type(obj)
            self.no_attribute(ConstSource(cls, f"<class {cls.__qualname__}>"), cls, name)
            code = (f"{n} not in {e}.__dict__ and {n} not in {e}._parameters and {n} not in {e}._buffers "
                    f"and {n} not in {e}._modules")
        elif isinstance(obj, type):
            code = f"not ___hasattr({e}, {n})"
        elif isinstance(obj, types.ModuleType):
            code = f"{n} not in {e}.__dict__"
        elif any("__getattr__" in k.__dict__ for k in type(obj).__mro__[:-1]) or \
                type(type(obj).__getattribute__) is types.FunctionType:
            from ember.capture.variables.objects import raw_attribute
            if not isinstance(raw_attribute(obj, "__dict__"), dict):
                return  # nothing cheap and side-effect free to check
            self.scope.setdefault("___on_mro", on_mro)  # (not hasattr(cls): that finds the metaclass's too)
            code = f"{n} not in {e}.__dict__ and not ___on_mro(___type({e}), {n})"
        else:
            code = f"not ___hasattr({e}, {n})"
        self._add(GuardKind.ID_MATCH, source, ("absent", name), f"{source.name()} has no attribute {name!r}", code)

    def attribute_flag(self, source: Source, name: str, value: Any) -> None:
        """The truth of ``getattr(source, name, False)`` is that of ``value`` (a tensor's
        ``_is_param`` / ``_is_buffer``: what ``isinstance(t, Parameter / Buffer)`` reads)."""
        e = source.expr(self.scope)
        self.scope.setdefault("___getattr", getattr)
        truth = bool(value)
        self._add(GuardKind.EQUALS_MATCH, source, ("flag", name),
                  f"bool(getattr({source.name()}, {name!r}, False)) is {truth}",
                  f"(not ___getattr({e}, {name!r}, False)) is {not truth}")

    def not_in_dict(self, source: Source, key: str) -> None:
        """The dict at ``source`` has no ``key`` (a name the frame resolved past it: a builtin
        found because the globals do not define it)."""
        e = source.expr(self.scope)
        self._add(GuardKind.ID_MATCH, source, ("absent_key", key), f"{key!r} not in {source.name()}",
                  f"{key!r} not in {e}")

    def not_on_mro(self, source: Source, name: str) -> None:
        """No class in the MRO of the class at ``source`` defines ``name`` (what an instance's
        attribute lookup would find there; ``hasattr(cls, name)`` also sees the metaclass's,
        e.g. every class's own ``__dict__``)."""
        e = source.expr(self.scope)
        self.scope.setdefault("___on_mro", on_mro)
        self._add(GuardKind.ID_MATCH, source, ("absent_on_mro", name),
                  f"no class of {source.name()}'s MRO defines {name!r}", f"not ___on_mro({e}, {name!r})")

    def global_module_hooks(self) -> None:
        """The global module hooks (``register_module_forward_hook`` and friends) are laid out as the
        trace saw them (how many, which take kwargs or are always called: ``hook_layout``); the hook
        functions themselves are guarded where the trace read them, by position. Not by their
        handle ids: a hook registered anew on every call (``h = register(...); ...; h.remove()``)
        has a new id each time, and would recompile every call."""
        mm = torch.nn.modules.module
        n = bind(self.scope, mm, "nn_module_module")
        backward = f"{n}._global_backward_hooks or {n}._global_backward_pre_hooks"
        if not mm._global_forward_pre_hooks and not mm._global_forward_hooks:
            self._add(GuardKind.GLOBAL_STATE, None, "global_module_hooks", "no global module hooks",
                      f"not ({n}._global_forward_hooks or {n}._global_forward_pre_hooks or {backward})")
            return
        layout = global_hook_layout()
        f = bind(self.scope, global_hook_layout, "global_hook_layout")
        v = bind(self.scope, layout, "hook_layout")
        self._add(GuardKind.GLOBAL_STATE, None, "global_module_hooks",
                  f"global module forward (pre-)hooks laid out as {layout}, no global backward hooks",
                  f"{f}() == {v} and not ({backward})")

    def hook_keys(self, source: Source, pre: list, post: list, module=None) -> None:
        """The module's forward (pre-)hooks are laid out as ``module``'s (none, usually:
        ``hook_layout``); so are the global ones (`global_module_hooks`). ``pre``/``post``: the
        module's hook ids (empty: no hooks)."""
        self.global_module_hooks()
        e = source.expr(self.scope)
        # No backward hooks either (ember does not trace those): modules are guarded by type, so
        # another instance of the class, with such a hook, must not run this code.
        if not pre and not post:
            self._add(GuardKind.ID_MATCH, source, "hooks", f"{source.name()} has no forward or backward hooks",
                      f"not ({e}._forward_hooks or {e}._forward_pre_hooks or {e}._backward_hooks "
                      f"or {e}._backward_pre_hooks)")
            return
        layout = hook_layout(module)
        f = bind(self.scope, hook_layout, "hook_layout")
        v = bind(self.scope, layout, "hook_layout")
        self._add(GuardKind.ID_MATCH, source, "hooks",
                  f"{source.name()} forward (pre-)hooks laid out as {layout}, no backward hooks",
                  f"{f}({e}) == {v} and not ({e}._backward_hooks or {e}._backward_pre_hooks)")

    def grad_mode(self, enabled: bool) -> None:
        name = bind(self.scope, torch.is_grad_enabled, "is_grad_enabled")
        self._add(GuardKind.GLOBAL_STATE, None, "grad_mode", f"torch.is_grad_enabled() is {enabled}",
                  f"{name}() is {enabled}", now=f"{name}()")

    def refresh_global_state(self, key: str) -> None:
        """Re-read a global-state guard's value (the backend's compile changed it: Inductor's first
        compile registers ABCs, moving ``abc.get_cache_token()``; the answers the trace computed
        did not depend on those registrations)."""
        old = self._guards.pop((GuardKind.GLOBAL_STATE, None, key), None)
        if old is not None:
            getter, label = self._global_getters[key]
            self.global_state(key, getter, getter(), label)
            k = (GuardKind.GLOBAL_STATE, None, key)
            self._guards[k] = dataclasses.replace(self._guards[k], provenance=old.provenance)

    def global_state(self, key: str, getter, value: Any, label: str) -> None:
        self._global_getters[key] = (getter, label)
        name = bind(self.scope, getter, key)
        vname = bind(self.scope, value, key + "_value")
        self._add(GuardKind.GLOBAL_STATE, None, key, f"{label} == {value!r}", f"{name}() == {vname}",
                  now=f"{name}()")

    def pins_type(self, source: Source) -> bool:
        """Whether a type or tensor guard on ``source`` is installed."""
        return (GuardKind.TYPE_MATCH, source, None) in self._guards or \
            (GuardKind.TENSOR_MATCH, source, None) in self._guards

    # -- reading -------------------------------------------------------------
    def ordered(self) -> list[Guard]:
        return sorted(self._guards.values(), key=lambda g: (g.kind, g.order))

    def __len__(self) -> int:
        return len(self._guards)

    def readable(self) -> list[str]:
        return [str(g) for g in self.ordered()]


def hook_layout(m) -> tuple:
    """For each forward pre-hook, then each forward hook, of module ``m`` (in order): whether it
    takes keyword arguments, whether it is always called. What a trace of the module call bakes in
    besides the hook functions (read by position, and guarded as such)."""
    pre_kw, kw = m._forward_pre_hooks_with_kwargs, m._forward_hooks_with_kwargs
    always = getattr(m, "_forward_hooks_always_called", {})
    return (tuple(k in pre_kw for k in m._forward_pre_hooks),
            tuple((k in kw, k in always) for k in m._forward_hooks))


def global_hook_layout() -> tuple:
    """``hook_layout`` of the global module hooks (``register_module_forward_hook``)."""
    mm = torch.nn.modules.module
    kw, always = mm._global_forward_hooks_with_kwargs, getattr(mm, "_global_forward_hooks_always_called", {})
    return (len(mm._global_forward_pre_hooks), tuple((k in kw, k in always) for k in mm._global_forward_hooks))
