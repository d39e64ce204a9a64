"""Data-dependent values as unbacked symbols (issue 10 parts 4 and 5).

With ``config.capture_scalar_outputs`` the value of ``.item()``/``.tolist()`` of a computed tensor
is an unbacked symbol in the graph, and with ``config.capture_dynamic_output_shape_ops`` so is the
size of ``nonzero``/boolean-mask results: a value that only flows on (into ops, out of the frame)
keeps one graph for every value; a branch on it is a graph break with a clear reason, never a guard
on its value. Facts learnt about such symbols (``torch._check``, a size is not negative) become
``_assert_scalar`` nodes in the graph (``config.runtime_asserts``). Both flags are off by default,
as in torch (then each of these is a graph break). Every test compares with eager.
"""
from __future__ import annotations

import pytest
import torch

import ember
from ember_test_helpers import REFERENCE, assert_same, compile, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own config flags (torch reads torch._dynamo.config)")


@pytest.fixture(autouse=True)
def _data_dependent():
    with ember.config.patch(capture_scalar_outputs=True, capture_dynamic_output_shape_ops=True):
        yield


class Graphs:
    """A backend that counts graphs and keeps them."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def targets(self) -> list:
        return [n.target for gm in self.graphs for n in gm.graph.nodes]


def _run(fn, inputs, backend="eager"):
    compiled = compile(fn, backend=backend)
    for args in inputs:
        assert_same(compiled(*args), fn(*args))
    return compiled


def test_item_flowing_into_ops_is_one_graph_for_every_value():
    backend = Graphs()
    _run(lambda x, y: x * y.sum().item() + 1, [(torch.randn(3), torch.tensor([v, 2.0])) for v in (1.0, 3.0, -7.5)],
         backend)
    assert len(backend.graphs) == 1 and stats()["graph_breaks"] == 0
    assert "item" in backend.targets()


def test_item_returned_from_the_frame():
    _run(lambda x: (x.sum().item(), x.max().item() * 2), [(torch.randn(4),), (torch.randn(4),)])
    assert stats()["graphs"] == 1 and stats()["graph_breaks"] == 0


def test_int_item_as_a_size():
    backend = Graphs()
    _run(lambda x: torch.ones(x.argmax().item() + 1) * x.sum(),
         [(torch.tensor([1.0, 5.0, 2.0]),), (torch.tensor([9.0, 5.0, 2.0]),), (torch.tensor([0.0, 1.0, 2.0]),)],
         backend)
    assert len(backend.graphs) == 1


def test_branch_on_item_breaks_the_graph_and_takes_each_branch():
    def fn(x, y):
        n = y.sum().item()
        if n > 2:
            return x + 1
        return x - 1

    _run(fn, [(torch.randn(3), torch.tensor([1.0, 2.0])), (torch.randn(3), torch.tensor([0.0, 1.0])),
              (torch.randn(3), torch.tensor([5.0, 1.0]))])
    assert stats()["graph_breaks"] == 1
    assert stats()["recompiles"] == 0  # no guard on the value


def test_branch_on_item_reason_and_fullgraph():
    def fn(x):
        if x.sum().item() > 0:
            return x + 1
        return x

    report = str(ember.explain(fn)(torch.randn(3)))
    assert "data-dependent" in report
    with pytest.raises(ember.Unsupported, match="data-dependent"):
        compile(fn, fullgraph=True)(torch.randn(3))


def test_tolist():
    backend = Graphs()
    _run(lambda x: [v * 2 for v in (x + 1).tolist()], [(torch.tensor([1, 2, 3]),), (torch.tensor([4, 5, 6]),)],
         backend)
    assert len(backend.graphs) == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_dynamic_output_shapes(backend):
    fn = lambda x: (x[x > 0].sum() * 2, x.nonzero().shape[0] * x, torch.masked_select(x, x < 0).mean())  # noqa: E731
    _run(fn, [(torch.tensor([1.0, -5.0, 2.0]),), (torch.tensor([-9.0, 5.0, 2.0]),),
              (torch.tensor([-1.0, -5.0, 2.0]),)], backend)
    assert stats()["graphs"] == 1 and stats()["graph_breaks"] == 0


def test_flags_off_break_as_torch_does():
    with ember.config.patch(capture_scalar_outputs=False, capture_dynamic_output_shape_ops=False):
        _run(lambda x: x * x.sum().item(), [(torch.randn(3),)])
        assert stats()["graph_breaks"] == 1
        ember.reset()
        _run(lambda x: x[x > 0] * 2, [(torch.tensor([1.0, -5.0, 2.0]),)])
        assert stats()["graph_breaks"] == 1


def test_aot_gradients_through_item():
    def fn(x, w):
        scale = w.detach().abs().max().item()
        return (x * w * scale).sum()

    compiled = compile(fn, backend="aot_eager")
    for seed in range(3):
        torch.manual_seed(seed)
        x, w = torch.randn(4), torch.randn(4, requires_grad=True)
        w2 = w.detach().clone().requires_grad_()
        fn(x, w).backward()
        compiled(x, w2).backward()
        assert_same(w2.grad, w.grad)
    assert stats()["graphs"] == 1


def test_runtime_asserts_in_the_graph_and_when_violated():
    def fn(x):
        i = x.argmax().item()
        torch._check(i < 2)
        return x.narrow(0, 0, i) * 2

    backend = Graphs()
    compiled = compile(fn, backend=backend)
    x = torch.tensor([1.0, 5.0, 2.0])
    assert_same(compiled(x), fn(x))
    assert torch.ops.aten._assert_scalar.default in backend.targets()
    bad = torch.tensor([1.0, 5.0, 9.0])
    with pytest.raises(RuntimeError) as eager_error:
        fn(bad)
    with pytest.raises(RuntimeError) as compiled_error:
        compiled(bad)
    assert str(compiled_error.value) == str(eager_error.value)  # (the frame reran eagerly)


def test_runtime_asserts_can_be_turned_off():
    backend = Graphs()
    with ember.config.patch(runtime_asserts=False):
        _run(lambda x: x.narrow(0, 0, x.argmax().item()) * 2, [(torch.tensor([1.0, 5.0, 2.0]),)], backend)
    assert torch.ops.aten._assert_scalar.default not in backend.targets()


def test_input_scalar_item_stays_backed():
    """A 0-d input's ``.item()`` is read with the guards (a backed symbol once it changes), not an
    unbacked one: a branch on it needs no break."""
    def fn(x, t):
        return x + 1 if t.item() > 0 else x - 1

    _run(fn, [(torch.randn(2), torch.tensor(v)) for v in (1.0, 2.0, -3.0, 4.0)])
    assert stats()["graph_breaks"] == 0


def test_builtin_needing_the_value_breaks_at_its_line():
    """``range()`` of an unbacked value inside a generator expression: the builtin's refusal is a
    graph break (the graph before it keeps ``item``), not an exception of the program."""
    fn = lambda x: sum(x * i for i in range(int(x.argmax().item()) + 1))  # noqa: E731
    _run(fn, [(torch.tensor([1.0, 5.0, 2.0]),), (torch.tensor([9.0, 5.0, 2.0]),), (torch.tensor([0.0, 1.0, 7.0]),)])
    assert stats()["graph_breaks"] == 1 and stats()["graphs"] >= 2
