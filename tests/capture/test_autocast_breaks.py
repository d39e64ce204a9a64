"""Graph breaks inside ``with torch.autocast`` (ember/capture/variables/autocast_breaks.py), and
graphs called under an ambient autocast (the AOT runtime runs traced casts with autocast off)."""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, compile, reset, stats

BACKENDS = ["eager", "aot_eager", "inductor"]
TOL = dict(rtol=2e-2, atol=2e-2)  # bfloat16 matmuls; the dtypes are compared exactly
LOG = []


def _lin():
    torch.manual_seed(0)
    return torch.nn.Linear(4, 4)


def _check(fn, x, backend, calls=2):
    compiled = ember.compile(fn, backend=backend)
    for _ in range(calls):
        xe, xc = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
        expected, actual = fn(xe), compiled(xc)
        assert [getattr(t, "dtype", t) for t in actual] == [getattr(t, "dtype", t) for t in expected]
        assert_same(actual, expected, **TOL)
        assert torch.is_autocast_enabled("cpu") is False
        sum(t.float().sum() for t in expected if isinstance(t, torch.Tensor)).backward()
        sum(t.float().sum() for t in actual if isinstance(t, torch.Tensor)).backward()
        assert_same(xc.grad, xe.grad, **TOL)


@pytest.mark.parametrize("backend", BACKENDS)
def test_break_inside_autocast_block(backend):
    lin = _lin()

    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = lin(x)
            LOG.append((torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")))
            print("", end="")  # a graph break inside the block
            z = lin(y)
            inside = torch.is_autocast_enabled("cpu")
        w = lin(z.float())
        return z, w, inside, torch.is_autocast_enabled("cpu")
    LOG.clear()
    reset()
    _check(fn, torch.randn(2, 4), backend)
    assert LOG == [(True, torch.bfloat16)] * 4  # the residual runs under autocast, eager and compiled
    assert stats()["graph_breaks"] >= 1 and stats()["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_break_inside_nested_autocast_blocks(backend):
    lin = _lin()

    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = lin(x)
            with torch.autocast("cpu", enabled=False):
                b = lin(a.float())
                print("", end="")
                c = lin(b)
            d = lin(c)
        return a, b, c, d
    reset()
    _check(fn, torch.randn(2, 4), backend)
    assert stats()["fallbacks"] == 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_exception_raised_after_a_break_leaves_autocast(backend):
    lin = _lin()

    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = lin(x)
            print("", end="")
            if y.shape[0] == 2:
                raise ValueError("boom")
        return y
    for f in (fn, ember.compile(fn, backend=backend)):
        with pytest.raises(ValueError, match="boom"):
            f(torch.randn(2, 4))
        assert torch.is_autocast_enabled("cpu") is False


@pytest.mark.parametrize("backend", BACKENDS)
def test_disabled_region_under_ambient_autocast(backend):
    lin = _lin()

    def fn(x):
        with torch.autocast("cpu", enabled=False):
            inner = lin(x.float())
        return inner, lin(x)
    x = torch.randn(2, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = fn(x)
        actual = ember.compile(fn, backend=backend)(x)
    assert [t.dtype for t in actual] == [t.dtype for t in expected] == [torch.float32, torch.bfloat16]
    assert_same(actual, expected, **TOL)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_ambient_autocast_state_of_each_device_is_guarded(device):
    """A graph made outside autocast must not serve a call inside one, for the cpu and for cuda
    (found on a GPU: a cuda autocast around the call reused the float32 graph). Set directly, the
    cuda state exists on a machine without CUDA too."""
    cnt = CompileCounter()
    f = compile(lambda x: x + 1, backend=cnt)
    x = torch.ones(2)
    f(x)
    torch.set_autocast_enabled(device, True)
    try:
        f(x)
        assert cnt.frame_count == 2
    finally:
        torch.set_autocast_enabled(device, False)
    f(x)
    assert cnt.frame_count == 2


_AC = torch.autocast("cpu", dtype=torch.bfloat16)


@torch.autocast("cpu", dtype=torch.bfloat16)
def _decorated_mm(a, b):
    return a @ b


@_AC
def _recursive_mm(x, n):
    return x @ x if n == 0 else _recursive_mm(x, n - 1) + 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_function_decorated_with_autocast_is_one_graph(backend):
    """``@torch.autocast(...)`` keeps one autocast object and enters it at every call: its block is
    traced from the settings the object holds (was a break at torch.set_autocast_enabled, an error
    under fullgraph; torch.compile makes one graph)."""
    lin = _lin()

    def fn(x):
        y = _decorated_mm(lin(x), x.t())
        with _AC:  # (the same kind of outside object, entered directly)
            z = lin(x)
        return y, z, y.float().sum() * 2

    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt if backend == "eager" else backend, fullgraph=True)
    for _ in range(2):
        x = torch.randn(3, 4)
        xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
        expected, actual = fn(xe), compiled(xc)
        assert [t.dtype for t in actual] == [t.dtype for t in expected]
        assert_same(actual, expected, **TOL)
        assert torch.is_autocast_enabled("cpu") is False
        expected[2].backward()
        actual[2].backward()
        assert_same(xc.grad, xe.grad, **TOL)
    if backend == "eager":
        assert cnt.frame_count == 1


def test_recursive_function_decorated_with_autocast_matches_eager():
    """The same autocast object entered inside its own block: its __exit__ restores what the inner
    __enter__ saved on it (eager leaves autocast on after the outermost call); ember runs that
    object's own methods there, so the state after the call is eager's."""
    def fn(x):
        return _recursive_mm(x, 2), torch.is_autocast_enabled("cpu")

    x = torch.randn(4, 4)
    try:
        expected = fn(x)
        after_eager = torch.is_autocast_enabled("cpu")
    finally:
        torch.set_autocast_enabled("cpu", False)
    try:
        actual = ember.compile(fn, backend="eager")(x)
        after_compiled = torch.is_autocast_enabled("cpu")
    finally:
        torch.set_autocast_enabled("cpu", False)
    assert actual[0].dtype == expected[0].dtype
    assert_same(actual, expected, **TOL)
    assert after_compiled == after_eager
