"""Past ``recompile_limit``, a function compiled with ``fullgraph=True`` (or any function under
``fail_on_recompile_limit_hit``) raises FailOnRecompileLimitHit instead of running eagerly, as
torch.compile; calls its entries cover still run compiled. (``EMBER_TEST_REFERENCE=torch`` runs
the same program on torch.compile.)"""
import contextlib

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, recompile_limit

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64]


def double(x):
    return x * 2


@contextlib.contextmanager
def fail_on_limit():
    if REFERENCE:
        import torch._dynamo
        with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
            yield
    else:
        import ember
        with ember.config.patch(fail_on_recompile_limit_hit=True):
            yield


def _calls_past_the_limit(fullgraph):
    counter = CompileCounter()
    compiled = compile(double, backend=counter, fullgraph=fullgraph)
    with recompile_limit(2):
        for dtype in DTYPES[:2]:
            x = torch.ones(3, dtype=dtype)
            assert_same(compiled(x), double(x))
        for dtype in DTYPES[2:]:  # each call that needs a third entry fails, every time
            with pytest.raises(Exception, match="Hard failure") as info:
                compiled(torch.ones(3, dtype=dtype))
            assert type(info.value).__name__ == "FailOnRecompileLimitHit"
        x = torch.ones(3, dtype=DTYPES[1])  # an input an entry covers: still compiled
        assert_same(compiled(x), double(x))
    assert counter.frame_count == 2


def test_fullgraph_raises_past_the_recompile_limit():
    _calls_past_the_limit(fullgraph=True)


def test_fail_on_recompile_limit_hit_raises_without_fullgraph():
    with fail_on_limit():
        _calls_past_the_limit(fullgraph=False)
