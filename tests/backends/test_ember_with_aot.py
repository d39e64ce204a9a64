"""ember's capture feeding ember's AOT backends: train steps equal eager (outputs, grads, buffers)."""
import copy

import pytest
import torch
import torch.nn as nn

import ember
from inductor_tolerance import assert_close_inductor


def _close(actual, expected, backend, what=""):
    if backend == "inductor":  # what Inductor promises (tests/inductor_tolerance.py)
        assert_close_inductor(actual, expected, what=what)
    else:
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what}: {m}")


def _train_step_matches(model_factory, make_inputs, backend, graphs=1):
    torch.manual_seed(0)
    eager = model_factory()
    compiled_model = copy.deepcopy(eager)
    fast = ember.compile(compiled_model, backend=backend, fullgraph=True)
    inputs = make_inputs()
    for _ in range(2):
        ref = eager(*inputs)
        out = fast(*inputs)
        ref_loss = ref.float().pow(2).mean() if torch.is_tensor(ref) else ref.loss
        out_loss = out.float().pow(2).mean() if torch.is_tensor(out) else out.loss
        _close(out_loss, ref_loss, backend, "loss")
        ref_loss.backward()
        out_loss.backward()
        for (name, p_ref), p_out in zip(eager.named_parameters(), compiled_model.parameters()):
            assert (p_ref.grad is None) == (p_out.grad is None), name
            if p_ref.grad is not None:
                _close(p_out.grad, p_ref.grad, backend, name)
        for (name, b_ref), b_out in zip(eager.named_buffers(), compiled_model.buffers()):
            if backend == "inductor":
                _close(b_out, b_ref, backend, name)
            else:
                torch.testing.assert_close(b_out, b_ref, msg=name)
    assert ember.stats()["graphs"] == graphs
    assert ember.stats()["recompiles"] == 0


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc(x.flatten(1))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_mlp_train_step(backend):
    _train_step_matches(lambda: nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.LayerNorm(16), nn.Linear(16, 4)),
                        lambda: (torch.randn(5, 8),), backend)


def test_convnet_batchnorm_train_step_aot_eager():
    _train_step_matches(ConvNet, lambda: (torch.randn(2, 3, 8, 8),), "aot_eager")


def test_input_mutation_through_ember_aot_eager():
    def f(x, y):
        x.mul_(2)
        return (x + y).sin()

    x, y = torch.randn(4), torch.randn(4, requires_grad=True)
    x2, y2 = x.clone(), y.detach().clone().requires_grad_()
    out = ember.compile(f, backend="aot_eager", fullgraph=True)(x2, y2)
    ref = f(x, y)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x2, x)
    out.sum().backward()
    ref.sum().backward()
    torch.testing.assert_close(y2.grad, y.grad)


def test_graph_break_with_aot_eager_backward():
    def f(x):
        y = x.sin() * 2
        print("between graphs")
        return y.cos().sum()

    x = torch.randn(6, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out = ember.compile(f, backend="aot_eager")(x2)
    ref = f(x)
    out.backward()
    ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x2.grad, x.grad)
    assert ember.stats()["graph_breaks"] == 1
    assert ember.stats()["graphs"] == 2


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_hf_gpt2_train_step(backend):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))

    class WithLoss(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = transformers.GPT2LMHeadModel(cfg)

        def forward(self, ids):
            return self.m(ids, labels=ids).loss

    _train_step_matches(WithLoss, lambda: (ids,), backend)


def break_inside_no_grad(x):
    y = x * 2
    with torch.no_grad():
        z = y + 1
        print("inside no_grad")
        w = z * 3
    return (y * w).sum(), w


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_break_inside_no_grad_then_backward(backend):
    # The resume function starts inside the no_grad block and leaves it: its graph turns grad
    # mode on, so the AOT layer must take the training path and connect the outputs.
    x = torch.randn(3, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    out, w = ember.compile(break_inside_no_grad, backend=backend)(x)
    ref, w_ref = break_inside_no_grad(x2)
    assert out.requires_grad == ref.requires_grad and w.requires_grad == w_ref.requires_grad
    out.backward()
    ref.backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(x.grad, x2.grad)
    assert torch.is_grad_enabled()
    assert ember.stats()["graph_breaks"] == 1 and ember.stats()["fallbacks"] == 0
