"""nn.Module patterns a probe found wrong, crashing, or stuck in eager (each compared with eager)."""
import copy

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import assert_same, reset, stats


def test_in_place_write_through_a_detached_parameter():
    # what F.embedding(max_norm=...) does: the parameter's data changes where autograd does not see it
    lin = nn.Linear(4, 4)
    torch.nn.init.uniform_(lin.weight, -1, 1)
    ref = copy.deepcopy(lin)

    def f(m, x):
        m.weight.detach().clamp_(-0.1, 0.1)
        return m(x)
    x = torch.randn(2, 4)
    expected = f(ref, x)
    actual = ember.compile(f, backend="aot_eager")(lin, x)
    assert_same(actual, expected)
    assert_same(lin.weight, ref.weight)
    assert lin.weight.is_leaf and lin.weight.requires_grad


def test_embedding_max_norm():
    emb = nn.Embedding(10, 4, max_norm=1.0)
    ref = copy.deepcopy(emb)
    idx = torch.tensor([[1, 2], [3, 1]])
    assert_same(ember.compile(emb, backend="aot_eager")(idx), ref(idx))
    assert_same(emb.weight, ref.weight)


def _penalty_grads(model, x, compiled):
    fwd = ember.compile(model, backend="aot_eager") if compiled else model
    out = fwd(x)
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    assert g.requires_grad  # as in eager: the penalty term depends on the parameters
    ((g.norm(dim=1) - 1) ** 2).mean().backward()
    return [p.grad for p in model.parameters()] + [x.grad]


def test_gradient_penalty_through_a_compiled_graph_matches_eager():
    """create_graph=True: the backward reruns the graph's program eagerly, so the gradient has
    eager's history and the penalty's second-order term reaches the parameters."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    ref = copy.deepcopy(m)
    x = torch.randn(3, 4)
    expected = _penalty_grads(ref, x.clone().requires_grad_(), compiled=False)
    reset()
    actual = _penalty_grads(m, x.clone().requires_grad_(), compiled=True)
    assert_same(actual, expected)
    assert stats()["fallbacks"] == 0


def test_hessian_vector_product_inside_the_function():
    def f(x, v):
        y = (x ** 3).sin().sum()
        torch._dynamo.graph_break()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (hv,) = torch.autograd.grad((g * v).sum(), x)
        return hv
    x, v = torch.randn(5, requires_grad=True), torch.randn(5)
    reset()
    assert_same(ember.compile(f, backend="aot_eager")(x, v), f(x, v))


def test_double_backward_raises_where_the_graph_cannot_be_rerun():
    """A graph that draws random numbers cannot be repeated: differentiating its gradient raises
    (it never silently drops the second-order term)."""
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Tanh(), nn.Linear(8, 1))
    x = torch.randn(3, 4, requires_grad=True)
    out = ember.compile(m, backend="aot_eager")(x)
    (g,) = torch.autograd.grad(out.sum(), x, create_graph=True)
    assert g.requires_grad
    with pytest.raises(RuntimeError, match="double backward"):
        ((g.norm(dim=1) - 1) ** 2).mean().backward()


def test_module_built_in_the_frame_draws_its_init_once():
    def f(x):
        return nn.Linear(4, 3)(x)
    x = torch.randn(2, 4)
    torch.manual_seed(1)
    expected = f(x)
    after_eager = torch.get_rng_state()
    torch.manual_seed(1)
    actual = ember.compile(f, backend="eager")(x)
    assert_same(actual, expected)
    assert torch.equal(torch.get_rng_state(), after_eager)


def test_missing_module_dict_key_is_the_callers_error_not_the_frames():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(8, 4)})

        def forward(self, x, task):
            return self.heads[task](x)
    reset()
    cm = ember.compile(Net(), backend="eager")
    cm(torch.randn(2, 8), "a")
    with pytest.raises(KeyError, match="zzz"):
        cm(torch.randn(2, 8), "zzz")
    graphs = stats()["graphs"]
    cm(torch.randn(3, 8), "a")  # a new shape still compiles
    assert stats()["graphs"] == graphs + 1


def test_lazy_modules_compile_once_initialised():
    torch.manual_seed(0)
    m = nn.Sequential(nn.LazyLinear(16), nn.ReLU(), nn.LazyLinear(4))
    reset()
    cm = ember.compile(m, backend="eager")
    x = torch.randn(4, 8)
    out = cm(x)
    assert_same(out, m(x))
    cm(torch.randn(4, 8))
    assert stats()["fallbacks"] == 0 and stats()["graphs"] >= 1


class _LazyMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.LazyLinear(10), nn.LazyLinear(1)

    def forward(self, x):
        return torch.relu(self.fc2(torch.relu(self.fc1(x))))


class _DropoutThenLazy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.LazyLinear(10)

    def forward(self, x):
        return self.fc(torch.nn.functional.dropout(x, 0.5))


class _LazyConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c, self.bn = nn.LazyConv2d(4, 3), nn.LazyBatchNorm2d()

    def forward(self, x):
        return self.bn(self.c(x))


@pytest.mark.parametrize("cls,shape,fullgraph", [(_LazyMLP, (10, 10), True), (_LazyConvBN, (2, 3, 8, 8), True),
                                                 (_DropoutThenLazy, (4, 6), False)])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_lazy_module_initialised_by_the_trace(cls, shape, fullgraph, backend):
    """The first call builds the parameters at trace time (fullgraph works), drawing the same
    random numbers as eager; with a random op before it in the graph, that call breaks instead
    (eager draws the dropout mask first)."""
    x = torch.randn(shape)
    torch.manual_seed(0)
    m1 = cls()
    torch.manual_seed(1)
    r1, after1 = m1(x), torch.rand(3)
    torch.manual_seed(0)
    m2 = cls()
    reset()
    torch.manual_seed(1)
    cm = ember.compile(m2, backend=backend, fullgraph=fullgraph)
    r2, after2 = cm(x), torch.rand(3)
    assert_same(r2, r1)
    assert_same(after2, after1)
    assert type(m2) is type(m1) and [type(c) for c in m2.children()] == [type(c) for c in m1.children()]
    assert_same(dict(m2.state_dict()), dict(m1.state_dict()))
    assert stats()["fallbacks"] == 0
    torch.manual_seed(2)
    r1 = m1(x)
    torch.manual_seed(2)
    assert_same(cm(x), r1)


def test_inductor_conv_training_step():  # (about 7 s: the one inductor conv compile in the suite)
    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 6, 3, padding=1)
            self.c2 = nn.Conv2d(6, 8, 3)

        def forward(self, x):
            return self.c2(torch.nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)).mean()
    m = Net()
    ref = copy.deepcopy(m)
    x = torch.randn(4, 3, 8, 8)
    reset()
    ember.compile(m, backend="inductor")(x).backward()
    ref(x).backward()
    assert_same([p.grad for p in m.parameters()], [p.grad for p in ref.parameters()], rtol=1e-4, atol=1e-5)
    assert stats()["fallbacks"] == 0


def test_inductor_dropout_compiles():
    m = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    reset()
    out = ember.compile(m, backend="inductor")(torch.randn(4, 8))
    out.sum().backward()
    assert stats()["fallbacks"] == 0 and stats()["graphs"] == 1
