"""Errors eager raises from an operation the trace decides itself (unpacking a list into the wrong
number of names, assigning a property without a setter, reading a name defined nowhere) are raised as eager's very exception: a
handler in the frame catches it within one graph; uncaught, the frame breaks at the instruction and
eager raises it (capture/eager_errors.py). They used to break the graph (EB0002) even when caught."""
import pytest
import torch

from ember_test_helpers import CompileCounter, check_raises_same, check_same, compile


class ReadOnly:
    @property
    def value(self):
        return 3


def caught_too_many(x, y):
    try:
        a, b = [x, y, x]
    except ValueError as e:
        return x + len(str(e))
    return a + b


def caught_not_enough(x, y):
    try:
        a, b, c = (x, y)
    except ValueError as e:
        return x * len(e.args[0])
    return a + b + c


def caught_starred(x, y):
    try:
        first, *middle, last = [x]
    except ValueError as e:
        return y - len(str(e))
    return first + last


def caught_property_without_setter(x, y):
    obj = ReadOnly()
    try:
        obj.value = x
    except AttributeError as e:
        return x + len(str(e)) + obj.value
    return y


def caught_in_a_helper(x, y):
    def split(pair):
        a, b = pair
        return a - b
    try:
        return split([x, y, x])
    except ValueError:
        return split([y, x])


@pytest.mark.parametrize("fn", [caught_too_many, caught_not_enough, caught_starred,
                                caught_property_without_setter, caught_in_a_helper])
def test_caught_in_the_frame_one_graph(fn):
    check_same(fn, torch.randn(3), torch.randn(3), graphs=1, fullgraph=True)


def uncaught_unpack(x, y):
    z = x * 2
    a, b = [z, y, x]
    return a + b


def uncaught_property(x, y):
    z = x * 2
    ReadOnly().value = z
    return z


@pytest.mark.parametrize("fn, exc", [(uncaught_unpack, ValueError), (uncaught_property, AttributeError)])
def test_uncaught_raises_as_eager(fn, exc):
    err = check_raises_same(fn, torch.randn(3), torch.randn(3))
    assert type(err) is exc


def test_unpacking_an_iterator_still_breaks():
    """An iterator is consumed only up to the first item too many: that stays eager's to do."""
    def f(x, y):
        try:
            a, b = iter([x, y, x])
        except ValueError:
            return x - 1
        return a + b
    cnt = CompileCounter()
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(compile(f, backend=cnt)(x, y), f(x, y))


def reads_an_undefined_global(x):
    try:
        return x + not_defined_anywhere  # noqa: F821
    except NameError as e:
        return x - len(str(e))


def test_name_error_caught_and_defining_the_name_later_recompiles():
    import builtins
    cnt = CompileCounter()
    compiled = compile(reads_an_undefined_global, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), reads_an_undefined_global(x))
    assert cnt.frame_count == 1
    for namespace in (globals(), vars(builtins)):  # a global, then a builtin of that name
        namespace["not_defined_anywhere"] = 10
        try:
            torch.testing.assert_close(compiled(x), x + 10)
        finally:
            del namespace["not_defined_anywhere"]
        torch.testing.assert_close(compiled(x), reads_an_undefined_global(x))
    assert cnt.frame_count == 3


def test_name_error_uncaught_raises_as_eager():
    def f(x):
        return x * 2 + not_defined_anywhere  # noqa: F821
    err = check_raises_same(f, torch.randn(3))
    assert type(err) is NameError
