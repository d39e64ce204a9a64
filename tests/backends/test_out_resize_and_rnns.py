"""``out=`` ops that resize their output, ``resize_`` of inputs, and the RNN family with grads.

An ``out=`` op resizes ``out`` without functionalization flagging a metadata mutation;
the epilogue must resize the caller's tensor like eager (contiguous, same storage
offset) before copying. RNN kernels return undefined tensors (None) for optional
outputs such as mkldnn_rnn_layer's workspace, which the runtime saves as is.
"""
import pytest
import torch
import torch.nn as nn

import ember
from metadata_compare import run_both

BACKENDS = ["eager", "aot_eager"]

OUT_CASES = {
    "add_out_resized": (lambda a, out: torch.add(a, 1, out=out), lambda: (torch.randn(3), torch.empty(0))),
    "add_out_same_size": (lambda a, out: torch.add(a, 1, out=out), lambda: (torch.randn(3), torch.empty(3))),
    "mul_out_wrong_numel": (lambda a, out: torch.mul(a, 2, out=out).sum(), lambda: (torch.randn(3, 2), torch.empty(5))),
    "cat_out": (lambda a, out: torch.cat([a, a], out=out), lambda: (torch.randn(3), torch.empty(0))),
    "matmul_out": (lambda a, out: torch.matmul(a, a, out=out), lambda: (torch.randn(3, 3), torch.empty(0))),
    "sort_out_tuple": (lambda a, v, i: torch.sort(a, out=(v, i)),
                       lambda: (torch.randn(4), torch.empty(0), torch.empty(0, dtype=torch.long))),
    "out_view_with_offset": (lambda a, out: torch.add(a, 1, out=out), lambda: (torch.randn(3), torch.zeros(10)[2:2])),
    "out_2d_from_strided_empty": (lambda a, out: torch.add(a, 1, out=out),
                                  lambda: (torch.randn(2, 3), torch.zeros(6, 2)[:, 0][:0])),
    "out_internal": (lambda a: torch.add(a, 1, out=torch.empty(0)), lambda: (torch.randn(3),)),
    "resize_input_grow": (lambda a, out: out.resize_(2, 3).fill_(1) + a, lambda: (torch.randn(2, 3), torch.empty(0))),
    "resize_input_shrink": (lambda a, out: out.resize_(2).fill_(1) + a, lambda: (torch.randn(2), torch.empty(6))),
    "resize_view_keeps_offset": (lambda a, out: out.resize_(3).fill_(2) + a,
                                 lambda: (torch.randn(3), torch.zeros(10)[2:4])),
    "resize_view_then_copy": (lambda a, out: out.resize_(3, 2).copy_(a),
                              lambda: (torch.randn(3, 2), torch.zeros(10)[1:3])),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(OUT_CASES))
def test_out_and_resize(name, backend):
    fn, make = OUT_CASES[name]
    run_both(fn, make, backend)


def test_out_resize_base_storage_matches_eager():
    """The storage around an ``out=`` view is written exactly where eager writes it."""
    def f(a, out):
        return torch.add(a, 1, out=out)
    for backend in BACKENDS:
        ember.reset()
        base_e, base_c = torch.zeros(10), torch.zeros(10)
        a = torch.randn(3)
        f(a, base_e[2:2])
        out = base_c[2:2]
        ember.compile(f, backend=backend)(a, out)
        torch.testing.assert_close(base_c, base_e)


RNNS = {
    "lstm": lambda: nn.LSTM(4, 5),
    "lstm_2layer_bidir_batch_first": lambda: nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True),
    "lstm_proj": lambda: nn.LSTM(4, 6, proj_size=3),
    "lstm_no_bias": lambda: nn.LSTM(4, 5, bias=False),
    "gru": lambda: nn.GRU(4, 5, num_layers=2),
    "gru_bidir": lambda: nn.GRU(4, 5, bidirectional=True),
    "rnn_tanh": lambda: nn.RNN(4, 5),
    "rnn_relu": lambda: nn.RNN(4, 5, nonlinearity="relu", num_layers=2),
    "lstm_cell": lambda: nn.LSTMCell(4, 5),
    "gru_cell": lambda: nn.GRUCell(4, 5),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(RNNS))
@pytest.mark.parametrize("input_grad", [False, True])
def test_rnn_family_with_weight_grads(name, backend, input_grad):
    torch.manual_seed(0)
    rnn_e = RNNS[name]()
    rnn_c = RNNS[name]()
    rnn_c.load_state_dict(rnn_e.state_dict())
    cell = name.endswith("_cell")
    shape = (2, 4) if cell else (3, 2, 4)
    x = torch.randn(*shape)
    xe, xc = x.clone().requires_grad_(input_grad), x.clone().requires_grad_(input_grad)
    ember.reset()
    out_e = rnn_e(xe)
    out_c = ember.compile(rnn_c, backend=backend)(xc)
    leaves_e, leaves_c = torch.utils._pytree.tree_leaves(out_e), torch.utils._pytree.tree_leaves(out_c)
    for e, c in zip(leaves_e, leaves_c):
        torch.testing.assert_close(c, e, rtol=1e-4, atol=1e-5)
        assert c.requires_grad == e.requires_grad
    sum((o * (k + 1)).sum() for k, o in enumerate(leaves_e)).backward()
    sum((o * (k + 1)).sum() for k, o in enumerate(leaves_c)).backward()
    for (n, pe), pc in zip(rnn_e.named_parameters(), rnn_c.parameters()):
        torch.testing.assert_close(pc.grad, pe.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{n}: {m}")
    if input_grad:
        torch.testing.assert_close(xc.grad, xe.grad, rtol=1e-4, atol=1e-5)


def test_functional_lstm_with_state_grads():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 5)
    params = [p.detach().clone().requires_grad_() for p in lstm._flat_weights]

    def f(x, h, c, *ws):
        out, hn, cn = torch.lstm(x, (h, c), ws, True, 1, 0.0, True, False, False)
        return out, hn, cn

    def make():
        torch.manual_seed(3)
        return (torch.randn(3, 2, 4), torch.randn(1, 2, 5, requires_grad=True),
                torch.randn(1, 2, 5, requires_grad=True), *[p.detach().clone().requires_grad_() for p in params])
    for backend in BACKENDS:
        ember.reset()
        run_both(f, make, backend)
