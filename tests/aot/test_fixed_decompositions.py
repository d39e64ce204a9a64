"""Ops whose torch decomposition gives another answer than eager trace through ember's own
(ember/aot/trace_patches.py, ``exact_decompositions``): outputs and gradients as eager."""
import pytest
import torch
import torch.nn.functional as F

import ember

TARGETS = [
    torch.tensor([[0, 1, -1, 0], [3, -1, 0, 0]]),      # slots after the first -1 are ignored
    torch.tensor([[2, 2, 1, 3], [0, 1, 2, 3]]),         # no -1; repeated labels
    torch.tensor([[-1, 1, 2, 0], [1, -1, 3, 3]]),       # no valid label in the first row
]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("which", range(len(TARGETS)))
def test_multilabel_margin_loss_matches_eager(backend, reduction, which):
    def f(x, t):
        return F.multilabel_margin_loss(x * 2, t, reduction=reduction)

    torch.manual_seed(0)
    x = torch.randn(2, 4, requires_grad=True)
    t = TARGETS[which]
    ref = f(x, t)
    (gref,) = torch.autograd.grad(ref.sum(), x)
    ember.reset()
    got = ember.compile(f, backend=backend)(x, t)
    (ggot,) = torch.autograd.grad(got.sum(), x)
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(ggot, gref)
    assert ember.stats()["fallbacks"] == 0


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_multilabel_margin_loss_vector_input(reduction):
    def f(x, t):
        return F.multilabel_margin_loss(x, t, reduction=reduction)

    x = torch.tensor([0.3, -1.2, 0.8, 0.1], requires_grad=True)
    t = torch.tensor([2, -1, 0, 1])
    ref = f(x, t)
    ember.reset()
    got = ember.compile(f, backend="aot_eager")(x, t)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(ref.sum(), x)[0])


def test_torchs_kernel_restored_after_tracing():
    op = torch.ops.aten.multilabel_margin_loss_forward.default
    from torch._C import DispatchKey
    before = op.py_kernels.get(DispatchKey.Autograd)
    ember.reset()
    ember.compile(lambda x, t: F.multilabel_margin_loss(x, t), backend="aot_eager")(
        torch.randn(2, 3), torch.tensor([[0, -1, 1], [2, 1, -1]]))
    assert op.py_kernels.get(DispatchKey.Autograd) is before



def test_multilabel_margin_loss_vector_none_runs_eagerly_not_wrong(monkeypatch):
    # torch's fake kernel gives shape (1,) here, eager (): the frame falls back, same answer
    def f(x, t):
        return F.multilabel_margin_loss(x, t, reduction="none") * 3

    x = torch.tensor([0.3, -1.2, 0.8, 0.1], requires_grad=True)
    t = torch.tensor([2, -1, 0, 1])
    monkeypatch.setattr(ember.config, "strict", False)  # the fallback is the behaviour under test
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ember.compile(f, backend="aot_eager")(x, t)
    ref = f(x, t)
    assert got.shape == ref.shape
    torch.testing.assert_close(got, ref)
