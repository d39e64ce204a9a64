"""Code ember never compiles as a frame of its own: the standard library and torch's internals.

A graph break inside an inlined standard-library function (``collections.namedtuple``
calling ``sys.intern``, ``copy.deepcopy`` on an opaque object, ...) would otherwise
compile that library function on its own at the breaking call, with resume functions
inside it that recompile on every new constant the library loops over. Dynamo skips
these files for frame compilation (its skipfiles); ember does the same: the callee at
the break is called as it is, and the caller's frame still resumes compiled after it.
Inlining them into a caller's graph is unaffected.

torch's own files are skipped the same way, except ``torch/nn`` (module forwards and
functionals, which users expect compiled) and ``torch/optim`` (an optimizer's ``step``: Dynamo
compiles its frames too, so the parameter update after ``_use_grad``'s ``graph_break()`` is one
graph). A ``torch._disable_dynamo`` wrapper (``Optimizer.zero_grad``) runs as it is.

``torch/optim/lr_scheduler.py`` is neither inlined nor compiled, as Dynamo skips it: a scheduler's
``step`` reads and bumps counters (``_step_count``, ``last_epoch``) that a trace would specialise on,
a recompile per training step. A call into it breaks the graph and runs as it is, with the
functions it calls compiled (the optimizer step its ``opt.step`` wrapper calls; see
``eager_frames.py``).
"""
from __future__ import annotations

import functools
import os
import sysconfig
import types


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    return tuple(d + os.sep for d in sorted(dirs))


_STDLIB = _stdlib_dirs()


def _torch_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    import torch
    root = os.path.realpath(os.path.dirname(torch.__file__)) + os.sep
    return (root,), (root + "nn" + os.sep, root + "testing" + os.sep, root + "optim" + os.sep)


_TORCH, _TORCH_COMPILED = _torch_dirs()
_PACKAGES = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


@functools.lru_cache(maxsize=4096)
def _skipped_file(filename: str) -> bool:
    path = os.path.realpath(filename)
    if path.startswith(_TORCH):
        return not path.startswith(_TORCH_COMPILED) or scheduler_file(path)
    if any(p in path for p in _PACKAGES):
        return False
    return path.startswith(_STDLIB)


@functools.lru_cache(maxsize=4096)
def torch_file(filename: str) -> bool:
    """A file of the torch package itself."""
    return os.path.realpath(filename).startswith(_TORCH)


@functools.lru_cache(maxsize=1024)
def scheduler_file(filename: str) -> bool:
    """``torch/optim/lr_scheduler.py``: never traced (see the module docstring)."""
    return os.path.realpath(filename) == _TORCH[0] + "optim" + os.sep + "lr_scheduler.py"


@functools.lru_cache(maxsize=1024)
def optimizer_file(filename: str) -> bool:
    """A file of ``torch/optim`` (optimizers and LR schedulers)."""
    return os.path.realpath(filename).startswith(_TORCH[0] + "optim" + os.sep)


def skipped_code(code: types.CodeType) -> bool:
    """True for code ember runs as it is when it would be compiled as a frame at a break."""
    return _skipped_file(code.co_filename)


def _disable_dynamo_code() -> types.CodeType | None:
    import torch
    try:
        return torch._disable_dynamo(lambda: None).__code__
    except Exception:  # an older or newer torch without the helper
        return None


_DISABLE_DYNAMO_CODE = _disable_dynamo_code()


def compile_disabled(fn) -> bool:
    """``torch.compiler.disable``d functions, and torch's own ``_disable_dynamo`` wrappers
    (``Optimizer.zero_grad``, ...): they run as they are, never traced or compiled. So do the fused
    optimizers' functions (``torch.optim.adam._fused_adam``: one fused kernel, whose empty tensor
    lists functionalization refuses), which torch.compile's TorchPatcher wraps in ``disable``."""
    if getattr(fn, "_torchdynamo_disable", False):
        return True
    code = getattr(fn, "__code__", None)
    return code is not None and (code is _DISABLE_DYNAMO_CODE or code.co_name.startswith("_fused_")
                                 and optimizer_file(code.co_filename))
