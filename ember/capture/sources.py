"""Sources: where a value the interpreter reads came from, as a Python expression.

A source is how guards re-read a value on later calls and how the runner
fetches graph inputs. ``name()`` is the readable form used in reports
(``L['self'].layer1.weight``); ``expr()`` is the form used in generated code,
where the frame's arguments are plain local variables of the generated
function (``self.layer1.weight``). Objects that cannot be spelled in source
(a function's globals dict, a closure) are bound into the generated code's
scope under a private name via ``scope``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any


class Source:
    def name(self) -> str:
        raise NotImplementedError

    def expr(self, scope: dict[str, Any]) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()


def hoist(scope: dict[str, Any], code: str) -> str:
    """Compute ``code`` once per generated function: returns a local variable holding it.

    The statements are collected in ``scope['___hoists']`` and emitted at the top of the
    generated function (inside its try block, so a failing lookup is a guard miss).
    """
    table = scope.setdefault("___hoist_table", {})
    name = table.get(code)
    if name is None:
        name = table[code] = f"___s{len(table)}"
        scope.setdefault("___hoists", []).append((name, code))
    return name


def is_plain_literal(value: Any) -> bool:
    """``repr(value)`` is Python source that evaluates to an equal value of the same type.

    Not so for subclasses (an ``IntEnum`` or ``str`` enum member reprs as ``<Color.RED: 1>``), nor
    for ``nan``/``inf`` (``repr`` gives a bare name): those are bound into the scope instead."""
    t = type(value)
    if t in (str, int, bool, bytes) or value is None:
        return True
    return t is float and math.isfinite(value)


def bind(scope: dict[str, Any], obj: Any, hint: str) -> str:
    """Put ``obj`` into the generated code's scope; return its private name."""
    for key, val in scope.items():
        if val is obj and key.startswith("___"):
            return key
    key = f"___{hint}_{len(scope)}"
    scope[key] = obj
    return key


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    """An argument of the compiled frame."""
    local: str

    def name(self) -> str:
        return f"L[{self.local!r}]"

    def expr(self, scope):
        return self.local


@dataclasses.dataclass(frozen=True, eq=False)
class GlobalSource(Source):
    """``globals_dict[name]`` — a global of the compiled function or of an inlined one."""
    globals_dict: dict
    key: str
    top: bool = True  # globals of the compiled function itself (shown as G[...])

    def name(self) -> str:
        mod = self.globals_dict.get("__name__", "?")
        return f"G[{self.key!r}]" if self.top else f"G<{mod}>[{self.key!r}]"

    def expr(self, scope):
        return f"{bind(scope, self.globals_dict, 'globals')}[{self.key!r}]"

    def __eq__(self, other):
        return (isinstance(other, GlobalSource) and other.globals_dict is self.globals_dict
                and other.key == self.key)

    def __hash__(self):
        return hash((id(self.globals_dict), self.key))


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def expr(self, scope):
        if self.attr.isidentifier() and not self.attr.startswith("__"):
            return hoist(scope, f"{self.base.expr(scope)}.{self.attr}")
        return hoist(scope, f"___getattr({self.base.expr(scope)}, {self.attr!r})")


@dataclasses.dataclass(frozen=True)
class FreeCellSource(AttrSource):
    """``cell.cell_contents`` of a closure cell a closure twin receives as argument ``base``
    (bytecode/closure_twin.py): a free variable of the function, as ``CellContentsSource`` of
    the function itself is for a function compiled per object."""


@dataclasses.dataclass(frozen=True)
class ModuleMemberSource(Source):
    """A parameter, buffer or submodule of an nn.Module, read from its dict directly
    (``m._parameters['weight']``) — much cheaper in guards than ``Module.__getattr__``."""
    base: Source
    kind: str   # "_parameters", "_buffers" or "_modules"
    key: str
    # the module is one of torch.nn's own classes (nn.Linear): its members' sizes follow
    # torch's force_nn_module_property_static_shapes (not part of the source's identity)
    builtin: bool = dataclasses.field(default=False, compare=False)

    def name(self) -> str:
        return f"{self.base.name()}.{self.key}"

    def expr(self, scope):
        return hoist(scope, f"{self.base.expr(scope)}.{self.kind}[{self.key!r}]")


@dataclasses.dataclass(frozen=True)
class ItemSource(Source):
    """``base[index]`` for a constant index or key."""
    base: Source
    index: Any

    def name(self) -> str:
        return f"{self.base.name()}[{self.index!r}]"

    def expr(self, scope):
        index = self.index
        text = repr(index) if is_plain_literal(index) else bind(scope, index, "key")
        return hoist(scope, f"{self.base.expr(scope)}[{text}]")


@dataclasses.dataclass(frozen=True)
class CellContentsSource(Source):
    """The contents of closure cell ``index`` of a function given by ``base``."""
    base: Source
    index: int
    freevar: str

    def name(self) -> str:
        return f"{self.base.name()}.__closure__[{self.index}].cell_contents ({self.freevar})"

    def expr(self, scope):
        return hoist(scope, f"{self.base.expr(scope)}.__closure__[{self.index}].cell_contents")


@dataclasses.dataclass(frozen=True)
class ClosureCellSource(Source):
    """Closure cell ``index`` of a function given by ``base``: the cell object itself."""
    base: Source
    index: int

    def name(self) -> str:
        return f"{self.base.name()}.__closure__[{self.index}]"

    def expr(self, scope):
        return hoist(scope, f"{self.base.expr(scope)}.__closure__[{self.index}]")


@dataclasses.dataclass(frozen=True, eq=False)
class ConstSource(Source):
    """An object held by the compiled code itself (e.g. the compiled function)."""
    obj: Any
    label: str

    def name(self) -> str:
        return self.label

    def expr(self, scope):
        return bind(scope, self.obj, "const")

    def __eq__(self, other):
        return isinstance(other, ConstSource) and other.obj is self.obj

    def __hash__(self):
        return id(self.obj)


@dataclasses.dataclass(frozen=True)
class TypeSource(Source):
    base: Source

    def name(self) -> str:
        return f"type({self.base.name()})"

    def expr(self, scope):
        return f"___type({self.base.expr(scope)})"


@dataclasses.dataclass(frozen=True, eq=False)
class CallSource(Source):
    """``func(base, *args)`` for a pure read-only builtin method (e.g. ``dict.get``)."""
    func: Any
    base: Source
    args: tuple

    def name(self) -> str:
        if not self.args:
            return f"{getattr(self.func, '__qualname__', self.func)}({self.base.name()})"
        return f"{getattr(self.func, '__qualname__', self.func)}({self.base.name()}, " \
               f"{', '.join(map(repr, self.args))})"

    def expr(self, scope):
        f = bind(scope, self.func, "func")
        parts = [bind(scope, x, "arg") for x in self.args]
        base = self.base.expr(scope)
        if base is not None:
            parts.insert(0, base)
        return f"{f}({', '.join(parts)})"

    def __eq__(self, other):
        return (isinstance(other, CallSource) and other.func is self.func and other.base == self.base
                and other.args == self.args)

    def __hash__(self):
        return hash((id(self.func), id(self.base) if not isinstance(self.base, Source) else self.base))


@dataclasses.dataclass(frozen=True, eq=False)
class ApplySource(Source):
    """``fn(*parts)``, each part a Source or a constant: a value the trace derived from inputs
    without reading them (e.g. an f-string of a scalar argument), rebuilt this way at run time."""
    fn: Any
    parts: tuple

    def name(self) -> str:
        inner = ", ".join(p.name() if isinstance(p, Source) else repr(p) for p in self.parts)
        return f"{getattr(self.fn, '__name__', self.fn)}({inner})"

    def expr(self, scope):
        f = bind(scope, self.fn, "func")
        inner = ", ".join(p.expr(scope) if isinstance(p, Source) else bind(scope, p, "arg") for p in self.parts)
        return f"{f}({inner})"


def config_name(source: Source) -> str:
    """``source`` spelled as torch names sources (``L['self']._modules['inner'].x``): what
    ``torch.compiler.config.dynamic_sources`` / ``unbacked_sources`` entries are matched against."""
    if isinstance(source, ModuleMemberSource):
        return f"{config_name(source.base)}.{source.kind}[{source.key!r}]"
    if isinstance(source, AttrSource):
        return f"{config_name(source.base)}.{source.attr}"
    if isinstance(source, ItemSource):
        return f"{config_name(source.base)}[{source.index!r}]"
    return source.name()
