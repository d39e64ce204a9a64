"""Process-wide state a compile must leave as eager does, and the entry guards or restores: the
random streams around a backend, autocast state, and the flags that choose kernels."""
from __future__ import annotations

import contextlib

import torch


@contextlib.contextmanager
def preserved_rng_state():
    """A backend may draw random numbers while it compiles (Inductor's passes can evaluate random
    ops): the program's random stream must be where eager leaves it, whether the compile succeeds
    or the frame then runs eagerly. (Only around the backend: the trace itself draws for real where
    eager would, e.g. a lazy module's parameters built at trace time.)"""
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    try:
        yield
    finally:
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def _autocast_states(devices: tuple) -> list:
    from ember.capture.variables.autocast_breaks import autocast_state
    return [(d, autocast_state(d)) for d in devices]


def _restore_autocast(states: list) -> None:
    for device, (enabled, dtype, cache_enabled) in states:
        torch.set_autocast_enabled(device, enabled)
        torch.set_autocast_dtype(device, dtype)
        torch.set_autocast_cache_enabled(cache_enabled)


def torch_flags() -> tuple:
    """The process-wide settings that change which kernels run (see the guard in `_capture`)."""
    return (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled(),
            torch._C._get_cublas_allow_tf32(), torch._C._get_cublas_allow_fp16_reduced_precision_reduction(),
            torch._C._get_cublas_allow_bf16_reduced_precision_reduction(), torch.get_num_threads())


def _autocast_state():
    return (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"))
