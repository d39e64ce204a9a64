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


_len_function_modes = torch._C._len_torch_function_stack

# The torch-function state where the frame being captured was called (the trace itself runs with
# subclasses' ``__torch_function__`` off: convert_frame._without_subclass_torch_function). A stack,
# as captures can nest.
_caller_torch_function: list = []


@contextlib.contextmanager
def subclass_torch_function_off():
    """Turn tensor subclasses' ``__torch_function__`` off for a capture, remembering the caller's
    state (``caller_torch_function_state``)."""
    _caller_torch_function.append(torch._C._get_torch_function_state())
    try:
        with torch._C.DisableTorchFunctionSubclass():
            yield
    finally:
        _caller_torch_function.pop()


def caller_torch_function_state():
    """``torch._C._get_torch_function_state()`` as the frame being captured sees it in eager."""
    return _caller_torch_function[-1] if _caller_torch_function else torch._C._get_torch_function_state()



def default_device_state():
    """The default device of factory calls (``with torch.device(d):``, ``torch.set_default_device``):
    None for the CPU (an empty torch-function mode stack, the common case, takes one C call), else
    ``torch.get_default_device()``. A graph traced under one default device must not serve a call
    under another: its ``torch.zeros(3)`` would make tensors on the first."""
    if not _len_function_modes():
        return None
    device = torch.get_default_device()
    return None if device.type == "cpu" else device


def _guarded_autocast_devices() -> tuple[str, ...]:
    """The device types whose ambient autocast state a graph depends on: cpu, cuda, and this
    process's accelerator if it is another (a graph traced outside ``autocast("cuda")`` must not
    serve a call inside one: its matmuls would stay float32)."""
    devices = ["cpu", "cuda"]
    accelerator = getattr(torch, "accelerator", None)
    try:
        current = accelerator.current_accelerator() if accelerator is not None else None
    except Exception:  # noqa: BLE001 - an odd backend: cpu and cuda are guarded anyway
        current = None
    if current is not None and current.type not in devices:
        devices.append(current.type)
    return tuple(devices)


AUTOCAST_DEVICES: tuple[str, ...] = _guarded_autocast_devices()


def _autocast_state():
    return tuple((torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICES)
