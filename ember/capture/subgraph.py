"""Tracing a callable into a subgraph of the frame's graph (autograd.Function forward, cond branches).

The callable is inlined as usual, so its operations land at the end of the frame's graph; the nodes
it added are then copied into a GraphModule of their own. The caller checks that nothing escaped the
callable other than through its result (no side effects, no in-place change to the callable's
inputs) and decides what happens to the original nodes.
"""
from __future__ import annotations

import torch
import torch.fx as fx

from ember.capture.variables.base import unsupported


class Region:
    """Marks where a traced region starts; afterwards tells what it added and changed."""

    def __init__(self, tx, inputs: list):
        self.tx = tx
        self.graph = tx.output.graph
        self._before = set(self.graph.nodes)
        self._effects = side_effect_state(tx)
        from ember.capture.variables.containers import BIRTHS
        self._birth = next(BIRTHS)  # containers made before the region have smaller numbers
        self._writes = len(tx.side_effects.container_writes)
        self._inputs = [t for t in inputs if hasattr(t, "fake")]
        # An inference tensor (made under torch.inference_mode) has no version counter: with one
        # among the inputs, no in-place write at all may happen in the region (see check_pure).
        self._inference = any(isinstance(t.fake, torch.Tensor) and t.fake.is_inference() for t in self._inputs)
        self._versions = [None if self._inference and t.fake.is_inference() else t.fake._version
                          for t in self._inputs]

    def nodes(self) -> list[fx.Node]:
        """The nodes added since the start, in order (placeholders are inputs: not counted)."""
        return [n for n in self.graph.nodes if n not in self._before and n.op != "placeholder"]

    def check_pure(self, what: str, changed_ok=()) -> None:
        """``changed_ok``: fake tensors of inputs the region may change in place (``mark_dirty``)."""
        if side_effect_state(self.tx) != self._effects or any(
                born < self._birth for born in self.tx.side_effects.container_writes[self._writes:]):
            raise unsupported("EB0051", f"{what} has side effects")
        if any(v is not None and t.fake._version != v for t, v in zip(self._inputs, self._versions)
               if not any(t.fake is c for c in changed_ok)):
            raise unsupported("EB0051", f"{what} changes an input in place")
        if self._inference:
            from ember.capture.rerun import _writes
            if any(n.op not in ("call_function", "call_method") or _writes(n.target, n.kwargs) for n in self.nodes()):
                raise unsupported("EB0051", f"{what} writes in place with an inference tensor input (made under "
                                  "torch.inference_mode: no version counter to tell what it changed)")
        for n in self.nodes():
            if n.op not in ("call_function", "call_method") and not (
                    n.op == "get_attr" and n.target in self.tx.output.submodules):
                raise unsupported("EB0051", f"{what} uses {n.op} nodes")

    def external_inputs(self, body: list[fx.Node], known: set, extra_uses=(), symbols: bool = False) -> list[fx.Node]:
        """Tensors from before the region that ``body`` (or ``extra_uses``) reads and that are not in
        ``known``, in first-use order (``symbols``: symbolic numbers too)."""
        inside = set(body)
        found: list[fx.Node] = []

        def note(node):
            if node in inside or node in known or node in found:
                return
            value = node.meta.get("example_value")
            if not (isinstance(value, torch.Tensor)
                    or symbols and isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool))):
                raise unsupported("EB0051", "a traced region uses a non-tensor graph value")
            found.append(node)
        for n in body:
            for i in n.all_input_nodes:
                note(i)
        for node in extra_uses:
            note(node)
        return found

    def erase(self) -> None:
        """Remove the region's nodes (refused if something after it uses them)."""
        for n in reversed(self.nodes()):
            if n.users:
                raise unsupported("EB0051", "a value computed in a traced region escapes it")
            self.graph.erase_node(n)


def side_effect_state(tx):
    se = tx.side_effects
    return (tuple((k, id(v[2])) for k, v in se._attrs.items()),
            tuple((k, id(v[2])) for k, v in se._globals.items()),
            tuple(se._containers), len(se._calls), len(se.hooks), len(se.removed_hooks))


def extract(body: list[fx.Node], inputs: list[fx.Node | None], outputs: list[fx.Node],
            submodules: dict | None = None) -> fx.GraphModule:
    """GraphModule ``(*inputs) -> tuple(outputs)`` computing ``body``. An input of None is a placeholder
    the body does not use; an input listed twice is read from its first placeholder. ``submodules``:
    the frame graph's GraphModules, for the ``get_attr`` nodes of a nested cond."""
    g = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    for i, node in enumerate(inputs):
        ph = g.placeholder(f"arg{i}")
        if node is not None and node not in env:
            ph.meta.update({k: v for k, v in node.meta.items() if k == "example_value"})
            env[node] = ph
    for n in body:
        env[n] = g.node_copy(n, lambda x: env[x])
    g.output(tuple(env[o] for o in outputs))
    root = torch.nn.Module()
    for n in body:
        if n.op == "get_attr":
            root.add_module(n.target, submodules[n.target])
    return fx.GraphModule(root, g)


class GradDisabled:
    """Grad mode off while tracing, without a graph node (the region runs under no_grad anyway)."""

    def __enter__(self):
        self.prior = torch.is_grad_enabled()
        torch._C._set_grad_enabled(False)

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.prior)
