"""The backward compiled for the layout the compiled forward really saved (ember/aot/lazy_backward.py).

Inductor saves a convolution's activations channels-last on the CPU, dynamic sizes included, while
the backward graph was traced for contiguous ones: with a batch size that changed (symbolic sizes)
the backward crashed in an ``aten.view`` of a saved tensor (HF ResNet's train step, second batch
size)."""
import copy

import pytest
import torch
import torch.nn as nn
from inductor_tolerance import assert_close_inductor

import ember
from ember.aot.lazy_backward import LazyBackward, dense_order


class ConvNet(nn.Module):
    """A ResNet's stem (7x7 stride-2 conv, BatchNorm, max-pool), one residual block, pooling."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.mp = nn.MaxPool2d(3, 2, 1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d((1, 1))

    def forward(self, x):
        h = self.mp(torch.relu(self.bn(self.conv(x))))
        h = torch.relu(self.bn2(self.conv2(h)) + h)
        return self.pool(h)


@pytest.mark.parametrize("batches", [(4, 6, 8), (3, 5)])
def test_conv_train_step_with_changing_batch_on_inductor(batches):
    torch.manual_seed(0)
    ref = ConvNet()
    mod = copy.deepcopy(ref)
    compiled = ember.compile(mod, backend="inductor")
    for b in batches:
        x = torch.randn(b, 3, 32, 32)
        ref.zero_grad()
        mod.zero_grad()
        ref(x).pow(2).mean().backward()
        out = compiled(x)
        out.pow(2).mean().backward()
        for (name, p), q in zip(mod.named_parameters(), ref.parameters()):
            assert_close_inductor(p.grad, q.grad, what=f"grad of {name} at batch {b}")
        for (name, p), q in zip(mod.named_buffers(), ref.buffers()):
            assert_close_inductor(p.float(), q.float(), what=f"buffer {name} at batch {b}")


def test_dense_order():
    assert dense_order((2, 3, 4), (12, 4, 1)) == (2, 1, 0)
    assert dense_order((2, 3, 4, 5), (60, 1, 15, 3)) == (1, 3, 2, 0)  # channels-last
    assert dense_order((2, 3), (1, 4)) is None  # a gap: not dense
    assert dense_order((2, 8, 1, 1), (8, 1, 8, 8))[0] == 1


def _failing_compiler(gm, example_inputs):
    raise RuntimeError("no backend today")


def test_uncompiled_backward_gets_the_traced_layout(monkeypatch):
    """Run uncompiled (the backend failed), a graph traced for a contiguous tensor is fed one:
    the channels-last tensor the forward saved is copied into the traced layout first."""
    from torch.fx.experimental.proxy_tensor import make_fx
    from torch._subclasses.fake_tensor import FakeTensorMode

    monkeypatch.setattr(ember.config, "strict", False)
    gm = make_fx(lambda t: torch.ops.aten.view.default(t, [2, -1]) * 2)(torch.randn(2, 3, 4, 5))
    mode = FakeTensorMode()
    example = mode.from_tensor(torch.randn(2, 3, 4, 5))
    lazy = LazyBackward(gm, _failing_compiler, [example], mode)
    real = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    with pytest.warns(UserWarning, match="running it uncompiled"):
        out = lazy([real])
    torch.testing.assert_close(out, real.reshape(2, -1) * 2, rtol=0, atol=0)
