"""``w.data += d`` (and ``-=``, ``*=``) on a parameter inside a compiled frame: Python reads
``w.data`` (an alias of ``w``), adds in place, and assigns the alias back to ``w.data``, which in
eager changes nothing (same storage, metadata and version counter). That assignment used to be
taken as a new ``.data`` for a tensor that requires grad, so every later use of ``w`` in the frame
broke the graph (EB0032): a LoRA ``merge()`` (``base.weight.data += B @ A * scale``) followed by the
layer's forward, a hand-written SGD step followed by a forward. Now it is a no-op in the trace; an
assignment of a different tensor (``w.data = w.data + d``) or a differently shaped view still
takes the old path."""
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile


def merge_then_forward(lin, x, delta):
    lin.weight.data += delta
    return lin(x), lin.weight * 2


def manual_sgd_then_forward(lin, x, delta):
    for p in lin.parameters():
        p.data -= 0.1 * p.data.sign()
    lin.bias.data *= 0.5
    return lin(x)


def forward_then_merge_then_forward(lin, x, delta):
    y = lin(x)
    lin.weight.data += delta  # after autograd saved x for the first call: no version bump in eager
    return y, lin(x)


def reassign_new_tensor(lin, x, delta):
    lin.weight.data = lin.weight.data + delta  # a different tensor: the frame breaks at the next use
    return lin(x)


def _run(fn, graphs, fullgraph, backend_kind="counter", dynamic=None):
    torch.manual_seed(0)
    eager_lin = nn.Linear(3, 2)
    torch.manual_seed(0)
    compiled_lin = nn.Linear(3, 2)
    x, delta = torch.randn(4, 3), torch.randn(2, 3)
    counter = CompileCounter()
    backend = counter if backend_kind == "counter" else backend_kind
    compiled = compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    expected = fn(eager_lin, x, delta)
    actual = compiled(compiled_lin, x, delta)
    assert_same(actual, expected)
    for pc, pe in zip(compiled_lin.parameters(), eager_lin.parameters()):
        assert_same(pc, pe)
        assert pc._version == pe._version
    out_e = expected[0] if isinstance(expected, tuple) else expected
    out_c = actual[0] if isinstance(actual, tuple) else actual
    out_e.sum().backward()
    out_c.sum().backward()
    assert_same([p.grad for p in compiled_lin.parameters()], [p.grad for p in eager_lin.parameters()])
    if backend_kind == "counter":
        assert counter.frame_count == graphs


def test_inplace_data_update_then_forward_is_one_graph():
    _run(merge_then_forward, graphs=1, fullgraph=True)
    _run(manual_sgd_then_forward, graphs=1, fullgraph=True)
    _run(forward_then_merge_then_forward, graphs=1, fullgraph=True)


def test_inplace_data_update_aot_and_dynamic():
    for fn in (merge_then_forward, manual_sgd_then_forward, forward_then_merge_then_forward):
        _run(fn, graphs=None, fullgraph=True, backend_kind="aot_eager")
        _run(fn, graphs=None, fullgraph=True, backend_kind="aot_eager", dynamic=True)


def test_new_tensor_assigned_to_data_still_breaks():
    _run(reassign_new_tensor, graphs=2, fullgraph=False)
