"""``torch.func.functional_call`` in a frame (capture/variables/functional_call.py): the module is
traced with the given tensors in place of its own — one graph, as torch.compile 2.13 makes (it
used to break at the call: the swap writes the module's parameters, EB0032)."""
import pytest
import torch
from torch.func import functional_call, grad, vmap

from ember_test_helpers import CompileCounter, assert_same, check_same, compile


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


MLP = _mlp()
BN = torch.nn.BatchNorm1d(3)


def doubled(x):
    p = {k: v * 2 for k, v in MLP.named_parameters()}
    return functional_call(MLP, p, (x,))


def partial_dict(x):
    return functional_call(MLP, {"0.weight": torch.ones(4, 3)}, x) + 1


def tuple_of_dicts(x):
    params = dict(MLP.named_parameters())
    first = {k: v for k, v in params.items() if k.startswith("0.")}
    rest = {k: v.neg() for k, v in params.items() if not k.startswith("0.")}
    return functional_call(MLP, (first, rest), (x,), strict=True)


def grad_of_params(x):
    params = {k: v.detach() for k, v in MLP.named_parameters()}
    return grad(lambda p: functional_call(MLP, p, (x,)).pow(2).sum())(params)


def per_sample_grads(x):
    params = {k: v.detach() for k, v in MLP.named_parameters()}

    def loss(p, xi):
        return functional_call(MLP, p, (xi.unsqueeze(0),)).sum()
    return vmap(grad(loss), in_dims=(None, 0))(params, x)


def kwargs_call(x):
    return functional_call(MLP[0], {"bias": torch.zeros(4)}, (), {"input": x})


@pytest.mark.parametrize("fn", [doubled, partial_dict, tuple_of_dicts, grad_of_params, per_sample_grads,
                                kwargs_call])
def test_functional_call_is_one_graph(fn):
    check_same(fn, torch.randn(5, 3), graphs=1, atol=1e-5, rtol=1e-5)


def test_gradients_reach_the_given_tensors_not_the_modules():
    lin = torch.nn.Linear(3, 4)

    def f(x, w):
        return functional_call(lin, {"weight": w}, (x,)).sum()
    check_same(f, torch.randn(5, 3), torch.randn(4, 3, requires_grad=True), graphs=1)
    assert lin.weight.grad is None and lin.bias.grad is not None


def test_buffers_are_swapped_and_updated_as_in_eager():
    def f(x, mean, var):
        return functional_call(BN, {"running_mean": mean, "running_var": var}, (x,))
    BN.train()
    before = BN.running_mean.clone()
    check_same(f, torch.randn(4, 3), torch.zeros(3), torch.ones(3), graphs=1, fullgraph=False)
    assert torch.equal(BN.running_mean, before)


class ReadsItsParameters(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x * sum(p.sum() for p in self.parameters())


class AssignsInForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        self.seen = 1
        return x * self.w


@pytest.mark.parametrize("module, params", [
    (ReadsItsParameters(), {"w": torch.full((3,), 2.0)}),
    (AssignsInForward(), {"w": torch.full((3,), 2.0)}),
    (torch.nn.Linear(3, 3), {"weight": torch.ones(3, 3), "extra": torch.ones(1)}),
    (torch.nn.Linear(3, 3), {"weight": 2.0}),
], ids=["parameters_listing", "assignment", "unknown_key", "not_a_tensor"])
def test_what_is_not_modelled_runs_as_eager(module, params):
    def f(x):
        return functional_call(module, params, (x,))
    x = torch.randn(2, 3)
    try:
        expected = f(x)
    except Exception as e:  # noqa: BLE001 — eager's error is what the compiled call must raise
        with pytest.raises(type(e)):
            compile(f, backend=CompileCounter())(x)
        return
    assert_same(compile(f, backend=CompileCounter())(x), expected)
    assert "seen" not in vars(module) or vars(module)["seen"] == 1
