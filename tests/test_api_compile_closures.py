"""``ember.compile(closure)``: one cache per closure code (api._ClosureEntry over the code's twin),
as torch.compile keeps compiled code on the code object; answers, argument errors and a
replaced ``__code__`` as in eager."""
import pytest
import torch

import ember


def _make(k, t):
    def f(y, scale=1.0):
        return y * k * scale + t
    return f


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm
    return graphs, backend


def test_closures_of_one_code_share_compiled_code():
    # torch.compile 2.13 compiles 2 graphs here (k static, then automatic dynamic); one per
    # function object compiled 5.
    graphs, backend = _counting()
    x = torch.rand(3)
    for k in (1, 1, 2, 3, 4):
        t = torch.full((3,), float(k))
        f = _make(k, t)
        assert torch.equal(ember.compile(f, backend=backend)(x), f(x))
    assert len(graphs) == 2


def test_each_closure_keeps_its_own_cells_and_defaults():
    fs = [_make(k, torch.full((2,), float(k))) for k in (1, 2, 3)]
    fs[1].__defaults__ = (10.0,)
    compiled = [ember.compile(f, backend="eager") for f in fs]
    x = torch.rand(2)
    for _ in range(2):
        for f, c in zip(fs, compiled):
            assert torch.equal(c(x), f(x))
            assert torch.equal(c(x, scale=3.0), f(x, scale=3.0))


def test_bad_arguments_raise_eagers_type_error():
    f = _make(2, torch.zeros(1))
    c = ember.compile(f, backend="eager")

    def message(fn, *args, **kwargs):
        with pytest.raises(TypeError) as info:
            fn(*args, **kwargs)
        assert info.value.__context__ is None
        return str(info.value)
    for args, kwargs in [((torch.ones(1), 1.0, 2.0), {}), ((), {}), ((torch.ones(1),), {"q": 1})]:
        assert message(c, *args, **kwargs) == message(f, *args, **kwargs)


def test_nonlocal_writes_reach_the_defining_frame():
    def counter():
        n = 0

        def step(x):
            nonlocal n
            n += 1
            return x + n
        return step, lambda: n
    step, read = counter()
    c = ember.compile(step, backend="eager")
    x = torch.zeros(2)
    assert torch.equal(c(x), torch.ones(2)) and read() == 1
    assert torch.equal(c(x), torch.full((2,), 2.0)) and read() == 2


def test_code_replaced_after_compiling_runs_the_new_code():
    f = _make(2, torch.zeros(2))
    c = ember.compile(f, backend="eager")
    x = torch.ones(2)
    assert torch.equal(c(x), f(x))
    g = _make(5, torch.zeros(2))

    def make_other(k, t):
        def other(y, scale=1.0):
            return y - k + t
        return other
    f.__code__ = make_other(0, 0).__code__  # (same free variables, k and t)
    assert torch.equal(c(x), f(x)) and torch.equal(f(x), torch.full((2,), -1.0))
    assert torch.equal(ember.compile(g, backend="eager")(x), g(x))
