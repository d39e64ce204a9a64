"""Constructs that used to make a whole frame run eagerly (or answer wrongly) and now compile
like torch.compile does, or break at the one instruction: class patterns in ``match``,
``Tensor.data``, numpy calls (a break at the call), and ``**kwargs`` key order across calls.
"""
import numpy as np
import torch

from ember_test_helpers import CompileCounter, assert_same, check_same, compile, stats


class Point:
    __match_args__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y


class Circle:
    def __init__(self, r):
        self.r = r


def _classify(t, shape):
    match shape:
        case Point(0, y):
            return t + y
        case Point(x=x, y=0):
            return t * x
        case Circle(r=r) if r > 1:
            return t - r
        case int(n) | float(n):
            return t * n
        case [Point(x, _), *_]:
            return t + 100 * x
        case _:
            return -t


def test_match_class_patterns():
    x = torch.randn(3)
    for shape in (Point(0, 5), Point(2, 0), Point(1, 1), Circle(3), Circle(0.5), 4, 2.5,
                  [Point(7, 8)], "other"):
        check_same(_classify, x, shape)


def test_match_class_missing_attribute_is_no_match():
    class Empty:
        pass

    def fn(t, obj):
        match obj:
            case Circle(r=r):
                return t + r
            case _:
                return t * 2
    e = Empty()
    e.__class__ = Circle  # an instance of Circle without `r`
    check_same(fn, torch.randn(3), e)


def test_tensor_data():
    def fn(x, w):
        y = x * 2
        y.data.mul_(0.5)               # writes through .data reach y
        return y.data * 2 + x, w.data.sum(), y.data.requires_grad
    check_same(fn, torch.randn(3, requires_grad=True), torch.randn(3))


def test_numpy_call_breaks_at_the_call():
    def fn(x):
        y = x + 1
        k = float(np.sqrt(4.0))  # NumPy of constants: folded (one graph, as torch.compile)
        return y * k
    check_same(fn, torch.randn(3), graphs=1, fullgraph=False)

    def draws(x):
        y = x + 1
        k = float(np.random.default_rng(0).random())  # NumPy's RNG: a break at the call
        return y * k
    check_same(draws, torch.randn(3), graphs=2, fullgraph=False)
    assert stats()["fallbacks"] == 0


def _kwargs_fn(x, **kwargs):
    return x + 1, list(kwargs), {**kwargs, "z": 0}


def test_kwargs_order_is_guarded():
    counter = CompileCounter()
    compiled = compile(_kwargs_fn, backend=counter)
    x = torch.randn(2)
    for kw in ({"c": 1, "b": 2, "a": 3}, {"a": 1, "b": 2, "c": 3}, {"c": 1, "b": 2, "a": 3}):
        assert_same(compiled(x, **kw), _kwargs_fn(x, **kw))
    assert counter.frame_count == 2  # one entry per order


def test_kwargs_order_after_pop_and_splat():
    def inner(**kw):
        return list(kw)

    def fn(x, **kwargs):
        kwargs.pop("b", None)
        return x * 2, inner(**kwargs), tuple(dict(kwargs))
    compiled = compile(fn, backend=CompileCounter())
    x = torch.randn(2)
    for kw in ({"y": 1, "b": 2, "a": 0}, {"a": 0, "b": 1, "y": 2}, {"a": 0, "b": 1, "y": 2}):
        assert_same(compiled(x, **kw), fn(x, **kw))
    assert stats()["recompiles"] == 1


def test_boolean_mask_breaks_at_the_index():
    def fn(x):
        y = x.sin() * 2
        z = y[y > 0]            # data-dependent shape: the index runs eagerly, the rest compiles
        return z.sum() + y.mean()
    check_same(fn, torch.randn(8, requires_grad=True), graphs=2, fullgraph=False)
    assert stats()["fallbacks"] == 0 and stats()["graph_breaks"] == 1


def test_fstring_of_tensor_breaks_at_the_format():
    def fn(x):
        y = x + 1
        text = f"value {y.sum():.3f} of {y.shape}"
        return y * len(text)
    check_same(fn, torch.randn(3), graphs=2, fullgraph=False)
    assert stats()["fallbacks"] == 0


def test_fstring_in_loop_and_try():
    def fn(x):
        out = []
        for i in range(3):
            out.append(f"{x[i]}")   # the list's bound append is live across each break
        try:
            tail = f"{x.sum():.1f}"
        except ValueError:
            tail = "!"
        return x * 2, out, tail
    check_same(fn, torch.randn(3), graphs=None, fullgraph=False)
    assert stats()["fallbacks"] == 1  # a break inside the loop skips the frame, as torch.compile
