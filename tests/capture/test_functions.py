"""Calls: closures, *args/**kwargs, defaults, keyword-only args, nested
functions, comprehensions, lambdas, methods, super(), decorators, recursion."""
import functools

import pytest
import torch

from ember_test_helpers import CompileCounter, check_same, compile


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


# -- helpers the programs call ------------------------------------------------

def helper_affine(x, a=2.0, b=1.0):
    return a * x + b


def helper_varargs(*xs, scale=1.0):
    return sum(xs) * scale


def helper_kwargs(x, **kw):
    for k in sorted(kw):
        x = x + kw[k]
    return x


def helper_kwonly(x, *, p, q=3):
    return x * p + q


def helper_returns_tuple(x):
    return x.sin(), x.cos()


def helper_recursive(x, n):
    if n == 0:
        return x
    return helper_recursive(x * 2, n - 1)


def make_adder(c):
    def add(x):
        return x + c
    return add


def make_counter_closure():
    count = 0

    def bump(x):
        nonlocal count
        count += 1
        return x * count
    return bump


def decorator(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1
    return wrapper


@decorator
def decorated(x):
    return x * 2


class Base:
    def __init__(self, w):
        self.w = w

    def apply(self, x):
        return x * self.w

    @staticmethod
    def static_apply(x):
        return x + 10

    @classmethod
    def class_apply(cls, x):
        return x * cls.FACTOR

    FACTOR = 3


class Derived(Base):
    def apply(self, x):
        return super().apply(x) + 1

    @property
    def double_w(self):
        return self.w * 2


# -- programs -------------------------------------------------------------------

def call_with_defaults(x):
    return helper_affine(x), helper_affine(x, 3.0), helper_affine(x, b=-1.0)


def call_varargs(x, y):
    return helper_varargs(x, y, x), helper_varargs(x, scale=0.5)


def call_kwargs(x, y):
    return helper_kwargs(x, a=y, b=2.0, c=x)


def call_kwonly(x):
    return helper_kwonly(x, p=2), helper_kwonly(x, q=0, p=-1)


def star_unpacking_call(x, y):
    args = (x, y)
    kwargs = {"scale": 2.0}
    return helper_varargs(*args, **kwargs)


def tuple_return_unpack(x):
    s, c = helper_returns_tuple(x)
    return s * s + c * c


def recursion(x):
    return helper_recursive(x, 3)


def closure_over_tensor(x, y):
    def inner(z):
        return z + y
    return inner(x) * inner(y)


def closure_over_python_value(x):
    scale = 3.0

    def inner(z):
        return z * scale
    return inner(x)


def closure_factory(x):
    add5 = make_adder(5)
    addt = make_adder(x)
    return add5(x), addt(x)


def nonlocal_mutation(x):
    total = 0

    def add(v):
        nonlocal total
        total += v
    add(1)
    add(2)
    return x * total


def nested_function_default_capture(x):
    fns = [lambda z, i=i: z * i for i in range(3)]
    return [f(x) for f in fns]


def lambda_inline(x):
    sq = lambda v: v * v  # noqa: E731
    return sq(x) + sq(x + 1)


def list_comprehension(x):
    return [x * i for i in range(3)]


def dict_comprehension(x):
    return {f"k{i}": x + i for i in range(3)}


def generator_expression_sum(x):
    return sum(x * i for i in range(4))


def nested_comprehension(x):
    return [[x[i] * j for j in range(2)] for i in range(x.shape[0])]


def comprehension_with_condition(xs):
    return [x.relu() for x in xs if x.dim() == 1]


def method_calls(x):
    obj = Derived(2.0)
    return obj.apply(x), Base.static_apply(x), Derived.class_apply(x), obj.double_w


def bound_method_object(x):
    obj = Base(x)
    f = obj.apply
    return f(x)


def functools_partial(x):
    f = functools.partial(helper_affine, a=5.0)
    return f(x), f(x, b=0.0)


def decorated_call(x):
    return decorated(x)


def map_and_filter(xs):
    return list(map(lambda v: v * 2, xs)), list(filter(lambda v: v.numel() > 2, xs))


def sorted_with_key(x):
    parts = [x[2:], x[:1], x[1:2]]
    return [p.sum() for p in sorted(parts, key=lambda p: p.numel())]


def keyword_only_program(x, *, scale, shift=1.0):
    return x * scale + shift


def program_with_defaults(x, y=None, n=2, mode="add"):
    if y is None:
        y = torch.ones_like(x)
    if mode == "add":
        return x + y * n
    return x * y * n


def star_args_program(*args):
    return sum(a * i for i, a in enumerate(args))


def star_kwargs_program(x, **kwargs):
    out = x
    for k, v in kwargs.items():
        out = out * v if k.startswith("m") else out + v
    return out


PROGRAMS = [
    (call_with_defaults, (t(3, grad=True),), {}),
    (call_varargs, (t(3, grad=True), t(3, seed=1)), {}),
    (call_kwargs, (t(3), t(3, seed=1)), {}),
    (call_kwonly, (t(3),), {}),
    (star_unpacking_call, (t(2), t(2, seed=1)), {}),
    (tuple_return_unpack, (t(4, grad=True),), {}),
    (recursion, (t(2),), {}),
    (closure_over_tensor, (t(3, grad=True), t(3, seed=2, grad=True)), {}),
    (closure_over_python_value, (t(3),), {}),
    (closure_factory, (t(3),), {}),
    (nonlocal_mutation, (t(3),), {}),
    (nested_function_default_capture, (t(2, grad=True),), {}),
    (lambda_inline, (t(2, grad=True),), {}),
    (list_comprehension, (t(2),), {}),
    (dict_comprehension, (t(2),), {}),
    (generator_expression_sum, (t(3, grad=True),), {}),
    (nested_comprehension, (t(3, 2),), {}),
    (comprehension_with_condition, ([t(3), t(2, 2), t(4)],), {}),
    (method_calls, (t(3),), {}),
    (bound_method_object, (t(3, grad=True),), {}),
    (functools_partial, (t(3),), {}),
    (decorated_call, (t(3),), {}),
    (map_and_filter, ([t(2), t(3), t(4)],), {}),
    (sorted_with_key, (t(6),), {}),
    (keyword_only_program, (t(3),), {"scale": 2.0}),
    (keyword_only_program, (t(3),), {"scale": t(3, seed=5), "shift": -1.0}),
    (program_with_defaults, (t(3),), {}),
    (program_with_defaults, (t(3), t(3, seed=1)), {"n": 3}),
    (program_with_defaults, (t(3),), {"mode": "mul", "y": t(3, seed=2)}),
    (star_args_program, (t(2), t(2, seed=1), t(2, seed=2)), {}),
    (star_kwargs_program, (t(2),), {"madd": 2.0, "b": t(2, seed=1), "mul": 3}),
]


@pytest.mark.parametrize("fn,args,kwargs", PROGRAMS,
                         ids=[f"{i}-{p[0].__name__}" for i, p in enumerate(PROGRAMS)])
def test_functions(fn, args, kwargs):
    check_same(fn, *args, **kwargs)


def test_closure_cell_mutated_across_calls():
    """A closure whose nonlocal counter advances each call: results match eager
    call by call (the cell value is an input to the compiled code)."""
    eager = make_counter_closure()
    compiled = compile(make_counter_closure(), backend=CompileCounter(), fullgraph=True)
    x = t(3)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), eager(x))


def test_compile_as_decorator():
    cnt = CompileCounter()
    from ember_test_helpers import REFERENCE
    if REFERENCE:
        deco = torch.compile(backend=cnt, fullgraph=True)
    else:
        import ember
        deco = ember.compile(backend=cnt, fullgraph=True)

    @deco
    def f(x, y=2):
        return x * y

    x = t(3)
    torch.testing.assert_close(f(x), x * 2)
    torch.testing.assert_close(f(x, y=2), x * 2)
    assert cnt.frame_count == 1


def test_compiled_function_calls_compiled_function():
    """Calling a compiled function from inside a compiled function inlines it."""
    inner_cnt = CompileCounter()
    inner = compile(lambda x: x.sin() + 1, backend=inner_cnt, fullgraph=True)

    def outer(x):
        return inner(x) * 2
    cnt = check_same(outer, t(4, grad=True))
    assert cnt.op_count >= 3  # sin, add and mul all in the outer graph


def test_method_of_object_as_compiled_fn():
    obj = Derived(t(3, seed=11))
    check_same(obj.apply, t(3, grad=True))


# -- annotations of nested functions (evaluated at `def`, kept when the function escapes) -------------
from typing import Callable, Dict, List, Optional  # noqa: E402


class _V:
    pass


def annotated_nested(x):
    def g(a: List[_V], b: Dict[str, _V] = None, c: "Callable[List[_V], _V]" = None) -> Optional[_V]:
        return a
    return g([x + 1])[0], g.__annotations__["a"], g


def test_nested_function_annotations():
    from ember_test_helpers import REFERENCE, stats
    eager = annotated_nested(torch.ones(2))
    got = compile(annotated_nested)(torch.ones(2))
    torch.testing.assert_close(got[0], eager[0])
    assert got[1] == eager[1]
    assert got[2].__annotations__ == eager[2].__annotations__  # the escaped function keeps them
    if not REFERENCE:
        assert stats()["graph_breaks"] == 0


# -- a call whose arguments do not fit: eager's exact TypeError, catchable in the frame ----------------
class _Adder:
    def add(self, elem):
        return elem


def _kw(x, k=None, *, q):
    return x


def bad_calls(x):
    c = _Adder()
    out = []
    for call in (lambda: c.add(), lambda: c.add(1, 2), lambda: _kw(x, q=1, z=2), lambda: _kw(x),
                 lambda: _kw(x, 1, 2, q=3), lambda: _kw(x, x=1, q=2)):
        try:
            call()
        except TypeError as e:
            out.append(str(e))
    return x + 1, out


def test_argument_binding_errors_are_eagers():
    check_same(bad_calls, torch.ones(2))


# -- locals() / vars() / dir() read the frame's variables (also after a graph break) ---------------------
def reads_locals(x, k=2):
    l0 = locals()
    a = 1
    y = x + 1
    z = [q for q in range(2)]

    def inner():
        return a
    return y, sorted(locals()), sorted(l0), "a" in locals(), vars()["k"], dir()


def kwargs_idiom(x, **kw):
    kwargs = locals()
    return x + 1, kwargs


def locals_after_break(x):
    a = 3
    n = x.sum().item()  # a break; `a` is not read after it, but locals() lists it
    return x + 1, sorted(locals())


def test_locals_reads_the_frame():
    check_same(reads_locals, torch.ones(2))
    check_same(kwargs_idiom, torch.ones(2), q=3)
    check_same(locals_after_break, torch.ones(2), graphs=None, fullgraph=False)


def partial_as_key(x):
    d = {}
    p = functools.partial(_kw, q=1)
    d[p] = 5
    return x * d[p], p.keywords, p in d, functools.partial(_kw) in d, isinstance(p, functools.partial)


def test_partial_made_in_frame_as_dict_key():
    check_same(partial_as_key, torch.ones(2))


def _counted():
    def counted(fn):
        def wrapper(*args):
            wrapper.calls += 1
            wrapper.last = args[0].shape[0]
            return fn(*args) * wrapper.calls
        wrapper.calls = 0
        return wrapper

    @counted
    def inc(x):
        return x + 1
    return inc


def test_attribute_of_an_outside_function_assigned_in_the_frame():
    # a decorator counting calls in an attribute of its wrapper: replayed after the graph, no break
    results = []
    for compiled in (False, True):
        inc = _counted()
        fn = lambda x: (inc(inc(x)), inc.calls)  # noqa: E731
        counter = CompileCounter()
        run = compile(fn, backend=counter, fullgraph=True) if compiled else fn
        results.append(([run(torch.ones(2)) for _ in range(3)], dict(inc.__dict__)))
    (expected, expected_attrs), (actual, actual_attrs) = results
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a[0], e[0])
        assert a[1] == e[1]
    assert set(actual_attrs) == set(expected_attrs) and actual_attrs["calls"] == expected_attrs["calls"] == 6
    # inc.calls, an int reached through the frame's free variable (and the wrapper's own cell), is a
    # symbol once it changed (automatic dynamic: torch.compile recompiles a read-only attribute of a
    # closure's function the same way, tests/capture/test_closure_cell_ints.py)
    assert counter.frame_count == 2
