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
        # calls replayed after the graph that write nothing the frame could read back (a hit of an
        # lru_cache wrapper, see variables/lru_cached.py): not a side effect for `bool(self)`
        self._replays: list[tuple[VariableTracker, str]] = []
        self._raw_attrs: set[tuple[int, str]] = set()
        self._setters: dict[tuple[int, str], Any] = {}  # key -> the setter the replay calls
        # attributes deleted and then assigned again in the frame: the new key goes to the end of
        # the object's __dict__ (as in eager), so the replay deletes before it sets
        self._readded: set[tuple[int, str]] = set()
        # objects whose __dict__ the trace holds as a dict tracker: an attribute write after that
        # would not show in it (and one before it is not in the real dict it was read from)
        self._dict_read: set[int] = set()
        # ... of which those read only as a view with the frame's writes (instance_lookup.
        # written_instance_dict), by object id: a module's plain attribute written after such a
        # read goes into every view handed out, as it goes into the real __dict__
        self._dict_views: dict[int, list] = {}
        self._dict_read_raw: set[int] = set()
        # the birth numbers (containers.BIRTHS) of the list/dict trackers written, in order
        self.container_writes: list[int] = []
        # hooks registered on input tensors, in program order (variables/tensor_hooks.py), and the
        # ids of those whose handle the frame removed
        self.hooks: list[VariableTracker] = []
        self.removed_hooks: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self._attrs or self._globals or self._containers or self._calls or self.hooks)

    def replay_call(self, target: VariableTracker, method: str) -> None:
        """``target.method()`` called after the graph, after the other effects (see ``_replays``)."""
        self._replays.append((target, method))

    def defer_call(self, target: VariableTracker, method: str, args: list, kwargs: dict) -> None:
        """A call (logging) replayed after the graph, with the same arguments — containers as they
        are now (a log line formats them at the call; they may be mutated after it)."""
        self._calls.append((target, method, [_snapshot(a) for a in args],
                            {k: _snapshot(v) for k, v in kwargs.items()}))

    # -- attributes of outside objects ----------------------------------------------
    def store_attr(self, target: VariableTracker, obj: Any, name: str, value: VariableTracker,
                   raw: bool = False, graph_value: bool = False, via=None) -> None:
        """``raw``: replay with ``object.__setattr__`` (the trace already ran the class's own
        ``__setattr__``, whose effects are recorded separately); ``via``: replay with that setter
        function instead (``nn.Module.__setattr__``, for the same reason). ``graph_value``: the
        target is a tensor the graph computes (no source: the replay sets it on that graph output)."""
        if target.source is None and not graph_value:
            raise unsupported("EB0032", f"assigning {type(obj).__name__}.{name} on an object ember cannot name")
        if id(obj) in self._dict_read and not self._write_into_views(obj, name, value, via):
            raise unsupported("EB0032", f"assigning {type(obj).__name__}.{name} after reading its __dict__ in the frame")
        key = (id(obj), name)
        prev = self._attrs.get(key)
        if prev is not None and prev[2] is DELETED and value is not DELETED:
            del self._attrs[key]  # (re-inserted: its replay, and its key, come after the others)
            self._readded.add(key)
        self._raw_attrs.discard(key)
        self._setters.pop(key, None)
        if raw:
            self._raw_attrs.add(key)
        elif via is not None:
            self._setters[key] = via
        self._attrs[key] = (target, name, value)

    def delete_attr(self, target: VariableTracker, obj: Any, name: str) -> None:
        """``del obj.name`` on an object from outside (its class defines no such attribute and no
        ``__delattr__``/``__getattr__``: checked by the caller): replayed by removing the name from
        its ``__dict__``; reads in the frame from now on find no attribute."""
        if id(obj) in self._dict_read:
            raise unsupported("EB0008", f"deleting {type(obj).__name__}.{name} after reading its __dict__ in the frame")
        self.store_attr(target, obj, name, DELETED, raw=True)

    def read_instance_dict(self, obj: Any, *, written_ok: bool = False, view=None) -> None:
        """The trace reads ``obj.__dict__`` (from now on, an attribute write is refused: the dict
        read would not see it). Refused once the frame wrote one of its attributes, unless the
        caller shows those writes (``written_ok``, see `pending_attrs`)."""
        if self.has_attrs(obj) and not written_ok:
            raise unsupported("EB0032", f"reading the __dict__ of a {type(obj).__name__} object the frame assigned "
                              "attributes of")
        self._dict_read.add(id(obj))
        if view is None:
            self._dict_read_raw.add(id(obj))
        else:
            self._dict_views.setdefault(id(obj), []).append(view)

    def _write_into_views(self, obj: Any, name: str, value, via) -> bool:
        """``module.name = value`` after the trace read ``module.__dict__`` only as views with the
        writes: a plain attribute (not a parameter, buffer or submodule, which Module.__setattr__
        puts elsewhere) goes into those views too, as into the real dict. False: refused."""
        import torch
        if id(obj) in self._dict_read_raw or id(obj) not in self._dict_views or value is DELETED \
                or not isinstance(obj, torch.nn.Module) or via is not torch.nn.Module.__setattr__:
            return False
        d = obj.__dict__
        if any(name in (d.get(kind) or {}) for kind in ("_parameters", "_buffers", "_modules")) or \
                issubclass(value.python_type(), (torch.nn.Module, torch.nn.Parameter)):
            return False
        from ember.capture.variables.base import ConstantVariable
        for view in self._dict_views[id(obj)]:
            view.set_item(ConstantVariable(name), value)
        return True

    def instance_dict_read(self, obj: Any) -> bool:
        """Whether the trace holds ``obj.__dict__`` as a dict tracker (see `read_instance_dict`)."""
        return id(obj) in self._dict_read

    def pending_attrs(self, obj: Any) -> list:
        """``(name, value)`` of the attributes the frame wrote on ``obj``, in first-write order (the
        order new keys enter its ``__dict__``); a deleted one's value is `DELETED`."""
        return [(name, value) for (oid, name), (_t, _n, value) in self._attrs.items() if oid == id(obj)]

    def readded(self, obj: Any, name: str) -> bool:
        """Whether the frame deleted ``obj.name`` and then assigned it again (its key moved to the
        end of ``obj.__dict__``)."""
        return (id(obj), name) in self._readded

    def written_names(self, obj: Any) -> list[str]:
        """The attribute names of ``obj`` the frame wrote (or deleted)."""
        return [name for (oid, name) in self._attrs if oid == id(obj)]

    def has_attrs(self, obj: Any) -> bool:
        """Whether the frame wrote any attribute of ``obj``."""
        return any(key[0] == id(obj) for key in self._attrs)

    def load_attr(self, obj: Any, name: str) -> VariableTracker | None:
        hit = self._attrs.get((id(obj), name))
        if hit is not None and hit[2] is DELETED:
            from ember.capture.variables.objects import MissingAttribute
            raise MissingAttribute(f"'{type(obj).__name__}' object has no attribute '{name}'")
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
            raise unsupported("EB0032", "mutating a container ember cannot name")
        self._containers.setdefault(id(container), container)

    def is_mutated(self, container: VariableTracker) -> bool:
        """Whether the frame mutated this outside container (its real object is not yet changed)."""
        return id(container) in self._containers

    def live_values(self) -> list:
        """Every tracker the recorded effects keep alive (roots for closing unreachable generators)."""
        values: list = list(self._containers.values())
        values += [v for _t, _n, v in self._attrs.values() if v is not DELETED]
        values += [v for _d, _n, v, _s in self._globals.values()]
        for _t, _m, args, kwargs in self._calls:
            values += list(args) + list(kwargs.values())
        for handle in self.hooks:
            values += [handle, handle.hook]
        return values

    def register_hooks(self, plan) -> None:
        """Build every hook handle (registering its hook) in program order, before the return value
        or a graph break's residual refers to any of them (see variables/tensor_hooks.py)."""
        for handle in self.hooks:
            plan.expr(handle)

    # -- replay --------------------------------------------------------------------------
    def codegen(self, plan, scope: dict) -> list[str]:
        """Statements (for the generated entry) that apply the recorded effects."""
        from ember.capture.sources import bind
        from ember.capture.builder import advance
        from ember.capture.variables.deques import DequeVariable
        from ember.capture.variables.containers import (DictVariable, IteratorVariable, ListVariable, SetVariable,
                                                        TupleVariable)
        lines = []
        # Every object written to is read from its source before any write: a write must not
        # redirect where a later one lands (`obj.items = []` and an append to the old `obj.items`).
        targets: dict[int, str] = {}

        def target_of(vt) -> str:
            key = id(vt)
            if key not in targets:
                targets[key] = f"___t{len(targets)}"
                where = vt.source.expr(scope) if vt.source is not None else plan.expr(vt)  # (a graph output)
                lines.append(f"{targets[key]} = {where}")
            return targets[key]

        for c in self._containers.values():
            target_of(c)
        for target, _name, _value in self._attrs.values():
            target_of(target)
        for target, _method, _args, _kwargs in self._calls:
            target_of(target)
        for target, _method in self._replays:
            target_of(target)
        # ... and so is every value written (`a.x, a.y = a.y, a.x`).
        values: list[str] = []
        made: list = []  # trackers made here live until the end (the plan may key on their ids)

        def value_of(vt) -> str:
            made.append(vt)
            text = plan.expr(vt)
            if text.isidentifier() or text.startswith("___o["):
                return text
            values.append(f"___v{len(values)}")
            lines.append(f"{values[-1]} = {text}")
            return values[-1]

        writes = []
        for c in self._containers.values():
            target = targets[id(c)]
            if isinstance(c, ListVariable) and getattr(c, "only_appended", False):
                # appended to, never read: the list may have any length now (see LazyListVariable)
                writes.append(f"{target}.extend({value_of(ListVariable(c.appended))})")
            elif isinstance(c, ListVariable):
                writes.append(f"{target}[:] = {value_of(ListVariable(c.items))}")
            elif isinstance(c, (DictVariable, SetVariable)):
                if isinstance(c, DictVariable):
                    items = [TupleVariable([c.keys[k], v]) for k, v in c.items.items()]
                else:
                    items = list(c.items.values())
                pairs = value_of(ListVariable(items))
                if isinstance(c, DictVariable) and _counts_on_update(c.dict_cls):
                    # Counter.update adds counts: put the items back as a plain dict would
                    writes += [f"{target}.clear()", f"{bind(scope, dict.update, 'dict_update')}({target}, {pairs})"]
                else:
                    writes += [f"{target}.clear()", f"{target}.update({pairs})"]
            elif isinstance(c, DequeVariable):
                writes += [f"{target}.clear()", f"{target}.extend({value_of(ListVariable(c.items))})"]
            elif isinstance(c, IteratorVariable):
                writes.append(f"{bind(scope, advance, 'advance')}({target}, {c.pos})")
            else:
                raise unsupported("EB0032", f"replaying a mutation of {c.describe()}")
        for key, (target, name, value) in self._attrs.items():
            if value is DELETED:  # (set and deleted in the frame, or deleted: gone either way)
                writes.append(f"{bind(scope, _drop_attribute, 'drop_attribute')}({targets[id(target)]}, {name!r})")
                continue
            if key in self._readded:  # deleted then set again: the key moves to the end
                writes.append(f"{bind(scope, _drop_attribute, 'drop_attribute')}({targets[id(target)]}, {name!r})")
            if key in self._setters:
                via = self._setters[key]
                if hasattr(via, "final_setter"):  # (decided by the whole trace: `DataAssignment`)
                    via = via.final_setter()
                setter = bind(scope, via, "setattr_via")
            else:
                setter = "___object_setattr" if key in self._raw_attrs else "___setattr"
            writes.append(f"{setter}({targets[id(target)]}, {name!r}, {value_of(value)})")
        for gdict, name, value, _src in self._globals.values():
            writes.append(f"{bind(scope, gdict, 'globals')}[{name!r}] = {value_of(value)}")
        for target, method, args, kwargs in self._calls:
            parts = [value_of(a) for a in args] + [f"{k}={value_of(v)}" for k, v in kwargs.items()]
            writes.append(f"{targets[id(target)]}.{method}({', '.join(parts)})")
        for target, method in self._replays:
            writes.append(f"{targets[id(target)]}.{method}()")
        lines += writes
        if lines:
            scope["___setattr"] = setattr
            scope["___object_setattr"] = object.__setattr__
        return lines


class _Deleted(VariableTracker):
    """The value of an attribute the frame deleted (see `SideEffects.delete_attr`)."""

    def describe(self):
        return "a deleted attribute"


DELETED = _Deleted()


def _drop_attribute(obj: Any, name: str) -> None:
    obj.__dict__.pop(name, None)


def _counts_on_update(cls: type) -> bool:
    """``cls.update`` adds counts rather than setting items (``collections.Counter``). (Not for
    OrderedDict: its C ``update`` keeps its own order links, which ``dict.update`` would bypass.)"""
    import collections
    return issubclass(cls, collections.Counter)


def _snapshot(vt: VariableTracker) -> VariableTracker:
    """A shallow copy of a list/dict/set tracker as it is now (other values as they are)."""
    from ember.capture.variables.containers import DictVariable, ListVariable, SetVariable
    if isinstance(vt, ListVariable):
        return ListVariable(list(vt.items))
    if isinstance(vt, DictVariable):
        return DictVariable(vt.items, vt.keys, dict_cls=vt.dict_cls)
    if isinstance(vt, SetVariable):
        return SetVariable(list(vt.items.values()), frozen=vt.frozen)
    return vt
