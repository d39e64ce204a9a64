"""Metadata mutations and autograd-flag changes through ember.compile equal eager, for every backend.

The AOT layer gets fake inputs that describe the inputs as the graph *receives* them,
even though capture ran ``t_()``/``squeeze_()``/``resize_()`` on its own fakes while
tracing; ``requires_grad_``/``detach_`` that change a tensor's autograd flags run
eagerly at a graph break; torch functions that read ``.grad`` (``clip_grad_norm_``) run
eagerly rather than on fake tensors without grads.
"""
import pytest
import torch

import ember
from metadata_compare import run_both

BACKENDS = ["eager", "aot_eager"]


def R(*shape, grad=False):
    return lambda: (torch.randn(*shape, requires_grad=grad),)


METADATA_CASES = {
    "t_": (lambda x: x.t_().add(1), R(2, 3)),
    "t_returns_input": (lambda x: x.t_(), R(2, 3)),
    "squeeze_": (lambda x: x.squeeze_().mul(2), R(2, 1, 3)),
    "squeeze_dim": (lambda x: x.squeeze_(1) * 2, R(2, 1, 3)),
    "unsqueeze_": (lambda x: x.unsqueeze_(0) * 2, R(2, 3)),
    "swapdims_": (lambda x: x.swapdims_(0, 1) * 2, R(2, 3)),
    "swapaxes_": (lambda x: x.swapaxes_(0, 2) * 2, R(2, 3, 4)),
    "transpose_": (lambda x: x.transpose_(0, 1) * 2, R(2, 3, 4)),
    "as_strided_": (lambda x: x.as_strided_((2, 2), (1, 2)) * 2, R(6)),
    "as_strided_offset": (lambda x: x.as_strided_((2,), (2,), 1) * 2, R(6)),
    "resize_smaller": (lambda x: x.resize_(2) * 2, R(6)),
    "resize_larger": (lambda x: x.resize_(8).fill_(1) * 2, R(2)),
    "resize_2d": (lambda x: x.resize_(2, 2) * 2, R(6)),
    "t_then_mul_": (lambda x: x.t_().mul_(2), R(2, 3)),
    "unsqueeze_then_add_": (lambda x: x.unsqueeze_(1).add_(1), R(3)),
    "as_strided_then_mul_": (lambda x: x.as_strided_((3,), (2,)).mul_(2), R(6)),
    "two_metadata_ops": (lambda x: x.t_().unsqueeze_(0).sum(), R(2, 3)),
    "metadata_op_then_view_out": (lambda x: x.squeeze_(0)[1], R(1, 3, 2)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(METADATA_CASES))
def test_input_metadata_mutation(name, backend):
    fn, make = METADATA_CASES[name]
    run_both(fn, make, backend)


def test_metadata_mutation_of_a_view_input():
    def f(x, v):
        v.t_()
        return v + 1, x.sum()

    def make():
        base = torch.randn(4, 6)
        return base, base[1:3, 2:5]
    for backend in BACKENDS:
        ember.reset()
        run_both(f, make, backend)


AUTOGRAD_FLAG_CASES = {
    "detach_input": (lambda x: x.detach_() * 2, R(3, grad=True)),
    "detach_returns_input": (lambda x: x.detach_(), R(3, grad=True)),
    "requires_grad_input": (lambda x: x.requires_grad_() * 2, R(3)),
    "requires_grad_false_input": (lambda x: x.requires_grad_(False) * 2, R(3, grad=True)),
    "requires_grad_intermediate": (lambda x: (x * 2).requires_grad_(), R(3)),
    "detach_requires_grad_leaf": (lambda x: (x * 2).detach().requires_grad_(), R(3)),
    "detach_requires_grad_leaf_from_grad_input": (lambda x: (x * 2).detach().requires_grad_(), R(3, grad=True)),
    "requires_grad_used_inside": (lambda x: ((x * 2).detach().requires_grad_() * 3).sum(), R(3)),
    "noop_requires_grad_false": (lambda x: x.requires_grad_(False) + 1, R(3)),
    "noop_detach_": (lambda x: x.detach_() + 1, R(3)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(AUTOGRAD_FLAG_CASES))
def test_autograd_flag_change(name, backend):
    fn, make = AUTOGRAD_FLAG_CASES[name]
    run_both(fn, make, backend)


def test_noop_flag_changes_stay_in_one_graph():
    fn = lambda x: x.detach_().requires_grad_(False) * 2  # noqa: E731
    ember.reset()
    ember.compile(fn, backend="aot_eager")(torch.randn(3))
    assert ember.stats()["graphs"] == 1 and ember.stats()["graph_breaks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("how", ["norm", "norm_foreach_off_l1", "norm_inf", "value", "step"])
def test_clip_grad_inside_the_compiled_function(how, backend):
    torch.manual_seed(0)
    x = torch.randn(5, 4)
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 3)

        def f(x):
            if how == "step":
                m(x).pow(2).sum().backward()
                return torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
            if how == "norm":
                return torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
            if how == "norm_foreach_off_l1":
                return torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1, norm_type=1.0, foreach=False)
            if how == "norm_inf":
                return torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1, norm_type="inf")
            torch.nn.utils.clip_grad_value_(m.parameters(), 0.05)
            return None

        if how != "step":
            m(x).pow(2).sum().backward()
        ember.reset()
        out = (ember.compile(f, backend=backend) if compiled else f)(x)
        results.append((out, [p.grad.clone() for p in m.parameters()]))
    (e_out, e_grads), (c_out, c_grads) = results
    if e_out is None:
        assert c_out is None
    else:
        torch.testing.assert_close(c_out, e_out)
    for a, b in zip(c_grads, e_grads):
        torch.testing.assert_close(a, b)
    assert e_grads[0].norm() < 1.0  # the clip did something
