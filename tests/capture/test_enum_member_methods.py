"""Methods a program's Enum class defines, called on a member (``Reduction.SUM.apply(t)``), are
inlined like any user method (capture/variables/constant_methods.py): tensors may go in, one
graph, fullgraph=True holds, and a side effect of the method is replayed as in eager. They used to
be called on constants only (a break, EB0036, for a tensor argument). Compared with eager."""
from __future__ import annotations

import enum

import torch

from ember_test_helpers import CompileCounter, assert_same, check_same, compile


class Reduction(enum.Enum):
    SUM = enum.auto()
    MEAN = enum.auto()

    def apply(self, t):
        return t.sum() if self is Reduction.SUM else t.mean()

    def scaled(self, t, *, k=2):
        return self.apply(t) * k + self.value


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 3

    def clamp(self, t):
        return t.clamp(max=float(self))


def test_member_method_with_a_tensor_argument():
    def f(x, red):
        return red.apply(x) + red.scaled(x, k=3)
    check_same(f, torch.randn(4, requires_grad=True), Reduction.SUM, graphs=1)
    check_same(f, torch.randn(4, requires_grad=True), Reduction.MEAN, graphs=1)


def test_int_enum_member_method():
    def f(x):
        return Level.LOW.clamp(x) + Level.HIGH.clamp(x * 4)
    check_same(f, torch.randn(4) * 5, graphs=1)


def test_member_method_side_effect_replayed():
    log = []

    class Tag(enum.Enum):
        A = "a"

        def note(self, n):
            log.append((self.value, n))
            return n * 2

    def f(x):
        return x * Tag.A.note(x.shape[0])
    counter = CompileCounter()
    compiled = compile(f, backend=counter, fullgraph=True)
    x = torch.randn(3)
    assert_same(compiled(x), f(x))
    assert_same(compiled(x), f(x))
    assert log == [("a", 3)] * 4  # (each call logs once, compiled or not)
    assert counter.frame_count == 1


def test_member_property_read_on_every_call():
    reads = []

    class Mode(enum.Enum):
        TRAIN = 1

        @property
        def factor(self):
            reads.append(self.value)
            return self.value * 2

    def f(x):
        return x * Mode.TRAIN.factor
    compiled = compile(f, backend=CompileCounter(), fullgraph=True)
    x = torch.randn(3)
    for _ in range(2):
        assert_same(compiled(x), f(x))
    assert reads == [1] * 4


def test_staticmethod_read_through_a_member():
    class Act(enum.Enum):
        RELU = "relu"

        @staticmethod
        def run(t):
            return torch.relu(t) * 2

    def f(x):
        return Act.RELU.run(x) + Act.run(x)
    check_same(f, torch.randn(4, requires_grad=True), graphs=1)


def test_user_str_repr_format_run_on_every_call():
    calls = []

    class Color(enum.Enum):
        RED = 1

        def __str__(self):
            calls.append("str")
            return f"C<{self.name}>"

        def __repr__(self):
            calls.append("repr")
            return "Color.R"

    class Size(enum.IntEnum):
        BIG = 3

        def __format__(self, spec):
            calls.append("format")
            return "big" + spec

    def f(x):
        s = str(Color.RED) + f"{Color.RED:>8}|{Color.RED!r}|{Size.BIG:x}" + repr(Color.RED)
        return x * len(s), s
    compiled = compile(f, backend=CompileCounter(), fullgraph=True)
    x = torch.randn(3)
    for _ in range(2):
        assert_same(compiled(x), f(x))
    assert calls == ["str", "str", "repr", "format", "repr"] * 4
