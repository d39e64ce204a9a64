"""The AOT autograd pipeline: graph in, callable with eager semantics out.

    compiled = aot_compile(gm, example_inputs, fw_compiler=nop)
    outs = compiled(*inputs)

1. ``flatten_program``: lift the module's params/buffers into inputs, pick fake inputs.
2. ``collect_metadata``: one functionalized run → ``ViewAndMutationMeta``.
3. training (grad enabled and some input requires grad): ``trace_joint``, partition,
   compile the forward now and the backward at the first ``backward()``;
   inference: ``trace_inference`` and compile it.
4. wrap in ``CompiledGraph`` (autograd.Function + epilogue).

Compilers have the backend contract ``compiler(gm, example_inputs) -> callable``;
a callable with ``_boxed_call = True`` takes one list of inputs (which it may clear).
"""
from __future__ import annotations

import itertools
from typing import Callable

import torch
import torch.fx

from ember import metrics
from ember.aot.inputs import flatten_program
from ember.aot.meta import collect_metadata
from ember.aot.partition import default_partition
from ember.aot.runtime import CompiledGraph, LazyBackward, boxed, make_autograd_function
from ember.aot.trace import trace_inference, trace_joint

_graph_ids = itertools.count()


def nop(gm: torch.fx.GraphModule, example_inputs: list):
    """A compiler that runs the graph as is (the ``aot_eager`` compiler)."""
    return gm.forward


def _placeholder_vals(gm: torch.fx.GraphModule) -> list:
    return [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]


def aot_compile(gm: torch.fx.GraphModule, example_inputs: list, *,
                fw_compiler: Callable = nop,
                bw_compiler: Callable | None = None,
                inference_compiler: Callable | None = None,
                partition_fn: Callable = default_partition,
                decompositions: dict | None = None,
                keep_inference_input_mutations: bool = False,
                on_metadata: Callable | None = None) -> CompiledGraph:
    """Compile ``gm`` (called with ``example_inputs``) through functionalization and autograd.

    ``on_metadata(meta, static_input_indices)`` is called once the metadata is
    known, before any compiler runs (backends use it to learn the output layout).
    """
    bw_compiler = bw_compiler or fw_compiler
    inference_compiler = inference_compiler or fw_compiler
    with metrics.timed("aot"):
        prog = flatten_program(gm, list(example_inputs))
        meta = collect_metadata(prog.fn, prog.fake_args, prog.fake_mode,
                                keep_input_mutations=keep_inference_input_mutations)
        out_spec = prog._spec_box[0]
        if on_metadata is not None:
            on_metadata(meta, prog.static_input_indices or [])
        mutated_inputs = [i for i, info in enumerate(meta.input_info) if info.mutated]
        if meta.is_train:
            joint = trace_joint(prog.fn, prog.fake_args, meta, prog.fake_mode, decompositions)
            parts = partition_fn(joint, num_primals=len(prog.fake_args), num_fw_returns=meta.num_forward_returns)
            with metrics.timed("backend_compile"):
                fw = boxed(fw_compiler(parts.fw, _placeholder_vals(parts.fw)))
            bw = LazyBackward(parts.bw, bw_compiler, _placeholder_vals(parts.bw), prog.fake_mode)
            fn_cls = make_autograd_function(meta, fw, bw, parts.num_saved_tensors, parts.num_saved_symints)
            compiled = CompiledGraph(meta, lifted=prog.lifted, out_spec=out_spec, forward=fw,
                                     autograd_function=fn_cls, aliased_input_check=mutated_inputs)
            compiled.graphs = {"joint": joint, "forward": parts.fw, "backward": parts.bw}
        else:
            fw_gm = trace_inference(prog.fn, prog.fake_args, meta, prog.fake_mode, decompositions)
            with metrics.timed("backend_compile"):
                fw = boxed(inference_compiler(fw_gm, _placeholder_vals(fw_gm)))
            compiled = CompiledGraph(meta, lifted=prog.lifted, out_spec=out_spec, forward=fw,
                                     aliased_input_check=mutated_inputs)
            compiled.graphs = {"inference": fw_gm}
    return compiled
