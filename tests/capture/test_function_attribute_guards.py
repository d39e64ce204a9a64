"""A function attribute the frame read, present or absent, stays guarded: `hasattr(g, "flag")` /
`getattr(g, "scale", 3)` on a function defined outside (a global, a closure's function, a method
reached through an object's class) answered from the first call forever; setting the attribute
after the compile must change the answer as in eager. Also `inspect.unwrap` of torch's optimizer
step inside the frame (it asks `hasattr(step, "__wrapped__")` of torch's own function)."""
import inspect

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile

pytestmark = pytest.mark.skipif(
    REFERENCE, reason="torch.compile (2.13) answers these stale itself (no guard on a function attribute's "
                      "absence) and its id guard on `opt.step` (a new bound method per read) fails on the "
                      "frame that made it")


def _plain(x):
    return x


def _reads_flag(x):
    if hasattr(_plain, "flag"):
        return x + 1
    return x - 1


def _reads_scale(x):
    return x + getattr(_plain, "scale", 3)


def _clear(fn, *names):
    for n in names:
        fn.__dict__.pop(n, None)


def test_absent_attribute_of_global_function_is_guarded():
    _clear(_plain, "flag")
    cnt = CompileCounter()
    cf = compile(_reads_flag, backend=cnt)
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(cf(x), _reads_flag(x))
        _plain.flag = 1
        torch.testing.assert_close(cf(x), x + 1)
        del _plain.flag
        torch.testing.assert_close(cf(x), x - 1)
    finally:
        _clear(_plain, "flag")
    assert cnt.frame_count == 2  # one graph per answer; the third call reuses the first


def test_getattr_default_of_global_function_is_guarded():
    _clear(_plain, "scale")
    cf = compile(_reads_scale)
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(cf(x), x + 3)
        _plain.scale = 10
        torch.testing.assert_close(cf(x), x + 10)
        _plain.scale = 20
        torch.testing.assert_close(cf(x), x + 20)
    finally:
        _clear(_plain, "scale")


def _make_inner():
    def inner(x):
        return x
    return inner


def test_absent_attribute_of_closure_made_function_is_guarded():
    inner = _make_inner()

    def fn(x):
        return x + (1 if hasattr(inner, "marked") else 2)

    cf = compile(fn)
    x = torch.zeros(2)
    torch.testing.assert_close(cf(x), x + 2)
    inner.marked = True
    torch.testing.assert_close(cf(x), x + 1)


def test_absent_attribute_of_method_function_is_guarded():
    class C:
        def m(self):
            return 1

    c = C()

    def fn(x):
        return x + (1 if hasattr(c.m, "marked") else 2)

    cf = compile(fn)
    x = torch.zeros(2)
    torch.testing.assert_close(cf(x), x + 2)
    C.m.marked = True
    torch.testing.assert_close(cf(x), x + 1)
    C.m.marked = 7

    def fn2(x):
        return x + c.m.marked

    cf2 = compile(fn2)
    torch.testing.assert_close(cf2(x), x + 7)
    C.m.marked = 9
    torch.testing.assert_close(cf2(x), x + 9)


@pytest.mark.parametrize("opt_cls", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_unwrap_optimizer_step_in_frame(opt_cls):
    def make():
        p = torch.nn.Parameter(torch.arange(4.0))
        p.grad = torch.full((4,), 0.5)
        return p, opt_cls([p], lr=0.1)

    def step(opt):
        inspect.unwrap(opt.step)(opt)  # the step without its grad-mode wrapper's graph breaks

    (p1, o1), (p2, o2) = make(), make()
    cnt = CompileCounter()
    cs = compile(step, backend=cnt, fullgraph=True)
    with torch.no_grad():
        for _ in range(3):
            step(o1)
            cs(o2)
    torch.testing.assert_close(p1, p2)
    torch.testing.assert_close(o1.state_dict(), o2.state_dict())
    assert cnt.frame_count >= 1


def test_attribute_set_on_torch_python_function_is_guarded():
    relu = torch.nn.functional.relu  # torch's own Python function, not traced into

    def fn(x):
        return x + getattr(relu, "_test_mark", 3)

    cf = compile(fn)
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(cf(x), x + 3)
        relu._test_mark = 1
        torch.testing.assert_close(cf(x), x + 1)
        relu._test_mark = 10
        torch.testing.assert_close(cf(x), x + 10)
        del relu._test_mark
        torch.testing.assert_close(cf(x), x + 3)
    finally:
        relu.__dict__.pop("_test_mark", None)


class _ScaledList(list):
    def scaled(self, x, k=1):
        return x * k


class _ScaledTuple(tuple):
    def scaled(self, x, *, k=1):
        return x * k


@pytest.mark.parametrize("cls, attr", [(_ScaledList, "__defaults__"), (_ScaledTuple, "__kwdefaults__")])
def test_defaults_of_container_subclass_method_are_guarded(cls, attr):
    # the method is reached without a source (looked up on the container's class by the tracker)
    obj = cls([1])
    fn = cls.scaled
    orig = getattr(fn, attr)

    def f(x):
        return obj.scaled(x)

    cf = compile(f)
    x = torch.ones(2)
    try:
        torch.testing.assert_close(cf(x), x)
        setattr(fn, attr, (7,) if attr == "__defaults__" else {"k": 7})
        torch.testing.assert_close(cf(x), x * 7)
    finally:
        setattr(fn, attr, orig)
    torch.testing.assert_close(cf(x), x)


def test_code_of_container_subclass_method_is_guarded():
    class L(list):
        def scaled(self, x):
            return x * 1

    obj = L([1])

    def f(x):
        return obj.scaled(x)

    cf = compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x)
    L.scaled.__code__ = (lambda self, x: x * 100).__code__
    torch.testing.assert_close(cf(x), x * 100)


def test_name_and_doc_reads_are_guarded():
    def g(x):
        return x

    class C:
        def m(self):
            pass

    c = C()

    def f(x):
        return x * (2 if g.__name__ == "g" else 3) * (5 if c.m.__doc__ is None else 7)

    cf = compile(f)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 10)
    g.__name__ = "h"
    torch.testing.assert_close(cf(x), x * 15)
    C.m.__doc__ = "documented"
    torch.testing.assert_close(cf(x), x * 21)


def test_method_code_replaced_in_place_is_seen():
    # what IPython's autoreload does to a class's method: the same function object, new code
    class Block(torch.nn.Module):
        def act(self, x):
            return x * 2

        def forward(self, x):
            return self.act(x) + 1

    m = Block()
    cf = compile(m)
    x = torch.ones(2)
    torch.testing.assert_close(cf(x), x * 2 + 1)
    Block.act.__code__ = (lambda self, x: x * 100).__code__
    torch.testing.assert_close(cf(x), x * 100 + 1)
