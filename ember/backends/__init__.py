"""Backends: the torch.compile contract ``backend(gm, example_inputs) -> callable``."""
from ember.backends.registry import list_backends, lookup_backend, register_backend

__all__ = ["list_backends", "lookup_backend", "register_backend"]
