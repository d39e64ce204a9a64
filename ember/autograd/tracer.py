"""Trace one backward into an FX graph while running it (the first backward of a structure).

The tracer runs the engine's schedule (``walk``) itself, with real tensors, and records every
step in an FX graph: each gradient has an FX value and a real value. Running for real gives
what the graph must bake in (which gradients are defined, their layouts) without guessing, and
this first backward's side effects happen exactly once, in the engine's order. The graph:

    inputs:  the root gradients, the saved tensors of inlined AOT backwards, the existing
             ``.grad`` of leaves (accumulated in place, as eager) and of retaining tensors
    body:    ``call_node`` for C++ Nodes and ``autograd.Function`` Nodes (opaque: the real Node
             runs), the AOT backward graphs copied in, ``call_hook`` for tensor hooks, ``add``
             where gradients meet, ``add_`` into an existing ``.grad`` (``accumulate_grad`` for a leaf with post-accumulate hooks:
             accumulation and hooks at the engine's place)
    outputs: new ``.grad`` values (leaves whose ``.grad`` was None, retained gradients), the
             gradients ``torch.autograd.grad`` returns

The runtime (``ember.autograd.engine``) gathers the inputs the same way, calls the compiled
graph and assigns its outputs.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
import torch.fx as fx

from ember.autograd import ops
from ember.autograd.nodes import expected_outputs, run_cpp, run_function
from ember.autograd.walk import ACC, AOT, CPP, Walk

_call_node = torch.ops.ember_autograd.call_node.default
_call_hook = torch.ops.ember_autograd.call_hook.default
_accumulate_grad = torch.ops.ember_autograd.accumulate_grad.default


@dataclass
class Traced:
    gm: fx.GraphModule
    example_inputs: list
    inputs: list            # how the runtime gathers each input: ("root", j) | ("saved", pos, k) |
                            # ("unversioned", pos, k) | ("grad", pos) | ("retained", pos, t)
    outputs: list           # what each output is: ("grad", pos) | ("retain", pos, t) | ("capture", j) |
                            # ("done",) (an accumulate_grad call's token)
    hooks: list             # (pos, t or None, hook index) per call_hook, in RunContext.hooks order
    mutating_hooks: bool = False  # post-accumulate hooks in the graph (they may change what it reads)
    inlined: int = 0        # AOT backwards copied in
    opaque: int = 0         # Nodes called as they are
    captured: dict = field(default_factory=dict)  # j -> real gradient (this run's torch.autograd.grad result)


def can_inline(node, info, present: list) -> bool:
    if hasattr(node, "final_checks"):
        return False
    if getattr(node, "symints", ()) or info.bw is None or getattr(info.bw, "gm", None) is None:
        return False
    arrived = [present[j] for j in info.tangent_positions]
    return all(arrived) or any(arrived) and not info.none_aware or any(arrived) and info.prunable


class Tracer:
    def __init__(self, w: Walk, root_grads: list):
        self.w = w
        self.graph = fx.Graph()
        self.root = torch.nn.Module()
        self.examples: list = []
        self.inputs: list = []
        self.outputs: list = []  # (fx node, plan)
        self.hooks: list = []
        self.captured: dict = {}
        self.inlined = self.opaque = 0
        self.mutating_hooks = False
        n = len(w.order)
        self.buffers = [None] * n
        for j, ((pos, nr), g) in enumerate(zip(w.roots, root_grads)):
            if g is None:
                continue
            self._deliver(pos, nr, (self._input(("root", j), g), g))

    # -- graph helpers
    def _input(self, plan, value) -> fx.Node:
        node = self.graph.placeholder(f"in{len(self.inputs)}")
        node.meta["val"] = value
        self.inputs.append(plan)
        self.examples.append(value.detach() if value.requires_grad else value)
        return node

    def _slots(self, pos: int) -> list:
        if self.buffers[pos] is None:
            node = self.w.order[pos]
            k = 1 if self.w.kinds[pos] == ACC else len(node._input_metadata)
            self.buffers[pos] = [None] * k
        return self.buffers[pos]

    def _deliver(self, pos: int, nr: int, pair) -> None:
        slots = self._slots(pos)
        if slots[nr] is None:
            slots[nr] = pair
        else:  # gradients meeting at one input: summed in arrival order, as the engine's InputBuffer
            (f0, v0), (f1, v1) = slots[nr], pair
            slots[nr] = (self.graph.call_function(torch.ops.aten.add.Tensor, (f0, f1)), v0 + v1)

    # -- the run
    def run(self) -> Traced:
        w = self.w
        for pos, node in enumerate(w.order):
            slots = self._slots(pos)
            kind = w.kinds[pos]
            if kind == ACC:
                self._tensor_hooks(pos, None, node.variable, slots, 0)
            else:
                for t_idx, t in enumerate(w.hooked[pos]):
                    self._tensor_hooks(pos, t_idx, t, slots, t.output_nr)
                    if t.retains_grad:
                        self._retain(pos, t_idx, t, slots[t.output_nr])
            for nr, pair in enumerate(slots):
                j = w.captures.get((pos, nr))
                if j is not None:
                    self.outputs.append((pair[0] if pair else None, ("capture", j)))
                    self.captured[j] = pair[1] if pair else None
            if not w.runs[pos]:
                continue
            if kind == ACC:
                if w.accumulate[pos]:
                    self._accumulate(pos, node, slots[0])
                continue
            if kind == AOT and can_inline(node, node._forward_cls._ember_backward, [s is not None for s in slots]):
                outs = self._inline(pos, node, slots)
            else:
                outs = self._opaque(pos, node, kind, slots)
            for (m, nr), (target, _), pair in zip(node.next_functions, w.edges[pos], outs):
                if m is not None and target >= 0 and pair is not None and w.runs[target] | (
                        (target, nr) in w.captures):
                    self._deliver(target, nr, pair)
        outs = [f for f, _ in self.outputs]
        self.graph.output(tuple(outs))
        gm = fx.GraphModule(self.root, self.graph, class_name="CompiledAutogradGraph")
        return Traced(gm=gm, example_inputs=self.examples, inputs=self.inputs,
                      outputs=[p for _, p in self.outputs], hooks=self.hooks,
                      inlined=self.inlined, opaque=self.opaque, captured=self.captured,
                      mutating_hooks=self.mutating_hooks)

    def _tensor_hooks(self, pos: int, t_idx, t: torch.Tensor, slots: list, nr: int) -> None:
        hooks = t._backward_hooks
        if not hooks or slots[nr] is None:
            return
        f, v = slots[nr]
        for h_idx, hook in enumerate(list(hooks.values())):
            out = ops.normalize(ops.run_tensor_hook(hook, v), [v])
            spec = ops.add_spec(ops.HookCallSpec(len(self.hooks), ops.TensorMeta.of(out)))
            self.hooks.append((pos, t_idx, h_idx))
            f = self.graph.call_function(_call_hook, (spec, f))
            v = out
        slots[nr] = (f, v)

    def _retain(self, pos: int, t_idx: int, t: torch.Tensor, pair) -> None:
        if pair is None:
            return
        f, v = pair
        if t.grad is None:
            f_new = self.graph.call_function(torch.ops.aten.clone.default, (f,),
                                             {"memory_format": torch.contiguous_format})
            t.grad = v.clone(memory_format=torch.contiguous_format)
        else:
            old = self._input(("retained", pos, t_idx), t.grad)
            f_new = self.graph.call_function(torch.ops.aten.add.Tensor, (old, f))
            t.grad = t.grad + v
        self.outputs.append((f_new, ("retain", pos, t_idx)))

    def _accumulate(self, pos: int, node, pair) -> None:
        if pair is None:
            return
        f, v = pair
        var = node.variable
        if var._post_accumulate_grad_hooks:  # accumulated and hooks called in the graph, in order
            spec = ops.add_spec(ops.AccumulateSpec(pos))
            done = self.graph.call_function(_accumulate_grad, (spec, f))
            self.outputs.append((done, ("done",)))
            self.mutating_hooks = True
            ops.accumulate_into(var, v)
            return
        if var.grad is None:
            from ember.autograd.engine import assign_new_grad
            assign_new_grad(var, v, [i for i in self.examples])
            self.outputs.append((f, ("grad", pos)))
        else:
            old = self._input(("grad", pos), var.grad)
            self.graph.call_function(torch.ops.aten.add_.Tensor, (old, f))
            with torch.no_grad():
                var.grad.add_(v)

    def _opaque(self, pos: int, node, kind: str, slots: list) -> list:
        values = [s[1] if s is not None else None for s in slots]
        if kind == CPP:
            def run(n, grads, expected=expected_outputs(node)):
                return run_cpp(n, grads, expected)
        elif kind == AOT:
            materialize = not node._forward_cls._ember_backward.none_aware

            def run(n, grads, materialize=materialize):
                return run_function(n, grads, materialize)
        else:
            def run(n, grads):
                return run_function(n, grads)
        taken = [v for v in values if v is not None]
        outs = []
        for o in run(node, values):
            if o is not None:
                o = ops.normalize(o, taken)
                taken.append(o)
            outs.append(o)
        defined = tuple(o is not None for o in outs)
        metas = [ops.TensorMeta.of(o) for o in outs if o is not None]
        spec = ops.add_spec(ops.NodeCallSpec(pos, run, defined, metas))
        call = self.graph.call_function(_call_node, (spec, [s[0] if s is not None else None for s in slots]))
        self.opaque += 1
        result, k = [], 0
        for o in outs:
            if o is None:
                result.append(None)
            else:
                result.append((self.graph.call_function(operator.getitem, (call, k)), o))
                k += 1
        return result

    def _inline(self, pos: int, node, slots: list) -> list:
        info = node._forward_cls._ember_backward
        saved = self.w.saved[pos]
        args_f, args_v = [], []
        for k, t in enumerate(saved):
            if t is None:
                args_f.append(None)
                args_v.append(None)
                continue
            args_f.append(self._input(("saved", pos, k), t))
            args_v.append(t)
        for k, t in enumerate(getattr(node, "unversioned", ())):
            args_f.append(self._input(("unversioned", pos, k), t))
            args_v.append(t)
        present = 0
        for jj, j in enumerate(info.tangent_positions):
            if slots[j] is not None:
                present |= 1 << jj
        runner = None
        if info.prunable and present != info.plan.all_tangents:
            runner = info.backward_for(present)
        for jj, j in enumerate(info.tangent_positions):
            if slots[j] is not None:
                f, v = slots[j]
                args_f.append(self.graph.call_method("contiguous", (f,)))
                args_v.append(v.contiguous())
                continue
            # absent: zeros, as the AOT backward (or the engine, materializing) makes them
            if info.prunable:
                shape, dtype, device = info.plan.tangent_meta[jj] or node.tangent_meta[jj]
            else:
                m = node._input_metadata[j]
                shape, dtype, device = tuple(m.shape), m.dtype, m.device
            args_f.append(self.graph.call_function(torch.zeros, (tuple(shape),),
                                                   {"dtype": dtype, "device": device}))
            args_v.append(torch.zeros(tuple(shape), dtype=dtype, device=device))
        bw = info.bw
        if runner is not None:
            bw, positions = runner
            args_f = [args_f[i] for i in positions]
            args_v = [args_v[i] for i in positions]
        with torch.no_grad():
            real = list(bw(list(args_v)))
        gm = bw.gm
        val_map = {}
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(args_f):
            raise RuntimeError("ember compiled autograd: an AOT backward graph's inputs do not match its saved values")
        for p, a in zip(placeholders, args_f):
            val_map[p] = a
        for n in gm.graph.nodes:
            if n.op == "get_attr":
                name = f"aot{pos}_{n.target.replace('.', '_')}"
                obj = gm
                for part in n.target.split("."):
                    obj = getattr(obj, part)
                if isinstance(obj, torch.Tensor) and not isinstance(obj, torch.nn.Parameter):
                    self.root.register_buffer(name, obj)
                else:
                    setattr(self.root, name, obj)
                val_map[n] = self.graph.get_attr(name)
        out = self.graph.graph_copy(gm.graph, val_map)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        if runner is not None:  # (inputs that get zeros rather than None, see ember.aot.runtime)
            for i, shape, dtype, device in getattr(node, "zero_if_absent", ()):
                if out[i] is None:
                    out[i] = self.graph.call_function(torch.zeros, (tuple(shape),), {"dtype": dtype, "device": device})
                    real[i] = torch.zeros(tuple(shape), dtype=dtype, device=device)
        self.inlined += 1
        result = []
        for o_f, o_v in zip(out, real):
            if o_f is None or o_v is None:
                result.append(None)
            else:
                result.append((o_f, o_v))
        return result
