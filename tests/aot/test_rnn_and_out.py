"""The AOT layer on its own (no ember capture): RNNs with weight grads, out= resizes."""
import pytest
import torch
import torch.nn as nn

import ember
from helpers import compare


class _Wrap(nn.Module):
    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)


@pytest.mark.parametrize("make", [lambda: nn.LSTM(4, 5), lambda: nn.LSTM(4, 5, num_layers=2, bidirectional=True),
                                  lambda: nn.GRU(4, 5), lambda: nn.RNN(4, 5)], ids=["lstm", "lstm2bi", "gru", "rnn"])
@pytest.mark.parametrize("input_grad", [False, True])
def test_rnn_module_leaf_in_symbolic_trace(make, input_grad):
    torch.manual_seed(0)
    compare(None, lambda: (torch.randn(3, 2, 4, requires_grad=input_grad),), via="direct", module=_Wrap(make()),
            rtol=1e-4, atol=1e-5)


def test_lstm_in_an_aliasing_variant():
    """A layout compiled at call time (mutated aliased inputs) traces the LSTM differentiably too."""
    def f(a, b, w):
        a.mul_(2)
        out, _, _ = torch.lstm(b.view(3, 2, 4), (torch.zeros(1, 2, 5), torch.zeros(1, 2, 5)), w,
                               True, 1, 0.0, True, False, False)
        return out

    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5)
    results = []
    for compiled in (False, True):
        ws = [p.detach().clone().requires_grad_() for p in lstm._flat_weights]
        base = torch.arange(24, dtype=torch.float32) / 24
        ember.reset()
        out = (ember.compile(f, backend="aot_eager") if compiled else f)(base, base, ws)
        out.sum().backward()
        results.append((out, base, [w.grad for w in ws]))
    (eo, eb, eg), (co, cb, cg) = results
    torch.testing.assert_close(co, eo, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(cb, eb)
    for a, b in zip(cg, eg):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_out_variant_resizes_the_callers_tensor():
    # (torch.compile graph-breaks on an out= that must be resized, so only the direct path)
    def f(a, out):
        return torch.add(a, 1, out=out)
    compare(f, lambda: (torch.randn(3), torch.empty(0)), via="direct")


def test_resize_of_a_view_input_keeps_its_offset():
    def f(a, out):
        out.resize_(3)
        out.fill_(2)
        return out + a
    compare(f, lambda: (torch.randn(3), torch.zeros(10)[2:4]), via="direct", check_base=False)
