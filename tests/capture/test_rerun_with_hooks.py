"""A graph that raises while the program's saved-tensor hooks are active is not rerun eagerly.

The entry reruns a frame eagerly when its graph raises (capture/rerun.py), on the premise that
the partial run left nothing behind. Saved-tensor hooks (and torch function / dispatch modes)
are called by the graph's ops: they ran during the partial run, and what the graph raised may be
the program's own control flow. A non-reentrant checkpoint stops its recomputation early by
raising from its pack hook; the rerun swallowed that, recomputed again, and checkpoint failed
("Unexpected state: target_frame.early_stop is set") in a backward that works in eager.
"""
import pytest
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

from ember_test_helpers import assert_same, compile


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_submodules_inside_checkpoint(backend):
    torch.manual_seed(0)
    lin1, lin2 = nn.Linear(8, 8, bias=False), nn.Linear(8, 8, bias=False)

    def block(x, f1, f2):
        return x + f2(f1(x))

    x_ref = torch.randn(4, 8, requires_grad=True)
    ref = block(x_ref, lin1, lin2)
    ref.sum().backward()
    grads_ref = [lin1.weight.grad.clone(), lin2.weight.grad.clone()]
    lin1.zero_grad(), lin2.zero_grad()

    c1, c2 = compile(lin1, backend=backend), compile(lin2, backend=backend)
    x = x_ref.detach().clone().requires_grad_(True)
    out = checkpoint(block, x, c1, c2, use_reentrant=False)
    out.sum().backward()
    assert_same(out, ref)
    assert_same(x.grad, x_ref.grad)
    assert_same([lin1.weight.grad, lin2.weight.grad], grads_ref)


def test_failing_graph_under_saved_tensor_hooks_runs_hooks_once():
    def fn(x, idx):
        y = x.sin()
        return y[idx] * 2  # out of range: raises after sin saved its input

    def run(f):
        packed = []

        def pack(t):
            packed.append(t.shape)
            return t

        x = torch.randn(4, requires_grad=True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with pytest.raises(IndexError):
                f(x, torch.tensor([7]))
        return packed

    assert run(compile(fn, backend="eager")) == run(fn)


def test_failing_graph_without_hooks_still_matches_eager():
    # the rerun itself (no hooks active) keeps eager's exception
    def fn(x, idx):
        return x.sin()[idx]

    c = compile(fn, backend="eager")
    with pytest.raises(IndexError):
        c(torch.randn(4), torch.tensor([9]))
    assert_same(c(torch.randn(4).abs(), torch.tensor([1])).shape, torch.Size([1]))


class _Counting(torch.Tensor):
    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        _Counting.calls += 1
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_failing_graph_with_subclass_input_runs_its_torch_function_once(backend):
    # the subclass's __torch_function__ ran for the ops before the failing one: no rerun
    def fn(x, idx):
        return x.sin()[idx] * 2

    def run(f):
        _Counting.calls = 0
        with pytest.raises(IndexError):
            f(torch.randn(4).as_subclass(_Counting), torch.tensor([7]))
        return _Counting.calls

    assert run(compile(fn, backend=backend)) == run(fn)
