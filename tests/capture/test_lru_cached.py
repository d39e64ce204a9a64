"""``functools.lru_cache``-wrapped helpers called in a compiled frame answer what the cache answers
in eager at that call: after ``cache_clear()``, after an eviction from a bounded cache, after the
name is rebound to another function; the body runs when eager's does (in order with the frame's
other side effects), and ``cache_info()`` counts hits as in eager once compiled."""
import functools

import pytest
import torch

import ember

LOG = []
STATE = {"factor": 2}


def _scenario(make, steps):
    """Run ``steps`` (callables taking the frame function and the fresh helpers) eagerly and
    through ember on fresh helpers from ``make()``; return what each saw."""
    seen = []
    for compiled in (False, True):
        ember.reset()
        LOG.clear()
        STATE["factor"] = 2
        helpers, fn = make()
        if compiled:
            fn = ember.compile(fn, backend="eager")
        outs = [step(fn, helpers) for step in steps]
        # (misses and size; hits differ by one on a call that compiles after a miss: the trace's
        # call of the wrapper and the replayed call both count -- see variables/lru_cached.py)
        info = [h.cache_info()[1:] for h in helpers]
        seen.append(([o.tolist() if isinstance(o, torch.Tensor) else o for o in outs], list(LOG), info))
    return seen


def _cleared_body_reads_changed_state():
    @functools.lru_cache(maxsize=None)
    def scale(n):
        LOG.append(("scale", n))
        return n * STATE["factor"]

    def fn(x):
        LOG.append("frame")
        return x * scale(3)
    return [scale], fn


def _step_call(fn, helpers):
    return fn(torch.ones(2))


def _step_clear_and_change(fn, helpers):
    STATE["factor"] = 5
    helpers[0].cache_clear()
    return fn(torch.ones(2))


def test_cache_clear_then_changed_state_matches_eager():
    eager, got = _scenario(_cleared_body_reads_changed_state,
                           [_step_call, _step_call, _step_clear_and_change, _step_call])
    assert got == eager
    assert eager[0][2] == [15.0, 15.0]  # (the stale answer would be 6)


def _bounded_alternating():
    @functools.lru_cache(maxsize=1)
    def pick(n):
        LOG.append(("pick", n))
        return n + STATE["factor"]

    def fn(x, n):
        return x * pick(n)
    return [pick], fn


def test_bounded_cache_eviction_matches_eager():
    steps = [lambda fn, h, n=n: fn(torch.ones(2), n) for n in (1, 1, 2, 1, 1, 2, 2)]
    steps.insert(3, lambda fn, h: STATE.__setitem__("factor", 7))
    eager, got = _scenario(_bounded_alternating, steps)
    assert got == eager


def _lru_sized_two():
    @functools.lru_cache(maxsize=2)
    def pick(n):
        LOG.append(("pick", n))
        return n * 10

    def fn(x):
        return x * pick(1)
    return [pick], fn


def test_recency_of_a_bounded_cache_moves_as_in_eager():
    # eager's call of pick(1) makes it the most recent: pick(3) then evicts pick(2), not pick(1)
    steps = [_step_call, lambda fn, h: h[0](2), _step_call, lambda fn, h: h[0](3), _step_call,
             lambda fn, h: h[0](2)]
    eager, got = _scenario(_lru_sized_two, steps)
    assert got == eager


def _side_effect_before_first_call():
    @functools.lru_cache
    def scale(n):
        LOG.append(("scale", n))
        return n * 2

    def fn(x):
        LOG.append("before")
        y = x * scale(3)
        LOG.append("after")
        return y
    return [scale], fn


def test_first_call_body_runs_in_order_with_frame_side_effects():
    eager, got = _scenario(_side_effect_before_first_call, [_step_call, _step_call, _step_call])
    assert got == eager
    assert eager[1][:3] == ["before", ("scale", 3), "after"]


@functools.lru_cache(maxsize=None)
def times_ten(n):
    return n * 10


@functools.lru_cache(maxsize=None)
def times_hundred(n):
    return n * 100


def uses_global_helper(x):
    return x * times_ten(3)


def test_rebound_helper_name_recompiles():
    compiled = ember.compile(uses_global_helper, backend="eager")
    x = torch.ones(2)
    assert compiled(x).tolist() == uses_global_helper(x).tolist()
    global times_ten
    saved = times_ten
    times_ten = times_hundred
    try:
        assert compiled(x).tolist() == uses_global_helper(x).tolist() == [300.0, 300.0]
    finally:
        times_ten = saved


@pytest.mark.parametrize("maxsize", [None, 4])
def test_typed_and_keyword_calls_stay_in_one_graph(maxsize):
    @functools.lru_cache(maxsize=maxsize, typed=True)
    def combine(a, b=1, *, c=0):
        LOG.append(("combine", a, b, c))
        return a * b + c

    def fn(x):
        return x * combine(2, b=3, c=1) + combine(2) + combine(2.0)

    LOG.clear()
    expected = fn(torch.ones(2))
    calls = list(LOG)
    info = combine.cache_info()
    counts = []
    compiled = ember.compile(fn, backend=lambda gm, ex: counts.append(1) or gm, fullgraph=True)
    for _ in range(3):
        assert compiled(torch.ones(2)).tolist() == expected.tolist()
    assert LOG == calls  # every key was cached already: the body never ran again
    assert len(counts) == 1
    assert combine.cache_info().hits == info.hits + 9
    assert combine.cache_info().misses == info.misses


def test_maxsize_zero_runs_the_body_each_call():
    @functools.lru_cache(maxsize=0)
    def scale(n):
        LOG.append(("scale", n))
        return n * 2

    def fn(x):
        return x * scale(3)

    LOG.clear()
    compiled = ember.compile(fn, backend="eager")
    for _ in range(3):
        assert compiled(torch.ones(2)).tolist() == [6.0, 6.0]
    assert LOG == [("scale", 3)] * 3
