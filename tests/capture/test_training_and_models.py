"""Training-step capture (.grad, losses built in forward), HF models as one graph, logs and explain."""
import copy
import logging
import os

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import CompileCounter, assert_same


def sgd_step(model, x, y):
    model.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
    return loss


def test_training_step_with_zero_grad_backward_and_update():
    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    model = copy.deepcopy(eager)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    counter = CompileCounter()
    step = ember.compile(sgd_step, backend=counter)
    for _ in range(3):
        assert_same(step(model, x, y), sgd_step(eager, x, y))
        for p, q in zip(model.parameters(), eager.parameters()):
            torch.testing.assert_close(p, q)
            torch.testing.assert_close(p.grad, q.grad)
    # forward graph | break at backward() | update graph; one recompile once grads exist
    assert ember.stats()["graph_breaks"] >= 1 and ember.stats()["fallbacks"] == 0
    assert counter.frame_count == 3


def test_grad_set_to_none_is_replayed():
    w = torch.randn(3, requires_grad=True)
    w.grad = torch.ones(3)

    def clear(w, x):
        had = w.grad is not None
        w.grad = None
        return x * 2, had

    out, had = ember.compile(clear, fullgraph=True)(w, torch.ones(2))
    assert had is True and w.grad is None
    torch.testing.assert_close(out, torch.full((2,), 2.0))


class WithLossInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x, y):
        return nn.CrossEntropyLoss()(self.lin(x), y)


def test_loss_module_built_in_forward_is_one_graph_no_recompiles():
    m = WithLossInForward()
    cm = ember.compile(m, backend=CompileCounter(), fullgraph=True)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    for _ in range(3):
        assert_same(cm(x, y), m(x, y))
    assert ember.stats()["graphs"] == 1 and ember.stats()["recompiles"] == 0


def test_env_var_read_is_guarded(monkeypatch):
    def f(x):
        return x * 2 if os.environ.get("EMBER_TEST_FLAG") == "1" else x * 3

    cf = ember.compile(f, fullgraph=True)
    monkeypatch.setenv("EMBER_TEST_FLAG", "1")
    torch.testing.assert_close(cf(torch.ones(2)), torch.full((2,), 2.0))
    monkeypatch.setenv("EMBER_TEST_FLAG", "0")
    torch.testing.assert_close(cf(torch.ones(2)), torch.full((2,), 3.0))
    assert ember.stats()["recompiles"] == 1


def _hf(name):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "bert":
        cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=128, vocab_size=128, max_position_embeddings=64)
        return transformers.BertForMaskedLM(cfg).eval()
    cfg = transformers.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                                   max_position_embeddings=64)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("name", ["bert", "llama"])
def test_hf_model_is_one_graph(name):
    model = _hf(name)
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(1))
    counter = CompileCounter()
    cm = ember.compile(model, backend=counter, fullgraph=True)
    with torch.no_grad():
        out, ref = cm(ids), model(ids)
    torch.testing.assert_close(out.logits, ref.logits)
    assert counter.frame_count == 1


def test_recompile_log_names_guard_and_new_value(caplog):
    def f(x, n):
        return x * n

    cf = ember.compile(f)
    with caplog.at_level(logging.INFO, logger="ember.recompiles"):
        cf(torch.ones(2), 2)
        cf(torch.ones(2), 3)
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "L['n'] == 2" in text and "now: 3" in text, text


def test_explain_lists_graphs_breaks_and_guards():
    def f(x):
        y = x.sin()
        print("break here")
        return y.cos()

    out = ember.explain(f)(torch.ones(3))
    assert out.graph_count == 2 and out.graph_break_count == 1
    assert out.break_reasons[0].where.endswith(f"{os.path.basename(__file__)}:{f.__code__.co_firstlineno + 2}")
    assert "print" in out.break_reasons[0].source_line
    assert any("TENSOR_MATCH" in g for g in out.guards[0])
    assert "Graph count: 2" in str(out)


def lambda_across_break(x):
    act = lambda t: t.relu() * 2  # noqa: E731  (a new function object on every call)
    y = act(x)
    print("break")
    return act(y + 1)


def test_lambda_live_across_break_is_rebuilt_and_not_recompiled():
    counter = CompileCounter()
    cf = ember.compile(lambda_across_break, backend=counter)
    x = torch.randn(4)
    for _ in range(3):
        assert_same(cf(x), lambda_across_break(x))
    assert counter.frame_count == 2
    assert ember.stats()["recompiles"] == 0 and ember.stats()["fallbacks"] == 0


DEFAULT_CB = lambda t: t + 1  # noqa: E731


def identity_of_function(x, cb):
    return cb(x) * (2 if cb is DEFAULT_CB else 3)


def test_function_identity_is_guarded_when_observed():
    cf = ember.compile(identity_of_function, fullgraph=True)
    x = torch.ones(2)
    other = lambda t: t + 1  # noqa: E731  (same behaviour, different object)
    assert_same(cf(x, DEFAULT_CB), identity_of_function(x, DEFAULT_CB))
    assert_same(cf(x, other), identity_of_function(x, other))
    assert ember.stats()["recompiles"] == 1


def pending_outer_call(x):
    return torch.full((2,), x.sum().item()) + 1


def test_break_under_a_pending_outer_call():
    counter = CompileCounter()
    cf = ember.compile(pending_outer_call, backend=counter)
    x = torch.randn(3)
    assert_same(cf(x), pending_outer_call(x))
    assert ember.stats()["graph_breaks"] == 1 and ember.stats()["fallbacks"] == 0


def test_top_module_with_global_hook_or_instance_forward_behaves_like_eager():
    calls = []
    lin = nn.Linear(2, 2)
    cm = ember.compile(lin, fullgraph=True)
    x = torch.randn(1, 2)
    handle = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: calls.append(m) or o * 2)
    try:
        torch.testing.assert_close(cm(x), lin.forward(x) * 2)  # the global hook ran
    finally:
        handle.remove()
    assert calls == [lin]
    lin.forward = lambda t: t + 100  # an instance-level forward wins, as in eager
    torch.testing.assert_close(cm(x), x + 100)
