"""A 0-dim integer tensor input read as an int by an operation (a size, a length): the value is
specialised and guarded (capture/scalar_inputs.py), as torch.compile keeps such ops in its graph
(longformer passes its number of global tokens on as such a tensor)."""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, check_same, compile, stats


def sizes_from_tensor(x, n):
    z = x.new_zeros(2, n, 3)
    return z.sum() + x.narrow(-1, 0, n).sum(), torch.arange(n) * 2, x[:, :4].reshape(n, -1)


def test_size_arguments_from_a_scalar_input_in_one_graph():
    x = torch.randn(3, 4)
    check_same(sizes_from_tensor, x, torch.tensor(2), graphs=1)
    check_same(sizes_from_tensor, x, torch.tensor(3, dtype=torch.int32), graphs=1)


def test_sizes_in_a_list_argument():
    def f(x, n):
        return x.new_ones((n, 2)) * x.sum(), x.view([n, -1])
    check_same(f, torch.randn(2, 6), torch.tensor(3), graphs=1)


def test_another_value_recompiles_then_breaks_instead_of_a_graph_per_value():
    counter = CompileCounter()
    fn = compile(sizes_from_tensor, backend=counter)
    x = torch.randn(3, 4)
    for v in (2, 2, 4, 1, 3, 4):
        n = torch.tensor(v)
        assert_same(fn(x, n), sizes_from_tensor(x, n))
    if not REFERENCE:
        # the first value is specialised; once it changes, the ops break the graph
        assert counter.frame_count <= 8


def test_value_written_by_the_frame_is_not_the_input_value():
    def f(x, n):
        n.add_(1)  # the size below is the new value
        return x.new_zeros(n, 2)
    n = torch.tensor(2)
    check_same(f, torch.randn(3), n, graphs=None)


def test_value_written_through_an_alias():
    def f(x, buf, n):
        buf.add_(1)  # n is buf[0]: its value changes before the read
        return x.new_zeros(n, 2), buf
    buf = torch.tensor([2, 5])
    x = torch.randn(3)
    counter = CompileCounter()
    fn = compile(f, backend=counter)
    b1, b2 = buf.clone(), buf.clone()
    assert_same(fn(x, b1, b1[0]), f(x, b2, b2[0]))


def test_computed_tensor_still_breaks_and_matches():
    def f(x):
        n = (x > 0).sum()
        return x.new_zeros(n + 1)
    x = torch.randn(5)
    fn = compile(f, backend="eager")
    assert_same(fn(x), f(x))
    assert_same(fn(-x.abs()), f(-x.abs()))


def test_float_and_grad_inputs_are_left_alone():
    def f(x, n):
        return x * n, x.new_full((2,), n)
    x = torch.randn(3)
    # (not fullgraph: there `.item()` values are unbacked symbols, and new_full with an unbacked
    # fill value leaves a pending symbol in torch's fake kernels)
    check_same(f, x, torch.tensor(2.5, dtype=torch.float64), graphs=None, fullgraph=False)


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_through_the_aot_layer_with_grad(backend):
    def f(x, n):
        return (x.narrow(0, 0, n) * 2).sum() + x.new_zeros(n).sum()
    x = torch.randn(5, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    fn = compile(f, backend=backend)
    out = fn(x, torch.tensor(3))
    ref = f(xe, torch.tensor(3))
    out.backward()
    ref.backward()
    assert_same(out, ref)
    assert_same(x.grad, xe.grad)
    if not REFERENCE:
        assert stats()["graph_breaks"] == 0
