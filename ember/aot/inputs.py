"""From the backend contract to a flat function on fake inputs.

``backend(gm, example_inputs)`` gives a GraphModule and the inputs it will be
called with. This module:

* lifts the GraphModule's own parameters and buffers into leading inputs (a
  ``symbolic_trace``d module keeps them as attributes; graphs captured by a
  frontend usually already receive them as inputs), so that gradients reach
  them and buffer mutations (BatchNorm running stats) are applied to them;
* picks the fake mode: the one the frontend traced with (placeholder
  ``example_value``/``val`` meta, or fake example inputs), else a fresh one;
* builds one fake value per flat input, reusing the frontend's fake tensors
  (they carry its symbolic shapes) when they agree with the real inputs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.fx
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from ember.aot.errors import AOTCompileError, LocatingInterpreter
from ember.compat import fake_from_real


@dataclass
class FlatProgram:
    """The user's graph as ``fn(*flat_args) -> list`` plus everything to call it."""

    fn: Callable[..., list]
    #: the GraphModule's own parameters and buffers, passed before the user inputs
    lifted: list[torch.Tensor]
    num_user_inputs: int
    fake_args: list
    fake_mode: FakeTensorMode
    #: pytree spec of the GraphModule's return value
    out_spec: Any = None
    #: indices (in flat args) of parameters: static inputs for Inductor
    static_input_indices: list[int] | None = None
    #: some input the graph has symbolic sizes for was faked with this call's sizes (its fake in the
    #: graph went stale): the graphs serve calls with these very shapes only
    static_inputs: bool = False


def placeholders(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    return [n for n in gm.graph.nodes if n.op == "placeholder"]


def detect_fake_mode(gm: torch.fx.GraphModule, example_inputs: list) -> FakeTensorMode | None:
    for x in example_inputs:
        if isinstance(x, FakeTensor):
            return x.fake_mode
    for n in placeholders(gm):
        v = n.meta.get("example_value", n.meta.get("val"))
        if isinstance(v, FakeTensor):
            return v.fake_mode
    for n in placeholders(gm):
        v = n.meta.get("example_value", n.meta.get("val"))
        if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)) and v.node.shape_env is not None:
            # only symbolic scalars (a resume function's int argument): a mode on their ShapeEnv
            return FakeTensorMode(shape_env=v.node.shape_env, allow_non_fake_inputs=False)
    return None


def _hints(values) -> tuple:
    return tuple(v.node.hint if isinstance(v, torch.SymInt) else v for v in values)


def _agree(fake_values, real_values) -> bool:
    """Sizes (or strides) of a fake and a real tensor agree: equal, or the fake's is an unbacked
    symbol (no hint: it stands for any value)."""
    hints = _hints(fake_values)
    return len(hints) == len(real_values) and all(h is None or h == r for h, r in zip(hints, real_values))


def _describes(fake, real: torch.Tensor) -> bool:
    """``fake`` stands for ``real`` as the graph receives it (metadata and autograd flags)."""
    return (isinstance(fake, FakeTensor)
            and fake.dtype == real.dtype and fake.device == real.device
            and fake.requires_grad == real.requires_grad
            and _agree(fake.shape, tuple(real.shape))
            and _agree(fake.stride(), real.stride())
            and _agree((fake.storage_offset(),), (real.storage_offset(),)))


def _symbolic(fake) -> bool:
    return any(isinstance(d, torch.SymInt) and not d.node.is_constant() for d in (*fake.shape, *fake.stride()))


def _static_stand_ins(phs, fakes) -> bool:
    """Whether some input the graph has symbolic sizes for got a fake with this call's sizes (its
    placeholder's fake went stale: `t[1] = y` made it require grad; see _fakeify)."""
    for n, fake in zip(phs, fakes):
        meta_val = n.meta.get("example_value", n.meta.get("val"))
        if isinstance(meta_val, FakeTensor) and fake is not meta_val and isinstance(fake, torch.Tensor) \
                and _symbolic(meta_val) and not _symbolic(fake):
            return True
    return False


def _fakeify(gm: torch.fx.GraphModule, flat_args: list, num_lifted: int, fake_mode: FakeTensorMode) -> list | None:
    """One fake value per flat input, or ``None`` if a fake of ``fake_mode`` no longer describes its input.

    A frontend traces in-place metadata ops (``t_()``, ``squeeze_()``, ``resize_()``,
    ``requires_grad_()``, ``detach_()``) on its fake tensors, so after tracing its fake
    for such an input (and the mode's memo of it) describes the input as the graph
    *leaves* it, not as the graph receives it.
    """
    phs = placeholders(gm)
    fakes = []
    for i, a in enumerate(flat_args):
        meta_val = None
        if i >= num_lifted:
            n = phs[i - num_lifted]
            meta_val = n.meta.get("example_value", n.meta.get("val"))
        if isinstance(a, FakeTensor):
            fakes.append(a)
        elif isinstance(a, torch.Tensor):
            if isinstance(meta_val, FakeTensor) and meta_val.fake_mode is fake_mode and _describes(meta_val, a):
                fakes.append(meta_val)
            else:
                fake = fake_from_real(fake_mode, a, static_shapes=True)
                if not _describes(fake, a):
                    return None
                fakes.append(fake)
        elif isinstance(a, torch.SymInt):
            fakes.append(a)
        elif (isinstance(a, (int, float, bool)) and isinstance(meta_val, (torch.SymInt, torch.SymFloat, torch.SymBool))
              and fake_mode.shape_env is not None and meta_val.node.shape_env is fake_mode.shape_env):
            fakes.append(meta_val)
        elif isinstance(meta_val, (torch.SymInt, torch.SymFloat, torch.SymBool)) and not meta_val.node.is_constant() \
                and fake_mode.shape_env is not None:
            # a symbolic scalar input must stay one in a symbolic compile: as a constant, the graph
            # would return (or use) the traced value for every call. (A static compile at call time,
            # in a mode without a ShapeEnv, serves only calls with these very values: its variant's
            # signature holds them.)
            raise AOTCompileError(f"symbolic input {n.name} from another ShapeEnv than the graph's")
        else:
            fakes.append(a)
    return fakes


def fakeify_inputs(gm: torch.fx.GraphModule, flat_args: list, num_lifted: int,
                   fake_mode: FakeTensorMode) -> tuple[list, FakeTensorMode]:
    """One fake value per flat input (lifted params first, then placeholders), and their mode.

    When the frontend's fake mode has a stale fake for some input (see ``_fakeify``),
    every input is fakeified afresh in a new mode sharing its ShapeEnv, so that inputs
    sharing a storage still share a fake storage.
    """
    fakes = _fakeify(gm, flat_args, num_lifted, fake_mode)
    if fakes is not None:
        return fakes, fake_mode
    fresh = FakeTensorMode(shape_env=fake_mode.shape_env, allow_non_fake_inputs=False)
    fakes = _fakeify(gm, flat_args, num_lifted, fresh)
    if fakes is None:
        raise AOTCompileError("cannot make fake tensors that describe the graph's inputs")
    return fakes, fresh


def flatten_program(gm: torch.fx.GraphModule, example_inputs: list,
                    fake_mode: FakeTensorMode | None = None) -> FlatProgram:
    """Lift parameters/buffers, choose the fake mode and fake inputs, flatten outputs."""
    names, lifted = [], []
    seen = set()
    for name, t in list(gm.named_parameters(remove_duplicate=False)) + list(gm.named_buffers(remove_duplicate=False)):
        names.append(name)
        lifted.append(t)
        seen.add(id(t))
    num_lifted = len(lifted)
    num_user = len(example_inputs)
    phs = placeholders(gm)
    if len(phs) != num_user:
        raise AOTCompileError(f"graph has {len(phs)} placeholders but {num_user} example inputs were given")

    if fake_mode is None:
        fake_mode = detect_fake_mode(gm, example_inputs)
    if fake_mode is None:
        fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=False)
    flat_args = lifted + list(example_inputs)
    fake_args, fake_mode = fakeify_inputs(gm, flat_args, num_lifted, fake_mode)

    spec_box: list = []
    interp_gm = gm

    if num_lifted:
        def fn(*args):
            params = dict(zip(names, args[:num_lifted]))
            interp = LocatingInterpreter(interp_gm)
            with torch.nn.utils.stateless._reparametrize_module(interp_gm, params):
                out = interp.run(*args[num_lifted:])
            flat, spec = pytree.tree_flatten(out)
            spec_box[:] = [spec]
            return flat
    else:
        def fn(*args):
            out = LocatingInterpreter(interp_gm).run(*args)
            flat, spec = pytree.tree_flatten(out)
            spec_box[:] = [spec]
            return flat

    static = [i for i, a in enumerate(flat_args) if isinstance(a, torch.nn.Parameter)]
    prog = FlatProgram(fn=fn, lifted=lifted, num_user_inputs=num_user, fake_args=fake_args,
                       fake_mode=fake_mode, static_input_indices=static)
    prog.static_inputs = _static_stand_ins(phs, fake_args[num_lifted:])
    prog._spec_box = spec_box  # filled by the first run of fn
    return prog
