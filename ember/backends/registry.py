"""Backend registry: names → callables with the PyTorch compile-backend contract.

A backend is ``backend(gm: torch.fx.GraphModule, example_inputs: list) -> callable``;
the returned callable takes the graph's inputs positionally and returns what
``gm`` returns. Any such callable can be passed to ``ember.compile`` directly;
names are looked up here. Later layers register themselves on import
(``ember.backends.aot`` registers ``aot_eager`` and ``inductor``).
"""
from __future__ import annotations

from typing import Callable

Backend = Callable  # (fx.GraphModule, list) -> callable

_BACKENDS: dict[str, Backend] = {}


def register_backend(name: str) -> Callable[[Backend], Backend]:
    def register(fn: Backend) -> Backend:
        _BACKENDS[name] = fn
        return fn
    return register


def lookup_backend(backend: str | Backend) -> Backend:
    """Return the backend callable for a name (or the callable itself)."""
    if callable(backend):
        return backend
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a name or a callable, got {type(backend).__name__}")
    _load_builtin_backends()
    try:
        return _BACKENDS[backend]
    except KeyError:
        raise ValueError(
            f"unknown ember backend {backend!r}; known: {sorted(_BACKENDS)}") from None


def list_backends() -> list[str]:
    _load_builtin_backends()
    return sorted(_BACKENDS)


def _load_builtin_backends() -> None:
    from ember.backends import eager  # noqa: F401
    try:
        from ember.backends import aot  # noqa: F401  (aot_eager, inductor)
    except ImportError:
        pass
