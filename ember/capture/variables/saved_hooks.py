"""``torch.autograd.graph.disable_saved_tensors_hooks(message)`` inside a compiled frame.

The context manager (a ``contextlib.contextmanager`` generator, inlined like any other) reads the
current message with ``_saved_tensors_hooks_get_disabled_error_message()`` and calls
``_saved_tensors_hooks_disable(message)`` / ``_saved_tensors_hooks_enable()``. Those two become
graph nodes, as in torch.compile (the graph runs them where the program does); the trace keeps
the state they set, so a later read in the frame answers from it, unguarded (the read at entry is
guarded by its value).

Graphs stay balanced: a frame that leaves the state changed (a bare ``_saved_tensors_hooks_disable``
call) ends its graph with the entry state again, and the entry code sets the state the frame left
after the graph, in program order with the other side effects. (A backend that traces the graph
again drops nodes without tensors; the setting only matters to ``saved_tensors_hooks`` pushed
inside the block, which run eagerly at a break.)
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported

_AUTOGRAD = torch._C._autograd
SETTERS = (_AUTOGRAD._saved_tensors_hooks_disable, _AUTOGRAD._saved_tensors_hooks_enable)
READERS = (_AUTOGRAD._saved_tensors_hooks_get_disabled_error_message, _AUTOGRAD._saved_tensors_hooks_is_enabled)
_UNSET = object()


class _Target(VariableTracker):
    """``torch._C._autograd`` as the target of a call replayed after the graph."""

    def __init__(self):
        from ember.capture.sources import ConstSource
        self.source = ConstSource(_AUTOGRAD, "torch._C._autograd")

    def describe(self):
        return "torch._C._autograd"


def call(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    output = tx.output
    state = output.__dict__.get("saved_hooks_message", _UNSET)
    if fn in READERS:
        if args or kwargs:
            raise unsupported("EB0025", f"{fn.__name__} with arguments")
        if state is _UNSET:  # not set by the frame: the state at entry, guarded
            return output.call_function(fn, [], {})
        return ConstantVariable(state if fn is READERS[0] else state is None)
    if fn is SETTERS[0]:
        if len(args) != 1 or kwargs or not args[0].is_constant() or not isinstance(args[0].as_constant(), str):
            raise unsupported("EB0025", "_saved_tensors_hooks_disable with an argument that is not a constant string")
        message = args[0].as_constant()
    else:
        if args or kwargs:
            raise unsupported("EB0025", "_saved_tensors_hooks_enable with arguments")
        message = None
    _set(tx, message)
    return ConstantVariable(None)


def _current(tx):
    """The state now: as the frame set it, else the state at entry (read now, guarded)."""
    output = tx.output
    state = output.__dict__.get("saved_hooks_message", _UNSET)
    if state is not _UNSET:
        return state
    entry = _AUTOGRAD._saved_tensors_hooks_get_disabled_error_message()
    tx.guards.global_state("saved_tensors_hooks_message", READERS[0], entry,
                           "torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()")
    output.saved_hooks_entry = entry
    return entry


def _set(tx, message, anchor=_UNSET) -> None:
    """A node setting the state (``message``; None: enabled) and the trace's state. With an
    ``anchor`` (the graph's last node when a context manager was made, or None for its start), the
    node goes there instead of the end, where torch.compile puts it, if no node since can tell."""
    if tx.trace.checkpoints:
        raise unsupported("EB0025", "setting the saved-tensors-hooks state inside a region traced speculatively")
    output = tx.output
    _current(tx)
    fn, args = (SETTERS[0], (message,)) if message is not None else (SETTERS[1], ())
    graph = output.graph
    since = list(graph.nodes)
    if anchor is not _UNSET and (anchor is None or anchor in since):
        since = since[since.index(anchor) + 1:] if anchor is not None else since
        if all(_state_blind(n) for n in since):
            first = next((n for n in since if n.op != "placeholder"), None)
            where = graph.inserting_after(anchor) if anchor is not None and anchor.op != "placeholder" \
                else (graph.inserting_before(first) if first is not None else None)
            if where is not None:
                with where:
                    graph.call_function(fn, args)
                output.saved_hooks_message = message
                return
    graph.call_function(fn, args)
    output.saved_hooks_message = message


def _state_blind(node) -> bool:
    """A node that cannot observe the saved-tensors-hooks state: an input, or a torch operator."""
    if node.op in ("placeholder", "get_attr", "call_method"):
        return True
    if node.op != "call_function":
        return False
    target = node.target
    if target in SETTERS or target in READERS:
        return False
    if isinstance(target, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    module = getattr(target, "__module__", None) or ""
    return module in ("_operator", "operator", "torch", "torch.functional", "torch.nn.functional") \
        or module.startswith("torch._C._nn") or module.startswith("torch._C._linalg")


class DisableSavedHooksVariable(VariableTracker):
    """``torch.autograd.graph.disable_saved_tensors_hooks(message)``: entering sets the state
    (``_saved_tensors_hooks_disable(message)``), leaving puts back the one it found. As in
    torch.compile the node that disables goes where the manager was made (a decorator: where the
    function was defined), when nothing traced in between can tell the difference."""

    def __init__(self, message: str, anchor):
        self.message = message
        self.anchor = anchor
        self.priors: list = []  # the state each open entry found
        self.entered = False

    @classmethod
    def create(cls, tx, args, kwargs):
        message = args[0] if len(args) == 1 and not kwargs else kwargs.get("error_message")
        if message is None or len(args) + len(kwargs) != 1 or not message.is_constant() \
                or not isinstance(message.as_constant(), str):
            raise unsupported("EB0025", "disable_saved_tensors_hooks with a message that is not a constant string")
        return cls(message.as_constant(), next(iter(reversed(tx.output.graph.nodes)), None))

    def describe(self):
        return f"disable_saved_tensors_hooks({self.message!r})"

    def python_type(self):
        import contextlib
        return contextlib._GeneratorContextManager

    def enter(self, tx, decorated: bool = False):
        if self.entered and not decorated:  # (its generator ran already: eager raises)
            raise unsupported("EB0025", f"entering {self.describe()} a second time")
        self.entered = self.entered or not decorated
        prior = _current(tx)
        _set(tx, self.message, self.anchor if not self.priors else _UNSET)
        self.priors.append(prior)
        return ConstantVariable(None)

    def exit(self, tx):
        _set(tx, self.priors.pop())
        return ConstantVariable(None)

    def exit_at_break(self):
        """The exit a resume function calls when it leaves the block a graph break cut in two."""
        return SavedHooksExit(self.priors[-1])

    def call(self, tx, args, kwargs):
        if len(args) == 1 and not kwargs:  # used as a decorator: entered around every call
            from ember.capture.variables.ctx_managers import ContextWrappedFunction
            return ContextWrappedFunction(self, args[0])
        return super().call(tx, args, kwargs)


class SavedHooksExit:
    """The ``__exit__`` of a ``disable_saved_tensors_hooks`` block cut in two by a graph break."""

    def __init__(self, prior):
        self.prior = prior

    def __call__(self, *exc_info):
        if self.prior is None:
            _AUTOGRAD._saved_tensors_hooks_enable()
        else:
            _AUTOGRAD._saved_tensors_hooks_disable(self.prior)
        return None  # never suppresses an exception

    def __repr__(self):
        return f"SavedHooksExit(restore={self.prior!r})"


def finish(output, side_effects) -> None:
    """At the end of a trace: a graph that leaves the state changed puts the entry state back at
    its end, and the entry code sets the frame's final state after the graph."""
    final = output.__dict__.get("saved_hooks_message", _UNSET)
    if final is _UNSET or final == output.saved_hooks_entry:
        return
    entry = output.saved_hooks_entry
    if entry is None:
        output.graph.call_function(SETTERS[1], ())
        side_effects.defer_call(_Target(), SETTERS[0].__name__, [ConstantVariable(final)], {})
    else:
        output.graph.call_function(SETTERS[0], (entry,))
        if final is None:
            side_effects.defer_call(_Target(), SETTERS[1].__name__, [], {})
        else:
            side_effects.defer_call(_Target(), SETTERS[0].__name__, [ConstantVariable(final)], {})
