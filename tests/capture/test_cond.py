"""torch.cond traced into the graph (ember/capture/variables/cond.py): both branches become
subgraphs of one ``higher_order.cond`` node; compared with eager (outputs, gradients)."""
import pytest
import torch

import ember
from ember_test_helpers import assert_same, check_same, clone_inputs, reset, stats

BACKENDS = ["eager", "aot_eager", "inductor"]
TOL = dict(rtol=1e-4, atol=1e-5)  # inductor may reorder float math


def _compare(fn, *args, backend, calls=((1,), (-1,))):
    """For each sign in ``calls``: inputs scaled by it (so a sum predicate takes both branches)."""
    compiled = ember.compile(fn, backend=backend)
    for (sign,) in calls:
        base = [a * sign if a.is_floating_point() else a for a in args]
        base = [a.detach().requires_grad_(orig.requires_grad) for a, orig in zip(base, args)]
        eager_args, comp_args = clone_inputs(base), clone_inputs(base)
        expected = fn(*eager_args)
        actual = compiled(*comp_args)
        assert_same(actual, expected, "output", **TOL)
        flat_e = expected if isinstance(expected, (tuple, list)) else [expected]
        flat_a = actual if isinstance(actual, (tuple, list)) else [actual]
        if any(t.requires_grad for t in flat_e):
            sum(t.sum() for t in flat_e).backward()
            sum(t.sum() for t in flat_a).backward()
            assert_same([a.grad for a in comp_args], [a.grad for a in eager_args], "grads", **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_predicate_both_branches_with_grads(backend):
    w = torch.randn(4, requires_grad=True)

    def fn(x, y):
        z = x * 2
        return torch.cond(x.sum() > 0, lambda a, b: (a.sin() * w, b + 1), lambda a, b: (a.cos(), b - z), (x, y))
    reset()
    _compare(fn, torch.rand(4, requires_grad=True), torch.randn(4, requires_grad=True), backend=backend)
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0
    assert stats()["graphs"] == 1  # the predicate's value does not recompile


def test_one_graph_and_no_recompile():
    def fn(x):
        return torch.cond(x[0] > 0, lambda t: t * 2, lambda t: t - 1, (x,)) + 1
    check_same(fn, torch.randn(3), graphs=1)
    check_same(fn, -torch.ones(3), graphs=1)


@pytest.mark.parametrize("pred", [True, False])
def test_constant_predicate_runs_one_branch(pred):
    def fn(x):
        return torch.cond(pred, lambda t: t.sin(), lambda t: t.cos(), [x])
    check_same(fn, torch.randn(3, requires_grad=True), graphs=1)


def test_shape_predicate_is_static():
    def fn(x):
        return torch.cond(x.shape[0] > 2, lambda t: t.sum(0, keepdim=True), lambda t: t[:1] * 3, (x,))
    check_same(fn, torch.randn(4), graphs=1)
    check_same(fn, torch.randn(2), graphs=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_in_module_closing_over_parameters_and_nested(backend):
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(3, 3)
            self.b = torch.nn.Linear(3, 3)

        def forward(self, x):
            def inner_true(t):
                return torch.cond(t.mean() > 0.5, lambda u: self.a(u), lambda u: self.b(u) * 2, (t,))
            return torch.cond(x.sum() > 0, inner_true, lambda t: self.b(t).relu(), (x,))

    m = M()
    for sign in (1, -1):
        x = torch.rand(2, 3) * sign
        expected = m(x)
        expected.sum().backward()
        eager_grads = [p.grad.clone() if p.grad is not None else None for p in m.parameters()]
        m.zero_grad(set_to_none=True)
        reset()
        actual = ember.compile(m, backend=backend)(x)
        assert_same(actual, expected)
        actual.sum().backward()
        assert_same([p.grad for p in m.parameters()], eager_grads)
        m.zero_grad(set_to_none=True)
        assert stats()["graph_breaks"] == 0


def test_under_no_grad():
    def fn(x):
        with torch.no_grad():
            return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t * 3, (x,))
    check_same(fn, torch.randn(3, requires_grad=True), graphs=1)


def test_branches_with_different_shapes_break_like_eager_refuses():
    def fn(x):
        return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t[:1], (x,))
    reset()
    x = torch.randn(3)
    try:
        expected = fn(x)
    except Exception as e:  # noqa: BLE001 — whatever eager does, ember does the same
        with pytest.raises(type(e)):
            ember.compile(fn, backend="eager")(x)
    else:
        assert_same(ember.compile(fn, backend="eager")(x), expected)


# ---- cases a probe found -------------------------------------------------------------------------

def test_branch_writing_a_frame_list_is_a_side_effect():
    # eager torch.cond refuses branches with side effects; ember must not apply both branches' writes
    def fn(x):
        seen = []
        torch.cond(x.sum() > 0, lambda a: (seen.append("t"), a * 2)[1], lambda a: (seen.append("e"), a * 3)[1],
                   (x,))
        return seen
    x = torch.rand(3) + 0.1
    try:
        expected = fn(x)
    except Exception as e:  # noqa: BLE001 — eager's own refusal: ember (running the call eagerly) agrees
        with pytest.raises(type(e)):
            ember.compile(fn, backend="eager")(x)
    else:
        assert ember.compile(fn, backend="eager")(x) == expected


@pytest.mark.parametrize("branch", [lambda a: a, lambda a: a.view(-1), lambda a: (a * 2, a * 2)[0].detach()],
                         ids=["operand", "view_of_operand", "detached"])
def test_branch_returning_an_alias_is_refused_like_eager(branch):
    def fn(x):
        return torch.cond(x.sum() > 0, branch, lambda a: a * 2, (x,))
    x = torch.rand(3) + 0.1
    try:
        expected = fn(x)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)):
            ember.compile(fn, backend="eager")(x)
    else:
        assert_same(ember.compile(fn, backend="eager")(x), expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_operand_no_branch_reads_gets_no_gradient(backend):
    y = torch.randn(3, requires_grad=True)

    def fn(x):
        return torch.cond(x.sum() > 0, lambda a: y * 2, lambda a: y.exp(), (x,))
    for f in (fn, ember.compile(fn, backend=backend)):
        x = torch.rand(3, requires_grad=True)
        f(x).sum().backward()
        assert x.grad is None


def test_explicit_empty_operands():
    w = torch.randn(3)

    def fn(x):
        return torch.cond(x.sum() > 0, lambda: w * 2, lambda: w - 1, ()) + x
    check_same(fn, torch.randn(3), graphs=1)
