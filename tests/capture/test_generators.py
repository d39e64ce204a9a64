"""Generators run lazily, step by step as the program consumes them.

Each test runs a program eagerly and compiled and compares the outputs and the
Python side effects (a log list the generators append to), in order: a
generator body must run exactly as far as eager runs it, at the same points.
"""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile

LOG = []


def gen(x, n=5):
    for i in range(n):
        LOG.append(("gen", i))
        yield x + i


def gen_finally(x):
    try:
        LOG.append("start")
        yield x + 1
        LOG.append("after first")
        yield x + 2
    finally:
        LOG.append("closed")


def gen_return(x):
    yield x + 1
    LOG.append("returning")
    return 7


def gen_delegate(x):
    r = yield from gen_return(x)
    LOG.append(("delegate got", r))
    yield x * r


def gen_delegate_finally(x):
    LOG.append("outer")
    yield from gen_finally(x)


def echo(x):
    total = x
    while True:
        got = yield total
        LOG.append(("got", type(got).__name__))
        if got is None:
            return
        total = total + got


def _next_one(x):
    return next(gen(x))


def _for_break(x):
    out = x
    for v in gen(x):
        out = out + v
        if len(LOG) >= 2:
            break
    LOG.append("after loop")
    return out


def _genexpr_any(x):
    hit = any(LOG.append(i) or i == 1 for i in range(5))
    return x + 1, hit


def _genexpr_all(x):
    ok = all(LOG.append(i) is None and i < 2 for i in range(5))
    return x + 1, ok


def _zip_gens(x):
    out = []
    for a, b in zip(gen(x, 3), gen(x * 2, 2)):
        LOG.append("body")
        out.append(a + b)
    return out


def _enumerate_gen(x):
    out = x
    for i, v in enumerate(gen(x), start=1):
        out = out + v * i
        if i == 2:
            break
    return out


def _map_filter_lazy(x):
    def f(v):
        LOG.append(("f", v))
        return v * 2
    m = map(f, [1, 2, 3, 4])
    first = next(m)
    LOG.append("between")
    evens = filter(lambda v: LOG.append(("p", v)) or v > 4, m)
    return x + first + next(evens)


def _list_of_gen(x):
    return list(gen(x, 3))


def _yield_from(x):
    LOG.append("before")
    items = list(gen_delegate(x))
    return items


def _send(x):
    g = echo(x)
    a = next(g)
    b = g.send(x)
    c = g.send(2.0)
    try:
        g.send(None)
    except StopIteration:
        LOG.append("stopped")
    return a, b, c


def _finally_on_break(x):
    out = x
    for v in gen_finally(x):
        out = out + v
        break
    LOG.append("after break")
    return out * 2


def _finally_on_next(x):
    y = next(gen_finally(x))
    LOG.append("after next")
    return y


def _finally_exhausted(x):
    return sum(gen_finally(x))


def _finally_in_local(x):
    g = gen_finally(x)
    y = next(g)
    LOG.append("still held")
    z = next(g)
    LOG.append("end")
    return y + z


def _close_explicit(x):
    g = gen_finally(x)
    y = next(g)
    g.close()
    LOG.append("after close")
    return y


def _yield_from_finally(x):
    g = gen_delegate_finally(x)
    y = next(g)
    g.close()
    return y


def _stop_iteration_value(x):
    g = gen_return(x)
    a = next(g)
    try:
        next(g)
    except StopIteration as e:
        LOG.append(("value", e.value))
    return a


def _next_default(x):
    g = gen(x, 1)
    a = next(g)
    b = next(g, None)
    return a, b


def _unpack(x):
    a, b, c = gen(x, 3)
    return a + b + c


def _nested_genexpr(x):
    return sum(v * w for v in gen(x, 2) for w in (1, 2))


def _star(x):
    return torch.stack([*gen(x, 3)])


def _in_check(x):
    found = 2 in (LOG.append(i) or i for i in range(10))
    return x + 1, found


def _join_genexpr(x):
    text = ",".join(str(i) for i in range(3))
    return x + len(text)


def _islice_lazy(x):
    import itertools
    first_two = list(itertools.islice(gen(x, 5), 2))       # pulls two items only
    every_other = list(itertools.islice(gen(x, 5), 1, 4, 2))
    return first_two, every_other


def _chain_lazy(x):
    import itertools
    c = itertools.chain(gen(x, 2), gen(x * 2, 2))
    a = next(c)
    b = next(c)
    LOG.append("between")
    rest = list(itertools.chain.from_iterable([c, gen(x, 1)]))
    return a, b, rest, list(itertools.repeat(x, 2))


def _helper_holds_generator(x):
    def helper(t):
        g = gen_finally(t)
        return next(g)          # g dies when helper returns: its finally runs then
    y = helper(x)
    LOG.append("after helper")
    return y


def _sorted_with_key_over_generators(x):
    holders = [[gen_finally(x)], [gen_finally(x * 2)]]
    for h in holders:
        next(h[0])

    def key(h):
        return len(h)
    ordered = sorted(holders, key=key)  # the generators stay alive through the key calls
    LOG.append("sorted")
    return len(ordered)


PROGRAMS = [_helper_holds_generator, _sorted_with_key_over_generators, _join_genexpr, _islice_lazy, _chain_lazy, _next_one, _for_break, _genexpr_any, _genexpr_all, _zip_gens, _enumerate_gen,
            _map_filter_lazy, _list_of_gen, _yield_from, _send, _finally_on_break, _finally_on_next,
            _finally_exhausted, _finally_in_local, _close_explicit, _yield_from_finally,
            _stop_iteration_value, _next_default, _unpack, _nested_genexpr, _star, _in_check]


@pytest.mark.parametrize("fn", PROGRAMS, ids=[p.__name__.strip("_") for p in PROGRAMS])
def test_generator_semantics(fn):
    x = torch.randn(3)
    LOG.clear()
    expected = fn(x.clone())
    eager_log = list(LOG)
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    LOG.clear()
    actual = compiled(x.clone())
    assert_same(actual, expected)
    assert LOG == eager_log
    assert counter.frame_count == 1
    LOG.clear()
    again = compiled(x.clone())  # cached entry: the replayed side effects are the same
    assert_same(again, expected)
    assert LOG == eager_log
    assert counter.frame_count == 1


def test_unstarted_generator_across_break():
    """A generator made but not started before a graph break is rebuilt by calling it again."""
    def fn(x):
        g = gen(x, 3)
        print("break")
        return list(g)
    x = torch.randn(3)
    LOG.clear()
    expected = fn(x.clone())
    eager_log = list(LOG)
    compiled = compile(fn, backend=CompileCounter())
    LOG.clear()
    assert_same(compiled(x.clone()), expected)
    assert LOG == eager_log


def test_started_generator_across_break_runs_eagerly():
    """A half-run generator cannot be handed over at a break: correct (eager) results."""
    def fn(x):
        g = gen(x, 3)
        a = next(g)
        print("break")
        return a + sum(g)
    x = torch.randn(3)
    LOG.clear()
    expected = fn(x.clone())
    eager_log = list(LOG)
    compiled = compile(fn, backend=CompileCounter())
    LOG.clear()
    assert_same(compiled(x.clone()), expected)
    assert LOG == eager_log


# -- a started generator live across a graph break (or returned half-run) ---------------------------
# It cannot be rebuilt, so the frame breaks where it was made instead (torch.compile restarts the
# same way): that call runs eagerly and the generator is a real one from then on. Only for a
# generator whose closing runs no code (no try/with, no delegation): the compiled code holds a real
# generator slightly longer than eager's frame, so a finally would run late. Those run eagerly.

def _started_across_break(x):
    g = gen(x, 4)
    a = next(g)
    print("break")
    b = next(g)
    return a + b, list(g)


def _started_from_callee_across_break(x):
    g = _make_gen(x)
    a = next(g)
    print("break")
    return a + next(g)


def _make_gen(x):
    return gen(x + 1, 3)


def _genexpr_started_across_break(x):
    g = (x * i for i in range(4))
    a = next(g)
    print("break")
    return a + next(g), list(g)


def _returned_half_run(x):
    g = gen(x, 3)
    return next(g) * 2, g


def _finally_gen_deleted_after_break(x):
    g = gen_finally(x)
    a = next(g)
    print("break")
    b = next(g)
    del g  # eager closes it here: "closed" is logged before the next line
    LOG.append("after del")
    return a + b


@pytest.mark.parametrize("fn", [_started_across_break, _started_from_callee_across_break,
                                _genexpr_started_across_break, _returned_half_run,
                                _finally_gen_deleted_after_break])
def test_started_generator_across_break_or_returned(fn):
    from ember_test_helpers import REFERENCE, stats
    if REFERENCE and fn is _started_from_callee_across_break:
        pytest.skip("torch.compile 2.13 runs this generator one item further than eager (its bug)")
    x = torch.randn(3)
    LOG.clear()
    expected = fn(x.clone())
    if isinstance(expected, tuple) and not isinstance(expected[-1], torch.Tensor) and \
            hasattr(expected[-1], "__next__"):
        expected = (expected[0], list(expected[1]))
    eager_log = list(LOG)
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for _ in range(2):
        LOG.clear()
        actual = compiled(x.clone())
        if fn is _returned_half_run:
            actual = (actual[0], list(actual[1]))
        assert_same(actual, expected)
        assert LOG == eager_log
    if not REFERENCE and fn is _returned_half_run:
        assert stats()["fallbacks"] == 0, stats()
        assert counter.frame_count >= 1
    elif not REFERENCE and fn is not _finally_gen_deleted_after_break:
        # a half-run generator live across a break: the frame is skipped, as torch.compile does
        assert stats()["fallbacks"] == 1, stats()
