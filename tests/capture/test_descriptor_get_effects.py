"""A descriptor class written in Python whose ``__get__`` does something (capture/variables/objects.py):
it is inlined, so its effects happen once per read, as in eager. It was run for real while tracing
and again by the guard re-reading the attribute on every call: a read counter kept in the
descriptor stood at 2 after the first call (eager: 1)."""
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


class Counting:
    def __init__(self):
        self.reads = 0

    def __get__(self, obj, typ=None):
        self.reads += 1
        return 2.0


class Lazy:
    """The lazy-attribute idiom: computed on first read, then stored in the instance dict."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        self.computed = 0

    def __get__(self, obj, typ=None):
        if obj is None:
            return self
        self.computed += 1
        value = self.fn(obj)
        obj.__dict__[self.name] = value
        return value


def _pair():
    class Holder:
        scale = Counting()

        @Lazy
        def table(self):
            return torch.arange(3.0)
    return Holder(), Holder


def _run(fn, n=3):
    (ref, ref_cls), (got, got_cls) = _pair(), _pair()
    counter = CompileCounter()
    compiled = compile(lambda x: fn(got, got_cls, x), backend=counter)
    for i in range(n):
        x = torch.full((3,), float(i))
        assert_same(compiled(x.clone()), fn(ref, ref_cls, x.clone()), f"call {i}")
        assert got_cls.__dict__["scale"].reads == ref_cls.__dict__["scale"].reads
        assert got_cls.__dict__["table"].computed == ref_cls.__dict__["table"].computed
        assert vars(got).keys() == vars(ref).keys()
    return counter


def test_counting_descriptor_reads_once_per_read():
    _run(lambda obj, cls, x: x * obj.scale + obj.scale)


def test_counting_descriptor_count_returned():
    _run(lambda obj, cls, x: (x * obj.scale, cls.__dict__["scale"].reads))


def test_lazy_attribute_descriptor():
    _run(lambda obj, cls, x: x + obj.table + obj.table)


class _Refusing:
    def __get__(self, obj, typ=None):
        raise AttributeError("not here")


class _WithFallback:
    value = _Refusing()

    def __getattr__(self, name):
        return 5.0 if name == "value" else super().__getattribute__(name)


def test_descriptor_refusing_falls_back_to_getattr():
    """An AttributeError from __get__ hands the read to the class's __getattr__ (as ScriptModule's
    `forward` does)."""
    obj = _WithFallback()

    def fn(x):
        return x * obj.value

    counter = CompileCounter()
    x = torch.randn(3)
    assert_same(compile(fn, backend=counter)(x), fn(x))
    assert counter.frame_count == (0 if REFERENCE else 1)  # (Dynamo 2.13 runs the frame eagerly)
