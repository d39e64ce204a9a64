"""torch.compile's tracing-setting decorators used by the program (``disable_nested_graph_breaks``,
``error_on_graph_break(b)``) are honoured as ember's settings (capture/compile_settings.py), with
torch.compile's graph counts and errors (its test suite runs with nested_graph_breaks=True)."""
import pytest
import torch
import torch._dynamo

from ember_test_helpers import REFERENCE, UNSUPPORTED, CompileCounter, assert_same, compile


@pytest.fixture(autouse=True)
def _nested_breaks_on():
    if REFERENCE:
        old = torch._dynamo.config.nested_graph_breaks
        torch._dynamo.config.nested_graph_breaks = True
        yield
        torch._dynamo.config.nested_graph_breaks = old
    else:
        yield


def _breaks(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x + 2


@torch._dynamo.disable_nested_graph_breaks
def _not_nested(x):
    return _breaks(x + 4) + 8


def _nested(x):
    return _breaks(x + 4) + 8


@torch._dynamo.error_on_graph_break(True)
def _strict(x):
    return _breaks(x + 4) + 8


@torch._dynamo.error_on_graph_break(True)
def _strict_raises(x):
    y = x * 2
    if y.shape[0] == 3:
        raise ValueError("three rows")
    return y


@torch._dynamo.error_on_graph_break(False)
def _lenient(x):
    return _breaks(x + 4) + 8


@torch._dynamo.error_on_graph_break(True)
def _strict_calls_lenient(x):
    return _lenient(x * 3) - 1


def _run(f, *args, graphs):
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for _ in range(2):
        assert_same(compiled(*[a.clone() for a in args]), f(*[a.clone() for a in args]))
    assert cnt.frame_count == graphs, f"expected {graphs} graphs, the backend saw {cnt.frame_count}"


def test_disable_nested_graph_breaks_decorator_breaks_at_the_frames_call():
    """A break inside the decorated function's region nests through no frame: the caller breaks at
    its call, the decorated function and its callee break as frames of their own (6 graphs; 2
    with nesting, as without the decorator)."""
    _run(lambda x: _not_nested(x + 16) + 32, torch.zeros(3), graphs=6)
    _run(lambda x: _nested(x + 16) + 32, torch.zeros(3), graphs=2)


def test_error_on_graph_break_decorator_raises_at_a_break_inside():
    compiled = compile(lambda x: _strict(x + 16) + 32, backend=CompileCounter())
    with pytest.raises(UNSUPPORTED):
        compiled(torch.zeros(3))


@pytest.mark.skipif(REFERENCE, reason="torch.compile raises Unsupported ('Observed exception') at the program's "
                    "own raise under error_on_graph_break(True); ember keeps eager's exception")
def test_error_on_graph_break_keeps_the_programs_own_exception():
    compiled = compile(lambda x: _strict_raises(x + 1) * 2, backend=CompileCounter())
    with pytest.raises(ValueError, match="three rows"):
        compiled(torch.zeros(3))
    assert_same(compiled(torch.ones(4)), (torch.ones(4) + 1) * 2 * 2)


def test_error_on_graph_break_false_inside_true_breaks():
    """The innermost setting decides: a break under error_on_graph_break(False) inside a True one
    is a graph break."""
    _run(lambda x: _strict_calls_lenient(x) + 1, torch.zeros(3), graphs=2)


@pytest.mark.skipif(REFERENCE, reason="ember.config.error_on_graph_break is ember's own setting")
def test_config_error_on_graph_break():
    import ember

    def raises(x):
        y = x * 2
        if y.shape[0] == 2:
            raise KeyError("two")
        return y

    with ember.config.patch(error_on_graph_break=True):
        with pytest.raises(ember.Unsupported, match="EB0028"):
            compile(lambda x: _breaks(x) * 2, backend=CompileCounter())(torch.zeros(3))
        with pytest.raises(KeyError, match="two"):  # (the program's own exception, as in eager)
            compile(raises, backend=CompileCounter())(torch.zeros(2))
        _run(lambda x: _lenient(x) * 2, torch.zeros(3), graphs=2)  # (its region allows breaks)


def test_context_manager_forms():
    """``with torch._dynamo.disable_nested_graph_breaks():`` / ``error_on_graph_break(b)`` blocks
    in the frame: the same settings for what the block traces."""
    def not_nested(x):
        x = x * 2
        with torch._dynamo.disable_nested_graph_breaks():
            x = _breaks(x)
        return x + 1

    def lenient_inside_strict_block(x):
        with torch._dynamo.error_on_graph_break(True):
            y = _lenient(x)
        return y + 1

    def strict_block(x):
        x = x * 2
        with torch._dynamo.error_on_graph_break(True):
            x = _breaks(x)
        return x + 1

    _run(not_nested, torch.zeros(3), graphs=4)  # (2 with nesting)
    _run(lenient_inside_strict_block, torch.zeros(3), graphs=2)
    with pytest.raises(UNSUPPORTED):
        compile(strict_block, backend=CompileCounter())(torch.zeros(3))
