"""Graph breaks inside ``with torch.inference_mode()`` (ember/capture/variables/inference_breaks.py)
and inside functions decorated with torch's grad-mode / inference-mode decorators: the frame is
compiled around the break as torch.compile 2.13 compiles it (the whole frame ran eagerly before).

Graph counts are torch.compile's (counting backend, backend="eager"), checked here against
torch.compile itself."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same

LOG = []


def _brk():
    LOG.append((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
    torch._dynamo.graph_break()


def inf_block(x):
    y = x * 2
    with torch.inference_mode():
        z = y + 1
        _brk()
        w = z * 3
    return w + 1, w, y * x


def inf_false_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        with torch.inference_mode(False):
            z = y + x
            _brk()
            w = z * 3
    return w + x, y


def no_grad_around_inference(x):
    with torch.no_grad():
        with torch.inference_mode():
            y = x * 2
            _brk()
            z = y + 1
    return z, x + z


def two_breaks(x):
    with torch.inference_mode():
        a = x * 2
        _brk()
        b = a + 1
        _brk()
        c = b + 1
    return c + x


def grad_off_before_block(x):
    torch.set_grad_enabled(False)
    try:
        with torch.inference_mode():
            a = x * 2
            _brk()
            b = a + 1
        return b * x
    finally:
        torch.set_grad_enabled(True)


@torch.inference_mode()
def _decorated_inference(y):
    z = y * 2
    _brk()
    return z + 1


@torch.no_grad()
def _decorated_no_grad(y):
    z = y * 2
    _brk()
    return z + 1


def calls_decorated_inference(x):
    return _decorated_inference(x) + x


def calls_decorated_no_grad(x):
    return _decorated_no_grad(x) * x


def nested_decorated(x):
    @torch.inference_mode()
    def g(y):
        z = y * 2
        _brk()
        return z + 1
    return g(x) + x


def nested_set_grad_decorated(x):
    @torch.set_grad_enabled(False)
    def g(y):
        z = y * 2
        _brk()
        return z + 1
    return g(x) * x


def set_grad_decorated_no_break(x):
    # (decorating puts back the mode construction set: the product requires grad; ember left grad
    # mode off and returned a tensor without grad)
    @torch.set_grad_enabled(False)
    def g(y):
        return y * 2 + 1
    return g(x) * x, torch.is_grad_enabled()


# (program, torch.compile's graph count over two calls; calls_decorated_no_grad: the break nests
# through the no_grad decorator, 2 graphs, as torch.compile with nested_graph_breaks on makes on a
# first call; torch recompiles the first graph on the second call, ember's guards hold)
CASES = [(inf_block, 2), (inf_false_in_no_grad, 2), (no_grad_around_inference, 2), (two_breaks, 3),
         (grad_off_before_block, 2), (calls_decorated_inference, 3), (calls_decorated_no_grad, 2),
         (nested_decorated, 3), (nested_set_grad_decorated, 3), (set_grad_decorated_no_break, 1)]


def _run(f, x):
    LOG.clear()
    out = f(x)
    log = list(LOG)
    state = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())
    return out, log, state


def _grads(out, x):
    loss = sum(t.sum() for t in out if isinstance(t, torch.Tensor) and t.requires_grad)
    if not isinstance(loss, torch.Tensor):
        return None
    return torch.autograd.grad(loss, x)[0]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn,graphs", CASES, ids=[c[0].__name__ for c in CASES])
def test_break_inside_inference_block(fn, graphs, backend):
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt if backend == "eager" else backend)
    for _ in range(2):
        x = torch.randn(3, requires_grad=True)
        expected, log_e, state_e = _run(fn, x)
        actual, log_c, state_c = _run(compiled, x)
        expected = expected if isinstance(expected, tuple) else (expected,)
        actual = actual if isinstance(actual, tuple) else (actual,)
        assert_same(actual, expected)
        assert log_c == log_e  # the breaking call runs inside the block, as in eager
        assert state_c == state_e == (False, True)
        if backend == "eager":  # (an AOT backend's outputs are not inference tensors: as torch.compile)
            assert [getattr(t, "is_inference", bool)() for t in actual] == \
                [getattr(t, "is_inference", bool)() for t in expected]
        assert_same(_grads(actual, x), _grads(expected, x))
    assert ember.stats()["fallbacks"] == 0
    if backend == "eager":
        assert cnt.frame_count == graphs


@pytest.mark.parametrize("fn,graphs", CASES[:2] + CASES[5:6] + CASES[-1:],
                         ids=["inf_block", "inf_false", "decorated", "set_grad_decorated"])
def test_graph_counts_are_torch_compiles(fn, graphs):
    import torch._dynamo
    torch._dynamo.reset()
    cnt = CompileCounter()
    compiled = torch.compile(fn, backend=cnt)
    for _ in range(2):
        compiled(torch.randn(3, requires_grad=True))
    torch._dynamo.reset()
    assert cnt.frame_count == graphs


def _raiser(a):
    raise KeyError("k")


def test_exception_at_the_break_leaves_the_block():
    def fn(x):
        try:
            with torch.inference_mode():
                a = x * 2
                _raiser(a)
        except KeyError:
            return x + 1, torch.is_inference_mode_enabled(), torch.is_grad_enabled()
    x = torch.randn(3, requires_grad=True)
    compiled = ember.compile(fn, backend="eager")
    for _ in range(2):
        assert_same(compiled(x), fn(x))


def test_exception_after_the_break_leaves_the_block():
    def fn(x):
        with torch.inference_mode():
            a = x * 2
            _brk()
            if a.shape[0] == 3:
                raise ValueError("boom")
        return a
    compiled = ember.compile(fn, backend="eager")
    for f in (fn, compiled, compiled):
        with pytest.raises(ValueError, match="boom"):
            f(torch.randn(3, requires_grad=True))
        assert (torch.is_inference_mode_enabled(), torch.is_grad_enabled()) == (False, True)


def test_grad_mode_changed_inside_the_block_runs_eagerly():
    # enable_grad inside the inference block, open at the break: refused (the frame runs eagerly;
    # torch.compile resumes it)
    def fn(x):
        with torch.inference_mode():
            a = x * 2
            with torch.enable_grad():
                _brk()
                b = a + 1
        return b, torch.is_grad_enabled()
    x = torch.randn(3, requires_grad=True)
    compiled = ember.compile(fn, backend="eager")
    for _ in range(2):
        expected, log_e, _ = _run(fn, x)
        actual, log_c, _ = _run(compiled, x)
        assert_same(actual, expected)
        assert log_c == log_e


def test_contextmanager_holding_an_inference_block_with_a_break_inside():
    # (the generator suspended inside its inference block is not handed over: the frame runs
    # eagerly, with eager's answers and state)
    import contextlib

    @contextlib.contextmanager
    def cm():
        with torch.inference_mode():
            yield

    def fn(x):
        y = x * 2
        with cm():
            z = y + 1
            _brk()
            w = z * 3
        return w + x, torch.is_inference_mode_enabled()
    compiled = ember.compile(fn, backend="eager")
    for _ in range(2):
        x = torch.randn(3, requires_grad=True)
        expected, log_e, state_e = _run(fn, x)
        actual, log_c, state_c = _run(compiled, x)
        assert_same(actual, expected)
        assert log_c == log_e and state_c == state_e == (False, True)
