"""Collect ``ViewAndMutationMeta`` from one functionalized run on fake inputs.

Functionalization wraps every input in a ``FunctionalTensor``; mutations of
an input then only update the wrapper, which records that (and whether it
happened under ``no_grad``). Views are recorded as "view metas" on the
wrapper, which we keep to replay them at run time. Outputs are classified by
comparing their (functional) storages with the inputs' and with each other's.
"""
from __future__ import annotations

import collections
import contextlib
from typing import Callable

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._subclasses.fake_tensor import FakeTensorMode
from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode
from torch.multiprocessing.reductions import StorageWeakRef

from ember.aot.errors import AOTCompileError
from ember.aot.grad_mode import graph_enables_grad, program_grad_mode
from ember.aot.schemas import InputInfo, OutputInfo, OutputKind, ViewAndMutationMeta


def functionalization_guard():
    """Python functionalization must run with the C++ Functionalize key disabled above it."""
    return torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Functionalize))


def quiet_unbacked(fake_mode: FakeTensorMode):
    """For a pass that runs the program under ``fake_mode`` outside the trace (its metadata, its
    version check): an unbacked symbol it makes (``.item()`` under ``capture_scalar_outputs``) is
    bound by no traced node, and left pending it failed the next trace (make_fx's
    PendingUnbackedSymbolNotFound: an internal error, fuzz seed 4500009)."""
    shape_env = fake_mode.shape_env
    return shape_env.ignore_fresh_unbacked_symbols() if shape_env is not None else contextlib.nullcontext()


def to_functional(x):
    return FunctionalTensor.to_functional(x) if isinstance(x, torch.Tensor) else x


def from_functional(x):
    """The current (synced) value inside a FunctionalTensor."""
    if isinstance(x, FunctionalTensor):
        torch._sync(x)
        return torch._from_functional_tensor(x.elem)
    return x


def _same_metadata(a: torch.Tensor, b: torch.Tensor) -> bool:
    from torch.fx.experimental.symbolic_shapes import guard_or_false, sym_eq
    return (guard_or_false(sym_eq(a.size(), b.size()))
            and guard_or_false(sym_eq(a.stride(), b.stride()))
            and guard_or_false(a.storage_offset() == b.storage_offset()))


def _same_sizes(a: torch.Tensor, b: torch.Tensor) -> bool:
    from torch.fx.experimental.symbolic_shapes import guard_or_true, sym_eq
    return guard_or_true(sym_eq(a.size(), b.size()))


def _input_info(arg, f_arg, idx: int) -> InputInfo:
    if not isinstance(arg, torch.Tensor):
        return InputInfo(is_tensor=False, is_leaf=False, requires_grad=False)
    torch._sync(f_arg)
    elem = f_arg.elem
    after = torch._from_functional_tensor(elem)
    if torch._functionalize_was_storage_changed(elem) and (
            StorageWeakRef(after.untyped_storage()) != StorageWeakRef(arg.untyped_storage())):
        raise AOTCompileError(f"input {idx} has its storage replaced (Tensor.set_ on a graph input); not supported yet")
    mutates_data = bool(torch._functionalize_has_data_mutation(elem))
    touches_metadata = bool(torch._functionalize_has_metadata_mutation(elem))
    mutates_metadata = touches_metadata and not _same_metadata(arg, after)
    if mutates_data and not mutates_metadata and not _same_sizes(arg, after):
        # an ``out=`` op resizes its output without flagging a metadata mutation (the value
        # after a data mutation is a fresh tensor, so only its sizes say anything here)
        mutates_metadata = True
    info = dict(
        is_tensor=True,
        is_leaf=arg.is_leaf,
        # after the run: ``x.add_(y)`` makes a non-grad x require grad, and then its
        # updated value takes part in the backward
        requires_grad=f_arg.requires_grad,
        mutates_data=mutates_data,
        mutates_metadata=mutates_metadata,
        metadata_restored=touches_metadata and not mutates_metadata,
        # (a custom Function's forward runs under no_grad, but its ctx.mark_dirty gives the input the
        # Function's history in eager: that mutation takes part in autograd)
        mutations_under_no_grad=mutates_data and bool(
            torch._functionalize_are_all_mutations_under_no_grad_or_inference_mode(elem))
        and not (f_arg.requires_grad and _is_custom_function_output(f_arg)),
        mutations_hidden_from_autograd=mutates_data and bool(
            torch._functionalize_are_all_mutations_hidden_from_autograd(elem)),
    )
    if mutates_metadata:
        info.update(updated_size=tuple(after.size()), updated_stride=tuple(after.stride()),
                    updated_storage_offset=after.storage_offset())
    return InputInfo(**info)


def _eager_metadata_updates(fn: Callable, fake_args: list, fake_mode: FakeTensorMode,
                            input_info: list[InputInfo]) -> list[InputInfo]:
    """Size, stride and offset of each metadata-mutated input after the program, as eager leaves them.

    Functionalization's value of such an input after the run is a fresh tensor: right
    sizes, but not the storage offset (``resize_`` of a view keeps it, and makes the
    view contiguous) nor always eager's strides. So run the program once more, plainly,
    on aliases of the fake inputs, and read their metadata afterwards.
    """
    import dataclasses
    grad_mode = torch.is_grad_enabled()
    try:
        with fake_mode, torch.no_grad(), quiet_unbacked(fake_mode):
            aliases = [a.detach() if isinstance(a, torch.Tensor) else a for a in fake_args]
            fn(*aliases)
    except Exception:  # noqa: BLE001 — keep functionalization's answer
        return input_info
    finally:
        torch._C._set_grad_enabled(grad_mode)
    out = []
    for info, a in zip(input_info, aliases):
        if info.mutates_metadata:
            info = dataclasses.replace(info, updated_size=tuple(a.size()), updated_stride=tuple(a.stride()),
                                       updated_storage_offset=a.storage_offset())
        out.append(info)
    return out


def _view_metas(o: torch.Tensor):
    if not isinstance(o, FunctionalTensor):
        return None
    seq = torch._C._functionalization.get_view_meta_sequence(o.elem)
    if any(getattr(vm, "has_symbolic_inputs", False) for vm in seq):
        return None
    return seq


def _is_custom_function_output(o: torch.Tensor) -> bool:
    with FunctionalTensorMode():  # reading grad_fn may replay views lazily
        grad_fn = o.grad_fn
    return (isinstance(grad_fn, torch.autograd.function.BackwardCFunction)
            or type(grad_fn).__name__ == "CppFunction")


def _classify_outputs(f_args: list, f_outs: list, input_info: list[InputInfo]):
    inp_storage = {}
    for i, a in enumerate(f_args):
        if isinstance(a, torch.Tensor):
            inp_storage.setdefault(StorageWeakRef(a.untyped_storage()), i)
    inp_ids = {id(a): i for i, a in enumerate(f_args) if isinstance(a, torch.Tensor)}
    out_ids = {id(o): i for i, o in enumerate(f_outs) if isinstance(o, torch.Tensor)}
    alias_count: collections.Counter = collections.Counter()
    for o in f_outs:
        if isinstance(o, torch.Tensor):
            alias_count[StorageWeakRef(o.untyped_storage())] += 1

    infos: list[OutputInfo] = []
    bases: list[torch.Tensor] = []
    base_index: dict[int, int] = {}
    for o in f_outs:
        if not isinstance(o, torch.Tensor):
            infos.append(OutputInfo(OutputKind.NON_ALIAS, is_tensor=False, requires_grad=False))
            continue
        storage = StorageWeakRef(o.untyped_storage())
        kind, base_idx, view_metas = OutputKind.NON_ALIAS, None, None
        if storage in inp_storage:
            if _is_custom_function_output(o):
                kind = OutputKind.CUSTOM_FUNCTION_VIEW
            elif id(o) in inp_ids:
                kind, base_idx = OutputKind.IS_INPUT, inp_ids[id(o)]
            else:
                kind, base_idx = OutputKind.ALIAS_OF_INPUT, inp_storage[storage]
                if not input_info[base_idx].mutates_metadata:
                    view_metas = _view_metas(o)
        elif (o._base is not None or alias_count[storage] > 1) and _is_custom_function_output(o):
            kind = OutputKind.CUSTOM_FUNCTION_VIEW  # regenerating the view would drop its custom backward
        elif o._base is not None and (o.requires_grad and o._base.requires_grad or alias_count[storage] > 1):
            # (without grad, views of one intermediate are still regenerated from it when
            # several outputs share it, so that they keep aliasing each other as in eager)
            if alias_count[storage] == 1:
                kind = OutputKind.UNSAFE_VIEW_ALIAS
            elif id(o._base) in out_ids:
                kind, base_idx = OutputKind.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT, out_ids[id(o._base)]
            elif id(o._base) in base_index:
                kind, base_idx = OutputKind.ALIAS_OF_INTERMEDIATE, base_index[id(o._base)]
            else:
                kind, base_idx = OutputKind.ALIAS_OF_INTERMEDIATE_SAVE_AS_OUTPUT, len(bases)
                base_index[id(o._base)] = len(bases)
                bases.append(o._base)
            if kind is not OutputKind.UNSAFE_VIEW_ALIAS:
                view_metas = _view_metas(o)
        elif alias_count[storage] > 1 and not o.requires_grad:
            # (out, out.detach()): regenerate the detached alias from the differentiable one
            twin = next((j for j, p in enumerate(f_outs)
                         if isinstance(p, torch.Tensor) and p is not o and p.requires_grad
                         and StorageWeakRef(p.untyped_storage()) == storage and _same_metadata(p, o)), None)
            if twin is not None:
                # (no view chain: o's runs from the functional base, which the twin, a view itself
                # maybe, is not; the twin's own layout, which o shares, is exact)
                kind, base_idx = OutputKind.ALIAS_OF_INTERMEDIATE_BASE_IS_USER_OUTPUT, twin
        differentiable = o.requires_grad and (o._base is None or o.grad_fn is not None)
        infos.append(OutputInfo(kind, is_tensor=True, requires_grad=o.requires_grad, base_idx=base_idx,
                                view_metas=view_metas, differentiable=differentiable))
    return infos, bases


def _tangent_like(t: torch.Tensor) -> torch.Tensor:
    return torch.empty(t.shape, dtype=t.dtype, device=t.device)


def collect_metadata(fn: Callable[..., list], fake_args: list, fake_mode: FakeTensorMode, *,
                     keep_input_mutations: bool = False) -> ViewAndMutationMeta:
    """Run ``fn`` once on functional wrappers of ``fake_args``; describe what it did.

    ``keep_input_mutations`` (inference only): data-only mutations stay in the
    graph as a trailing ``copy_`` instead of being returned and applied by the
    epilogue. Decided by the caller after this run (it needs ``is_train``), so
    here it is only recorded.
    """
    quiet = quiet_unbacked(fake_mode)
    grad_at_entry = torch.is_grad_enabled()
    # Under the Python dispatcher, as the trace (`trace._make_fx`): torch registers Python kernels
    # on the Autograd key that turn ops whose schema hides an input write into ops that declare
    # it (CUDA's `cudnn_batch_norm` -> `_native_batch_norm_legit`, writing the running stats).
    # Without them here, this pass saw no write, and the traced graph's new running stats were
    # dropped: BatchNorm's buffers never updated on CUDA.
    with fake_mode, enable_python_dispatcher(), functionalization_guard(), FunctionalTensorMode(), quiet:
        f_args = [to_functional(a) for a in fake_args]
        with program_grad_mode():
            f_outs = fn(*f_args)
        input_info = [_input_info(a, fa, i) for i, (a, fa) in enumerate(zip(fake_args, f_args))]
        output_info, bases = _classify_outputs(f_args, f_outs, input_info)
        # Training if gradients can flow: grad mode on at entry, or the graph itself turns it on
        # (a `with torch.enable_grad()` region, or a resume function leaving a no_grad block).
        is_train = (grad_at_entry or graph_enables_grad(fn)) and any(
            isinstance(a, torch.Tensor) and a.requires_grad for a in fake_args)
        if keep_input_mutations:
            # data-only mutations stay in the graph as a trailing copy_ (in training only
            # for inputs without grad: an autograd-visible mutation needs a tangent)
            input_info = [
                InputInfo(**{**info.__dict__, "mutated_in_graph": True})
                if info.mutates_data and not info.mutates_metadata and (not is_train or not info.requires_grad)
                else info
                for info in input_info
            ]
        meta = ViewAndMutationMeta(input_info=input_info, output_info=output_info,
                                   num_intermediate_bases=len(bases), is_train=is_train)
        if is_train:
            returns = ([from_functional(f_args[i]) for i in meta.mutated_input_indices]
                       + [from_functional(o) for o in f_outs]
                       + [from_functional(b) for b in bases])
            needs_tangent = [r for r, m in zip(returns, meta.tangent_mask) if m]
    if any(info.mutates_metadata for info in meta.input_info):
        meta.input_info = _eager_metadata_updates(fn, fake_args, fake_mode, meta.input_info)
    if is_train:
        with fake_mode:
            meta.traced_tangents = [_tangent_like(r) for r in needs_tangent]
    fake_mode.epoch += 1  # nothing traced here: keep its memo from leaking into the real trace
    return meta
