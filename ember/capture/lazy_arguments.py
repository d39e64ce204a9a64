"""The compiled frame's arguments, wrapped (and so guarded) when the trace first reads them.

torch.compile wraps a frame's arguments lazily: an argument the trace never reads before a graph
break is handed on to the resume function as it is, and only that function guards it. ember
does the same: the root frame's locals start as `ArgumentLocals`, holding each argument as an
`UnreadArgument` until a read (``LOAD_FAST``, ``locals()``, a cell made of it, any other lookup
through the mapping) wraps it with ``builder.wrap``, which installs its guards. A tensor (or NumPy
array) is wrapped at entry all the same, its fake tensor made before the trace writes through an
alias of it, but its type guard waits for the read (`lazy_argument`). The residual of a graph
break reads what is still unread by its name (`unread_items`), and analyses that only walk the
trackers (the speculation's fake-tensor walk, the generator reachability walk) read the raw
values (`dict.values`), where an `UnreadArgument` is no tracker.

    def f(x, mode):
        x = x + 1
        print(x)            # graph break: `mode` not read yet
        return x * 2 if mode == "double" else x

Each value of ``mode`` recompiles the resume function only, not ``f``'s first graph.
"""
from __future__ import annotations

from ember.capture.sources import LocalSource


class UnreadArgument:
    """An argument of the frame the trace has not read (no guard yet; a tensor's tracker, made at
    entry, with ``on_read``: its type guard, installed when the frame reads it)."""

    __slots__ = ("value", "source", "tracker", "on_read")

    def __init__(self, value, source: LocalSource, tracker=None, on_read=()) -> None:
        self.value = value
        self.source = source
        self.tracker = tracker
        self.on_read = on_read


class ArgumentLocals(dict):
    """The root frame's locals; arguments wrapped on first lookup (see the module docstring).

    Reads through the mapping (``[]``, ``get``, ``pop``, ``values``, ``items``, ``setdefault``)
    wrap; ``in``, ``len``, iteration over names and a ``dict(...)`` copy (the speculation's
    checkpoint: its restore puts the unread arguments back as they were) do not."""

    def __init__(self, tx) -> None:
        super().__init__()
        self._tx = tx

    def _wrapped(self, name, value):
        if type(value) is UnreadArgument:
            if value.tracker is not None:
                for guard in value.on_read:
                    guard()
                value = value.tracker
            else:
                from ember.capture.builder import wrap
                value = wrap(self._tx, value.value, value.source)
            dict.__setitem__(self, name, value)
        return value

    def __getitem__(self, name):
        return self._wrapped(name, dict.__getitem__(self, name))

    def get(self, name, default=None):
        if dict.__contains__(self, name):
            return self[name]
        return default

    def pop(self, name, *default):
        if dict.__contains__(self, name):
            self[name]  # noqa: B018 (wraps it)
        return dict.pop(self, name, *default)

    def setdefault(self, name, default=None):
        if dict.__contains__(self, name):
            return self[name]
        return dict.setdefault(self, name, default)

    def values(self):
        return [self[name] for name in list(self)]

    def items(self):
        return [(name, self[name]) for name in list(self)]

    def copy(self):
        out = ArgumentLocals(self._tx)
        dict.update(out, dict.items(self))
        return out

    def unread_items(self):
        """(name, value) pairs with the unread arguments as they are (for a graph break's residual)."""
        return list(dict.items(self))


def lazy_argument(tx, value, source: LocalSource):
    """An `UnreadArgument` to wrap on first read; a tensor's (or NumPy array's) tracker is made now,
    its fake tensor before the trace writes through an alias of it (a tensor's type guard waits for
    the frame to read it, the rest of its guard for a use: TensorVariable)."""
    import torch
    from ember.capture.builder import wrap
    from ember.capture.variables.numpy_arrays import is_numpy_value
    if is_numpy_value(value):
        return wrap(tx, value, source)
    if not isinstance(value, torch.Tensor):
        return UnreadArgument(value, source)
    from ember.fake.convert import autograd_refuses_metadata
    if autograd_refuses_metadata(value):
        # no fake tensor can be made of it: it stays unread, and a read breaks the graph there
        # (a resume function handed a custom Function's view whose base the frame wrote, unused
        # in its graph, compiles as torch.compile's does)
        return UnreadArgument(value, source)
    output = tx.output
    output.deferred_type_guards = deferred = []
    try:
        vt = wrap(tx, value, source)
    finally:
        output.deferred_type_guards = None
    return UnreadArgument(value, source, vt, deferred) if deferred else vt
