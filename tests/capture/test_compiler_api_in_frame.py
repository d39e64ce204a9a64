"""torch's compiler API called inside a compiled frame is never a graph op.

``torch._dynamo.graph_break()`` is a break the program asked for (the call itself is a
no-op that runs eagerly); ``torch.compiler.is_compiling()`` is True while tracing;
``mark_dynamic`` and friends run eagerly at a break. Before, these were recorded as
``call_function`` nodes (a graph of 100 iterations with 100 ``graph_break`` nodes).
"""
import pytest
import torch
import torch._dynamo

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


def _ops(cnt):
    return [getattr(n.target, "__name__", str(n.target)) for gm in cnt.graphs for n in gm.graph.nodes
            if n.op in ("call_function", "call_method")]


def test_graph_break_breaks_the_graph():
    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 2
    assert "graph_break" not in _ops(cnt)


def test_graph_break_in_a_callee_with_message():
    def inner(x):
        torch._dynamo.graph_break("here")
        return x + 1

    def fn(x):
        return inner(x * 2) * 3

    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    assert "graph_break" not in _ops(cnt)
    if not REFERENCE:
        import ember
        reasons = [r.reason for r in ember.explain(fn, x).break_reasons]
        assert any("graph_break() called" in r and "here" in r for r in reasons), reasons


def test_is_compiling_is_true_inside():
    def fn(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x - 1

    x = torch.zeros(2)
    assert_same(compile(fn)(x), x + 1)


def test_mark_dynamic_inside_raises_as_torch_does():
    # torch's marks are forbid_in_graph: tracing one is the caller's error (AssertionError), as in
    # torch.compile, not a graph break
    def fn(x):
        y = x * 2
        torch._dynamo.maybe_mark_dynamic(y, 0)
        return y + 1

    with pytest.raises(AssertionError, match="forbidden callable"):
        compile(fn)(torch.randn(3))


def test_is_make_fx_tracing_answers_as_under_torch_compile():
    # torch.compile answers True (MultiheadAttention then skips its fused fast path); ember too,
    # rather than breaking on the dispatch-stack query the function makes
    def fn(x):
        return torch.sin(x), torch.nn.modules.activation._is_make_fx_tracing()

    cnt = CompileCounter()
    x = torch.randn(4)
    out, flag = compile(fn, backend=cnt, fullgraph=True)(x)
    assert flag is True and torch.equal(out, torch.sin(x))
    assert cnt.frame_count == 1


def test_multihead_attention_inference_matches_eager():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()
    q = torch.randn(2, 5, 8)
    with torch.no_grad():
        ref = mha(q, q, q)
        out = compile(mha)(q, q, q)
    assert torch.allclose(out[0], ref[0], atol=1e-5) and torch.allclose(out[1], ref[1], atol=1e-5)


def test_skip_frame_runs_the_frame_as_it_is():
    def fn(x):
        x = x + 1
        torch._dynamo.skip_frame()
        return x * 2

    def after_a_break(x):
        x = x + 1
        torch._dynamo.graph_break()
        x = x * 3
        torch._dynamo.skip_frame()  # (the resume function's frame is the one skipped)
        return x - 1

    x = torch.randn(3)
    cnt = CompileCounter()
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 0
    cnt = CompileCounter()
    assert_same(compile(after_a_break, backend=cnt)(x), after_a_break(x))
    assert cnt.frame_count == 1
    assert _ops(cnt) == ["add"]


def test_step_unsupported_compiles_the_graph_so_far_then_runs_the_rest():
    def fn(x):
        x = x + 1 + 2
        torch._dynamo.step_unsupported()
        return x + 4

    cnt = CompileCounter()
    x = torch.randn(3)
    compiled = compile(fn, backend=cnt)
    assert_same(compiled(x), fn(x))
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1 and cnt.op_count == 2
