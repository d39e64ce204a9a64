"""A class's ``__getattr__`` is user code: ember must call it exactly when eager does (never while
wrapping, guarding or asking ``callable``), and a hook that raises something other than
AttributeError (a dict subclass answering ``self[name]``: KeyError) must not crash the trace."""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, check_same, compile, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own counters (ember.stats())")

LOG = []


class Spy:
    k = 2

    def __init__(self):
        self.a = 1

    def __getattr__(self, name):
        LOG.append(name)
        if name.startswith("dyn"):
            return 3
        raise AttributeError(name)

    def m(self, x):
        return x * self.k


class Config(dict):
    def __getattr__(self, name):
        LOG.append(name)
        return self[name]  # KeyError for anything missing


def reads(s, x):
    return x + s.a + s.k + s.dyn1


def probes(s, x):
    return x * hasattr(s, "zzz") + getattr(s, "qq", 5)


def holds(s, x):
    return [s, x + 1], {"o": s}, isinstance(s, Spy), callable(s), callable(s.m)


def method(s, x):
    return s.m(x), type(s).__name__


def config_read(c, x):
    return x + c.offset


def _plain(v):
    """The objects made per call by their class name (they differ between the runs)."""
    if isinstance(v, (list, tuple)):
        return type(v)(_plain(x) for x in v)
    if isinstance(v, dict) and type(v) is dict:
        return {k: _plain(x) for k, x in v.items()}
    return type(v).__name__ if isinstance(v, (Spy, Config)) else v


@pytest.mark.parametrize("fn,make", [(reads, Spy), (probes, Spy), (holds, Spy), (method, Spy),
                                     (config_read, lambda: Config(offset=4))],
                         ids=["reads", "probes", "holds", "method", "dict-subclass"])
def test_getattr_hook_called_as_in_eager(fn, make):
    def run(f):
        LOG.clear()
        out = [f(make(), torch.ones(2)) for _ in range(2)]  # the second call runs the cached entry
        return out, list(LOG)

    expected, eager_log = run(fn)
    got, log = run(compile(fn))
    assert log == eager_log
    assert_same(_plain(got), _plain(expected))
    assert stats()["fallbacks"] == 0


class Callable:
    def __call__(self, x):
        return x + 1


def callables(x, c, s):
    return x, callable(c), callable(s), callable(x), callable(Spy), callable(len)


def test_callable_asks_the_type():
    check_same(callables, torch.ones(2), Callable(), Spy(), graphs=0)
    assert stats()["fallbacks"] == 0
