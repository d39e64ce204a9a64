"""A function called at a graph break runs through ember as the function object found at run
time (callees.py RuntimeCallee), compiled once per code through its twin (bytecode/closure_twin.py),
as torch.compile compiles a new frame once per code object.

Before: a closure made in the frame ran eagerly at a break (torch compiles it), and a function
read from a variable (guarded by code and globals only) was called as the object seen at
compile time — another object's cells and defaults: wrong answers when a decorated global was
rebound, or a closure with a ``nonlocal`` ran on a second call."""
import functools
import io

import pytest
import torch

import ember

_SINK = io.StringIO()


def _counting():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(sum(n.op in ("call_function", "call_method") for n in gm.graph.nodes))
        return gm
    return graphs, backend


def _nested_int(x, k):
    def inner(y):
        print("break", file=_SINK)
        return y * k + 1
    return inner(x).cos()


def _nested_default(x, k):
    def inner(y, k=k):
        print("break", file=_SINK)
        return y * k + 1
    return inner(x).cos()


def _nested_nonlocal(x):
    n = 0

    def bump(y):
        nonlocal n
        print("break", file=_SINK)
        n += 1
        return y + n
    z = bump(x)
    z = bump(z)
    return z * n


# graphs torch.compile 2.13 makes for these calls (counted with the backend above)
CASES = {
    "closure_over_an_int": (_nested_int, [(2,), (3,), (4,)], [2, 1, 2]),
    "default_from_the_frame": (_nested_default, [(2,), (3,), (4,)], [2, 1, 2]),
    "nonlocal_written_at_a_break": (_nested_nonlocal, [(), ()], [1, 2, 1]),
}


@pytest.mark.usefixtures("without_nested_breaks")
@pytest.mark.parametrize("case", list(CASES))
def test_closure_made_in_the_frame_is_compiled_once_per_code(case):
    fn, extra, torch_graphs = CASES[case]
    ember.reset()
    graphs, backend = _counting()
    compiled = ember.compile(fn, backend=backend)
    for args in extra:
        x = torch.randn(4)
        assert torch.equal(compiled(x, *args), fn(x, *args))
    assert graphs == torch_graphs


def _deco(h):
    def wrapper(x):
        print("break", file=_SINK)
        return h(x) + 1
    return wrapper


G = _deco(torch.sin)


def _calls_global(x):
    return G(x) * 2


def test_rebound_decorated_global_calls_the_new_closure():
    global G
    compiled = ember.compile(_calls_global, backend="eager")
    x = torch.rand(3)
    try:
        for h in (torch.sin, torch.cos, torch.exp, torch.sin):
            G = _deco(h)  # same code and globals, another cell: the guard passes
            assert torch.equal(compiled(x), _calls_global(x))
    finally:
        G = _deco(torch.sin)


def _calls_argument(p, x):
    return p(x) * 2


@pytest.mark.parametrize("as_partial", [False, True])
def test_closure_argument_breaking_inside_uses_its_own_cells(as_partial):
    compiled = ember.compile(_calls_argument, backend="eager")
    x = torch.rand(3)
    for h in (torch.sin, torch.cos, torch.exp):
        p = functools.partial(_deco(h)) if as_partial else _deco(h)
        assert torch.equal(compiled(p, x), _calls_argument(p, x))


def test_defaults_of_a_function_argument_are_the_called_objects():
    def make(k):
        def f(y, k=k):
            print("break", file=_SINK)
            return y + k
        return f
    compiled = ember.compile(_calls_argument, backend="eager")
    x = torch.zeros(2)
    for k in (1.0, 2.0, 3.0):
        assert torch.equal(compiled(make(k), x), _calls_argument(make(k), x))


def test_closure_gradients_and_exceptions_match_eager():
    def fn(x, w):
        def inner(y):
            print("break", file=_SINK)
            if y.sum() > 1e6:
                raise ValueError("too big")
            return (y * w).sum()
        return inner(x) * 2

    compiled = ember.compile(fn, backend="aot_eager")
    x, w = torch.rand(4), torch.rand(4, requires_grad=True)
    compiled(x, w).backward()
    g = w.grad.clone()
    w.grad = None
    fn(x, w).backward()
    assert torch.allclose(g, w.grad)
    with pytest.raises(ValueError, match="too big"):
        compiled(x + 1e7, w)


def test_fuzz_291259_backward_after_a_closure_break():
    # the regression that led here: tests/fuzz/test_regressions.py has the full program
    def f(y):
        def inner(a):
            print("break", file=_SINK)
            return a * y + 2
        t5 = inner(y)
        t5 -= t5 + t5
        y.clamp_(min=0.25)
        return (y + y).sum()
    yl = (-torch.rand(4, dtype=torch.float64)).requires_grad_()
    ember.compile(f, backend="aot_eager")(yl * 1).backward()
    g = yl.grad.clone()
    yl.grad = None
    f(yl * 1).backward()
    assert torch.equal(g, yl.grad)


def test_a_function_made_anew_with_equal_defaults_does_not_recompile():
    # torch.compile guards each default by value (numbers automatic dynamic): 2 graphs for
    # k = 1, 1, 2, 3, 4; pinning the defaults tuple's identity recompiled on every call.
    def make(k):
        def f(y, k=k):
            return y + k
        return f

    def g(fn, x):
        return fn(x) * 2
    graphs, backend = _counting()
    compiled = ember.compile(g, backend=backend)
    x = torch.zeros(2)
    for k in (1.0, 1.0, 2.0, 3.0, 4.0):
        assert torch.equal(compiled(make(k), x), g(make(k), x))
    assert len(graphs) == 2
    f = make(5.0)
    f.__defaults__ = (5.0, 6.0)[1:]  # another tuple, same length: guarded by value
    assert torch.equal(compiled(f, x), g(f, x))
