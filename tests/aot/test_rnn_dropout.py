"""Multi-layer RNNs with dropout in training mode: same outputs, gradients and RNG use as eager
(torch's RNN decompositions skip the inter-layer dropout; see ember/aot/rnn_dropout.py)."""
import copy

import pytest
import torch
from torch import nn

import ember

KINDS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN,
         "rnn_relu": lambda *a, **k: nn.RNN(*a, nonlinearity="relu", **k)}


def _run(module, x, seed):
    torch.manual_seed(seed)
    out = module(x)
    after = torch.rand(3)  # the RNG stream after the call
    y = out[0]
    if isinstance(y, nn.utils.rnn.PackedSequence):
        y = y.data
    y.square().sum().backward()
    return y.detach(), after, [p.grad.clone() for p in module.parameters()]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("layout", ["seq_first", "batch_first_bidir", "packed"])
@pytest.mark.parametrize("backend", ["aot_eager"])
def test_dropout_between_layers_matches_eager(kind, layout, backend):
    torch.manual_seed(0)
    batch_first = layout == "batch_first_bidir"
    module = KINDS[kind](4, 5, num_layers=3, dropout=0.4, batch_first=batch_first,
                         bidirectional=batch_first)
    x = torch.randn(6, 2, 4)
    if layout == "packed":
        x = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([6, 3]))
    ref = _run(copy.deepcopy(module), x, seed=7)
    ember.reset()
    compiled = ember.compile(copy.deepcopy(module), backend=backend)
    for _ in range(2):
        compiled.zero_grad()
        got = _run(compiled, x, seed=7)
        torch.testing.assert_close(got[0], ref[0])
        assert torch.equal(got[1], ref[1])
        torch.testing.assert_close(got[2], ref[2])
    assert ember.stats()["fallbacks"] == 0


def test_eval_mode_and_single_layer_keep_torchs_decomposition_answer():
    torch.manual_seed(0)
    for module in (nn.LSTM(3, 3, num_layers=2, dropout=0.5).eval(), nn.GRU(3, 3, dropout=0.0)):
        x = torch.randn(4, 2, 3)
        ember.reset()
        with torch.no_grad():
            torch.testing.assert_close(ember.compile(module, backend="aot_eager")(x)[0], module(x)[0])
