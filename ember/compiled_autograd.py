"""``ember.compiled_autograd``: capture the whole backward pass into one graph, compiled with a backend.

    with ember.compiled_autograd.enable("aot_eager"):     # or "eager", "inductor", a callable
        loss = model(x).sum()
        loss.backward()                                    # traced once per graph structure

    ember.compiled_autograd.enable("inductor")            # as a global switch ...
    ember.compiled_autograd.disable()                      # ... until disabled

Details and limits: docs/compiled_autograd.md; the implementation is ``ember.autograd``.
"""
from __future__ import annotations

import contextlib

from ember import autograd as _impl
from ember.autograd.hooks import install as _install_hook_tracking
from ember.backends.registry import lookup_backend

_install_hook_tracking()  # hooks on non-leaf tensors are recorded from ``import ember`` on

_global: list = []


def _keeps_order(backend) -> bool:
    """Whether ``backend`` runs a graph's calls in program order: ember's eager and aot_eager (a
    ``make_fx`` trace run as is). Inductor schedules by data dependencies."""
    return backend in ("eager", "aot_eager") or any(
        backend is lookup_backend(name) for name in ("eager", "aot_eager"))


class _Ordered:
    """A backend known to keep the order of the graph's calls (see ``_keeps_order``)."""
    _ember_keeps_order = True

    def __init__(self, backend):
        self.backend = backend

    def __call__(self, gm, example_inputs):
        return self.backend(gm, example_inputs)

    def __eq__(self, other):
        return isinstance(other, _Ordered) and other.backend is self.backend

    def __hash__(self):
        return hash(self.backend)


class _Enabled(contextlib.AbstractContextManager):
    """Returned by ``enable``: enabled already; as a context manager, disabled again on exit."""

    def __init__(self, backend):
        compiler = lookup_backend(backend)
        self._prev = _impl.push(_Ordered(compiler) if _keeps_order(backend) else compiler)

    def __exit__(self, *exc):
        if self in _global:
            _global.remove(self)
        _impl.pop(self._prev)
        return False


def enable(backend="aot_eager") -> _Enabled:
    """Compile every backward with ``backend`` (a name in the ember backend registry or a
    callable ``backend(gm, example_inputs)``). Use as a context manager, or call once as a
    global switch (``disable()`` turns it off)."""
    ctx = _Enabled(backend)
    _global.append(ctx)
    return ctx


def disable() -> None:
    """Turn off every ``enable`` still in effect."""
    while _global:
        ctx = _global.pop()
        _impl.pop(ctx._prev)


def reset() -> None:
    """Forget compiled backward graphs and zero ``counters``."""
    _impl.reset()


#: backwards run, graphs traced, cache hits, eager fallbacks, AOT backwards inlined, opaque Nodes
counters = _impl.counters
