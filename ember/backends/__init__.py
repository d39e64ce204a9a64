"""Backends: the PyTorch compile-backend contract ``backend(gm, example_inputs) -> callable``."""
from ember.backends.registry import list_backends, lookup_backend, register_backend


def __getattr__(name):
    # ``aot_autograd`` lives in ember.backends.aot (which imports torch's fx
    # machinery); load it on first use.
    if name == "aot_autograd":
        from ember.backends.aot import aot_autograd
        return aot_autograd
    raise AttributeError(name)


__all__ = ["list_backends", "lookup_backend", "register_backend", "aot_autograd"]
