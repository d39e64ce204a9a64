"""A tensor subclass whose own ``__torch_function__`` has Python side effects (it logs):
ops on it used to go into the graph, so the override ran when the graph ran, before the frame's
earlier Python side effects were replayed (a log in the wrong order), the frame's later reads did
not see its writes (``len(LOG)`` folded at trace time), and metadata reads (``t.dim()``) logged
once at trace time and never on later calls (fuzz seeds 3500013 and 3500018, gen_extra3.py).
Such ops now break (variables/override_purity.py); a side-effect-free override stays in the graph."""
import pytest
import torch

import ember
from ember_test_helpers import check_same

LOG = []


class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("add", "__add__", "mul", "__mul__", "dim", "size"):
            LOG.append("tf:" + func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


class Pure(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
        return out * 2 if getattr(func, "__name__", "") == "clone" else out


def _order(t, s):
    LOG.append("frame")
    return t + s


def _read_after(t, s):
    r = s + 1
    n = len(LOG)
    return r * n


def _effects_around(t, s):
    a = s * 2
    LOG.append("mid")
    b = (a + t).sin()
    LOG.append(len(LOG))
    return b


def _metadata(t, s):
    return t * s.dim() + s.size(0)


@pytest.mark.parametrize("fn", [_order, _read_after, _effects_around, _metadata])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_logging_override_runs_in_program_order(fn, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    for call in range(3):
        t = torch.randn(3)
        s = torch.randn(3).as_subclass(Logged)
        LOG.clear()
        expected = fn(t, s)
        eager_log = list(LOG)
        LOG.clear()
        with ember.config.patch(strict=True):
            actual = compiled(t, s)
        assert LOG == eager_log, (call, LOG, eager_log)
        assert type(actual) is type(expected)
        torch.testing.assert_close(actual.as_subclass(torch.Tensor), expected.as_subclass(torch.Tensor))
    assert ember.stats()["fallbacks"] == 0


def test_side_effect_free_override_stays_in_the_graph():
    def f(t, s):
        LOG.append("frame")
        return (s.clone() + t).sin() * s.dim()
    LOG.clear()
    check_same(f, torch.randn(3), torch.randn(3).as_subclass(Pure), graphs=1)


def test_purity_scan():
    from ember.capture.variables.override_purity import torch_function_is_pure

    class Counts(torch.Tensor):
        calls = 0

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            cls.calls += 1
            return super().__torch_function__(func, types, args, kwargs or {})

    class Prints(Pure):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            print(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    class Inherits(Logged):
        pass

    assert torch_function_is_pure(Pure)
    assert torch_function_is_pure(torch.nn.Parameter)
    assert not torch_function_is_pure(Logged)
    assert not torch_function_is_pure(Counts)
    assert not torch_function_is_pure(Prints)
    assert not torch_function_is_pure(Inherits)  # (the base's override is the one that runs)


class LoggedDispatch(torch.Tensor):
    """A wrapper subclass whose ``__torch_dispatch__`` logs each aten op (it runs when the graph runs)."""

    @staticmethod
    def __new__(cls, elem):
        r = torch.Tensor._make_wrapper_subclass(cls, elem.size(), dtype=elem.dtype, device=elem.device)
        r.elem = elem
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        LOG.append(str(func))
        args = [a.elem if isinstance(a, LoggedDispatch) else a for a in args]
        out = func(*args, **(kwargs or {}))
        return LoggedDispatch(out) if isinstance(out, torch.Tensor) else out


def test_logging_dispatch_runs_in_program_order():
    def f(t, s):
        LOG.append("frame")
        r = s + t
        return r, len(LOG)
    ember.reset()
    compiled = ember.compile(f, backend="eager")
    for call in range(2):
        t, s = torch.ones(3), LoggedDispatch(torch.ones(3))
        LOG.clear()
        expected = f(t, s)
        eager_log = list(LOG)
        LOG.clear()
        with ember.config.patch(strict=True):
            actual = compiled(t, s)
        assert LOG == eager_log, (call, LOG, eager_log)
        assert actual[1] == expected[1]
        torch.testing.assert_close(actual[0].elem, expected[0].elem)
