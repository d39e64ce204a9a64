"""Every recompile path works for every kind of signature.

A guard failure re-evaluates the guards one at a time (for the recompile reason) through a
generated function with the user's signature; that function, the entry, the binder and the
resume/callee paths must all be called correctly for positional-only parameters, ``*args``,
keyword-only parameters, ``**kwargs``, defaults, methods and ``nn.Module.forward``.
"""
import pytest
import torch
import torch.nn as nn

from ember_test_helpers import (assert_same, clone_inputs, collect_warnings, compile, CompileCounter,
                                recompile_limit, stats)


def t(*shape, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g)


def _break():
    print("", end="")  # a graph break


def varargs(*xs):
    return xs[0] + 1


def varargs_break(*xs):
    y = xs[0] + 1
    _break()
    return y * len(xs)


def posonly(a, b=2, /, c=3):
    return a * b + c


def posonly_break(a, b=2, /, c=3):
    y = a * b
    _break()
    return y + c


def kwonly(a, *, k, j=1.5):
    return a * k + j


def kwonly_break(a, *, k, j=1.5):
    y = a * k
    _break()
    return y + j


def varkw(a, **kw):
    return a + sum(kw.values()) + len(kw)


def varkw_break(a, **kw):
    y = a + len(kw)
    _break()
    return y + sum(kw.values())


def everything(a, /, b, *rest, k, j=2, **kw):
    return a + b + k + j + len(rest) + len(kw)


def everything_break(a, /, b, *rest, k, j=2, **kw):
    y = a + b
    _break()
    return y + k + j + len(rest) + len(kw)


def _shape_cases(n):
    """Argument sets whose first tensor changes shape (each new shape recompiles)."""
    return [t(n), t(n + 1), t(n), t(n + 2)]


CASES = {
    "varargs": (varargs, lambda x: ((x, x), {})),
    "varargs_one": (varargs, lambda x: ((x,), {})),
    "posonly": (posonly, lambda x: ((x,), {})),
    "posonly_all": (posonly, lambda x: ((x, 3.0, 4.0), {})),
    "posonly_kw_c": (posonly, lambda x: ((x, 3.0), {"c": x})),
    "kwonly": (kwonly, lambda x: ((x,), {"k": x})),
    "kwonly_j": (kwonly, lambda x: ((x,), {"k": 2.0, "j": x})),
    "varkw": (varkw, lambda x: ((x,), {"p": 1.0, "q": x})),
    "varkw_named_like_param": (varkw, lambda x: ((), {"a": x, "kw": 2.0})),
    "everything": (everything, lambda x: ((x, x, 1, 2), {"k": x, "zz": 1})),
    "everything_min": (everything, lambda x: ((x, 1.0), {"k": 2.0})),
    "everything_kw_a": (everything, lambda x: ((x, 1.0), {"k": 2.0, "a": 5})),
}


def _check(fn, make_args, sizes, counter=None, dynamic=None):
    compiled = compile(fn, backend=counter or CompileCounter(), dynamic=dynamic)
    for n in sizes:
        args, kwargs = make_args(t(n))
        expected = fn(*clone_inputs(args), **clone_inputs(kwargs))
        actual = compiled(*clone_inputs(args), **clone_inputs(kwargs))
        assert_same(actual, expected)
    return compiled


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("with_break", [False, True])
@pytest.mark.parametrize("dynamic", [False, None])
def test_recompile_on_new_shape(name, with_break, dynamic):
    fn, make_args = CASES[name]
    if with_break:
        fn = globals()[fn.__name__ + "_break"]
    _check(fn, make_args, [2, 3, 2, 4, 3], dynamic=dynamic)
    if dynamic is False:
        assert stats()["recompiles"] >= 2  # shapes 3 and 4 recompiled (resume functions may add more)
    else:
        # automatic dynamic: 3 recompiles with a symbolic size, which 4 reuses
        assert stats()["recompiles"] >= 1
    assert stats()["fallbacks"] == 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_recompile_limit_goes_eager(name):
    fn, make_args = CASES[name]
    with recompile_limit(2), collect_warnings() as msgs:
        _check(fn, make_args, [2, 3, 4, 5, 2], dynamic=False)  # (a recompile per size)
    assert any("recompile_limit" in m for m in msgs), msgs


class StarInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, *inputs, scale=1.0, **extra):
        y = self.lin(inputs[0]) * scale
        for v in extra.values():
            y = y + v
        return y + len(inputs)


class StarInputsBreak(StarInputs):
    def forward(self, *inputs, scale=1.0, **extra):
        y = self.lin(inputs[0]) * scale
        _break()
        for v in extra.values():
            y = y + v
        return y + len(inputs)


@pytest.mark.parametrize("cls", [StarInputs, StarInputsBreak])
def test_module_forward_star_inputs_recompiles(cls):
    torch.manual_seed(0)
    m = cls()
    cm = compile(m, backend=CompileCounter())
    for rows, extra in [(2, {}), (3, {}), (3, {"b": 1.0}), (2, {"b": 1.0, "c": 2.0})]:
        x = t(rows, 4)
        assert_same(cm(x, x, scale=2.0, **extra), m(x, x, scale=2.0, **extra))
        assert_same(cm(x, **extra), m(x, **extra))
    assert stats()["fallbacks"] == 0
    assert stats()["recompiles"] >= 3


class Outer(nn.Module):
    """A submodule with `*args` forward called at a break: compiled through its own cache."""

    def __init__(self):
        super().__init__()
        self.inner = StarInputs()

    def forward(self, x):
        _break()
        return self.inner(x, x, scale=0.5) + self.helper(x, 1, k=x)

    def helper(self, *args, k, **kw):
        return args[0] * args[1] + k


def test_callee_at_break_with_varargs_recompiles():
    torch.manual_seed(0)
    m = Outer()
    cm = compile(m, backend=CompileCounter())
    for rows in [2, 3, 2, 5]:
        x = t(rows, 4)
        assert_same(cm(x), m(x))
    assert stats()["fallbacks"] == 0


def test_method_varargs_recompiles():
    class A:
        def __init__(self):
            self.w = 2.0

        def f(self, *xs, **kw):
            return xs[0] * self.w + len(kw)

    a = A()
    cf = compile(a.f, backend=CompileCounter(), dynamic=False)
    for n in [2, 3, 4]:
        x = t(n)
        assert_same(cf(x, x, z=1), a.f(x, x, z=1))
    assert stats()["recompiles"] == 2
