"""Side effects on objects that exist outside the frame, replayed after the graph runs.

While tracing, a write to an attribute of an outside object (``self.count =
...``), to a global, or into an outside list/dict does not happen: it is
recorded here, and later reads in the same frame see the recorded value. The
generated entry applies the final state after calling the graph, in the
order the writes were first made, so Python code after the call sees exactly
what eager would have left behind.
"""
from __future__ import annotations

from typing import Any

from ember.capture.variables.base import VariableTracker, unsupported


class SideEffects:
    def __init__(self) -> None:
        # key -> (target tracker, attribute name, value tracker); insertion order = first write
        self._attrs: dict[tuple[int, str], tuple[VariableTracker, str, VariableTracker]] = {}
        self._globals: dict[tuple[int, str], tuple[dict, str, VariableTracker, Any]] = {}
        self._containers: dict[int, VariableTracker] = {}
        self._calls: list[tuple[VariableTracker, str, list, dict]] = []

    def __bool__(self) -> bool:
        return bool(self._attrs or self._globals or self._containers or self._calls)

    def defer_call(self, target: VariableTracker, method: str, args: list, kwargs: dict) -> None:
        """A call (logging) replayed after the graph, with the same arguments."""
        self._calls.append((target, method, args, kwargs))

    # -- attributes of outside objects ----------------------------------------------
    def store_attr(self, target: VariableTracker, obj: Any, name: str, value: VariableTracker) -> None:
        if target.source is None:
            raise unsupported(f"assigning {type(obj).__name__}.{name} on an object ember cannot name")
        self._attrs[(id(obj), name)] = (target, name, value)

    def load_attr(self, obj: Any, name: str) -> VariableTracker | None:
        hit = self._attrs.get((id(obj), name))
        return hit[2] if hit is not None else None

    # -- globals ---------------------------------------------------------------------
    def store_global(self, globals_dict: dict, name: str, value: VariableTracker, source) -> None:
        self._globals[(id(globals_dict), name)] = (globals_dict, name, value, source)

    def load_global(self, globals_dict: dict, name: str) -> VariableTracker | None:
        hit = self._globals.get((id(globals_dict), name))
        return hit[2] if hit is not None else None

    # -- outside containers mutated in place -------------------------------------------
    def mutated_container(self, container: VariableTracker) -> None:
        if container.source is None:
            raise unsupported("mutating a container ember cannot name")
        self._containers.setdefault(id(container), container)

    def live_values(self) -> list:
        """Every tracker the recorded effects keep alive (roots for closing unreachable generators)."""
        values: list = list(self._containers.values())
        values += [v for _t, _n, v in self._attrs.values()]
        values += [v for _d, _n, v, _s in self._globals.values()]
        for _t, _m, args, kwargs in self._calls:
            values += list(args) + list(kwargs.values())
        return values

    # -- replay --------------------------------------------------------------------------
    def codegen(self, plan, scope: dict) -> list[str]:
        """Statements (for the generated entry) that apply the recorded effects."""
        from ember.capture.sources import bind
        from ember.capture.builder import advance
        from ember.capture.variables.containers import DictVariable, IteratorVariable, ListVariable, SetVariable
        lines = []
        for c in self._containers.values():
            target = c.source.expr(scope)
            if isinstance(c, ListVariable):
                lines.append(f"{target}[:] = [{', '.join(plan.expr(i) for i in c.items)}]")
            elif isinstance(c, DictVariable):
                items = ", ".join(f"({plan.expr(c.keys[k])}, {plan.expr(v)})"
                                  for k, v in c.items.items())
                lines += [f"___new = [{items}]", f"___d = {target}", "___d.clear()", "___d.update(___new)"]
            elif isinstance(c, SetVariable):
                items = ", ".join(plan.expr(v) for v in c.items.values())
                lines += [f"___new = [{items}]", f"___s = {target}", "___s.clear()", "___s.update(___new)"]
            elif isinstance(c, IteratorVariable):
                lines.append(f"{bind(scope, advance, 'advance')}({target}, {c.pos})")
            else:
                raise unsupported(f"replaying a mutation of {c.describe()}")
        for target, name, value in self._attrs.values():
            lines.append(f"___setattr({target.source.expr(scope)}, {name!r}, {plan.expr(value)})")
        for gdict, name, value, _src in self._globals.values():
            lines.append(f"{bind(scope, gdict, 'globals')}[{name!r}] = {plan.expr(value)}")
        for target, method, args, kwargs in self._calls:
            parts = [plan.expr(a) for a in args] + [f"{k}={plan.expr(v)}" for k, v in kwargs.items()]
            lines.append(f"{target.source.expr(scope)}.{method}({', '.join(parts)})")
        if lines:
            scope["___setattr"] = setattr
        return lines
