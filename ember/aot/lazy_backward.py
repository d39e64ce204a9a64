"""The backward graph of a compiled forward, compiled on the first ``backward()``, for the layout the
compiled forward really saved its tensors in.

A backend may lay out the tensors the forward saves otherwise than tracing did: Inductor saves a
convolution's activations channels-last (on the CPU always, dynamic sizes included). The backward
graph's own ops were traced for the traced layout (an ``aten.view`` of a tensor that was contiguous),
so:

* compiled, the backward is compiled for the layouts of the first call's saved tensors: by their
  strides when the sizes are static; with symbolic sizes, as the same dense order of dimensions
  with strides written in the symbolic sizes (a compiled forward lays a tensor out in one order
  for every size), when every such tensor is dense;
* run uncompiled (the backend failed, or compiling it for symbolic sizes would have assumed more
  about the sizes than the forward's guards), the saved tensors whose layout differs from the
  traced one are first copied into the traced layout, so every traced op sees what it saw.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from ember import metrics
from ember.config import config as _config
from ember.locking import compile_lock

__all__ = ["LazyBackward", "boxed", "dense_order"]


def boxed(compiled: Callable) -> Callable[[list], Any]:
    """Normalise a compiler's result to the boxed convention ``f(list_of_args)``."""
    if getattr(compiled, "_boxed_call", False):
        return compiled

    def call(args: list):
        return compiled(*args)
    call._boxed_call = True
    return call


def _hint(d) -> int:
    return d.node.hint if isinstance(d, torch.SymInt) else d


def dense_order(shape, stride) -> tuple[int, ...] | None:
    """The dimensions from innermost to outermost when a tensor of ``shape`` and ``stride`` (ints)
    is dense in that order, else None. Dimensions of size 1 may have any stride."""
    order = tuple(sorted(range(len(shape)), key=lambda d: (stride[d], shape[d])))
    return order if any(s == 0 for s in shape) or _dense_in(shape, stride, order) else None


def _traced_order(ex) -> tuple[int, ...] | None:
    """``dense_order`` of a traced example by its sizes' hints; None without them (an unbacked size)."""
    if not isinstance(ex, torch.Tensor) or ex.layout != torch.strided:
        return None
    shape, stride = tuple(map(_hint, ex.shape)), tuple(map(_hint, ex.stride()))
    if any(v is None for v in (*shape, *stride)):
        return None
    return dense_order(shape, stride)


def _dense_in(shape, stride, order) -> bool:
    expected = 1
    for d in order:
        if shape[d] != 1 and stride[d] != expected:
            return False
        expected *= shape[d]
    return True


def _dense_copy(t: torch.Tensor, order: tuple[int, ...]) -> torch.Tensor:
    """``t``'s values in a new tensor dense in ``order`` (innermost first)."""
    outer_first = list(reversed(order))
    inverse = [outer_first.index(d) for d in range(t.dim())]
    return t.permute(outer_first).contiguous().permute(inverse)


def _symbolic(values) -> bool:
    return any(isinstance(v, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in (*v.shape, *v.stride()))
               or isinstance(v, torch.SymInt) for v in values or ())


def _layouts_agree(examples, args) -> bool:
    """Whether the saved tensors have the strides the (symbolic) examples say, by their hints (no
    guards: comparing SymInts would add some)."""
    for ex, real in zip(examples, args):
        if isinstance(ex, torch.Tensor) and isinstance(real, torch.Tensor):
            if tuple(map(_hint, ex.shape)) != tuple(real.shape) or tuple(map(_hint, ex.stride())) != real.stride():
                return False
    return True


def _shape_env_state(env) -> tuple:
    if env is None:
        return ()
    return (len(env.guards), len(env.replacements), len(env.deferred_runtime_asserts),
            tuple(sorted((str(k), str(v)) for k, v in env.var_to_range.items())))


class LazyBackward:
    """The backward graph, compiled on the first ``backward()``."""

    def __init__(self, gm: torch.fx.GraphModule, compiler: Callable, example_inputs: list, fake_mode):
        self.gm = gm
        self.compiler = compiler
        self.example_inputs = example_inputs
        self.fake_mode = fake_mode
        self.compiled: Callable | None = None
        # the layout each saved tensor had when the graph was traced (None: not dense, or no tensor)
        self.traced_orders = [_traced_order(ex) for ex in example_inputs]

    def __call__(self, args: list):
        if self.compiled is None:
            with compile_lock:
                if self.compiled is None:  # (not compiled by another thread meanwhile)
                    self.compiled = self._first(args)
                    self.example_inputs = None
        return self.compiled(args)

    def _first(self, args: list) -> Callable[[list], Any]:
        symbolic = _symbolic(self.example_inputs)
        if not symbolic:
            self._match_layouts(args)
            with metrics.timed("aot"), metrics.timed("backend_compile"):
                return self._compile()
        env = self.fake_mode.shape_env
        before = _shape_env_state(env)
        if not _layouts_agree(self.example_inputs, args) and not self._match_orders(args):
            return self._uncompiled()
        with metrics.timed("aot"), metrics.timed("backend_compile"):
            compiled = self._compile()
        # The forward's guards were fixed when it compiled: a backward compile (or layout) that
        # assumes more about the sizes (a new guard or specialisation in the ShapeEnv) would be
        # reused for calls that break the assumption, so then the graph runs uncompiled (it is
        # correct for every size).
        return compiled if _shape_env_state(env) == before else self._uncompiled()

    def _uncompiled(self) -> Callable[[list], Any]:
        """The traced graph itself, fed its saved tensors in the layouts it was traced for."""
        gm, orders = self.gm, self.traced_orders

        def run(args: list):
            args = list(args)
            for i, order in enumerate(orders):
                if order is not None and i < len(args):
                    a = args[i]
                    if isinstance(a, torch.Tensor) and a.layout == torch.strided and not _dense_in(a.shape, a.stride(), order):
                        args[i] = _dense_copy(a, order)
            return gm(*args)
        run._boxed_call = True
        return run

    def _set_example(self, i: int, example, placeholders) -> None:
        self.example_inputs[i] = example
        if i < len(placeholders) and "val" in placeholders[i].meta:
            placeholders[i].meta["val"] = example

    def _match_layouts(self, args: list) -> None:
        """Example inputs with the strides the saved tensors really have: a compiled forward may lay
        them out otherwise than tracing did (inductor saves a conv's input channels-last), and a
        backward compiled for the traced strides would assert on them."""
        if self.fake_mode is None:
            return
        self.example_inputs = list(self.example_inputs)
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for i, (ex, real) in enumerate(zip(list(self.example_inputs), args)):
            if not (isinstance(ex, torch.Tensor) and isinstance(real, torch.Tensor)):
                continue
            if ex.shape != real.shape or ex.stride() == real.stride() and ex.storage_offset() == real.storage_offset():
                continue
            with self.fake_mode:
                self._set_example(i, torch.empty_strided(real.shape, real.stride(), dtype=ex.dtype, device=ex.device,
                                                         requires_grad=ex.requires_grad), placeholders)

    def _match_orders(self, args: list) -> bool:
        """Symbolic examples laid out as the saved tensors are: the same dense order of dimensions,
        strides written in the symbolic sizes. False (nothing changed) where a saved tensor whose
        layout differs is not dense, or its rank differs."""
        if self.fake_mode is None:
            return False
        wanted = {}
        for i, (ex, real) in enumerate(zip(self.example_inputs, args)):
            if not (isinstance(ex, torch.Tensor) and isinstance(real, torch.Tensor)):
                continue
            if tuple(map(_hint, ex.stride())) == real.stride() and tuple(map(_hint, ex.shape)) == tuple(real.shape):
                continue
            order = dense_order(tuple(real.shape), real.stride())
            if order is None or ex.dim() != real.dim() or real.storage_offset() != 0:
                return False
            wanted[i] = order
        self.example_inputs = list(self.example_inputs)
        placeholders = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        for i, order in wanted.items():
            ex = self.example_inputs[i]
            stride: list[Any] = [0] * ex.dim()
            acc: Any = 1
            for d in order:
                stride[d] = acc
                acc = acc * ex.shape[d]
            with self.fake_mode:
                self._set_example(i, torch.empty_strided(ex.shape, stride, dtype=ex.dtype, device=ex.device,
                                                         requires_grad=ex.requires_grad), placeholders)
        return True

    def _compile(self) -> Callable[[list], Any]:
        try:
            return boxed(self.compiler(self.gm, self.example_inputs))
        except Exception as e:
            if _config.strict:
                raise
            # The forward has run: the backward cannot fall back to eager, but the backward graph
            # itself (aten ops, already partitioned) runs as is, with the same result.
            import warnings
            warnings.warn(f"ember: compiling the backward graph failed ({type(e).__name__}: {e}); "
                          f"running it uncompiled (set EMBER_STRICT=1 to raise)")
            return self._uncompiled()
