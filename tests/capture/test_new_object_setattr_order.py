"""``obj.name = value`` on an object made in the frame whose class has its own ``__setattr__`` and a
property (or data descriptor) ``name``: Python calls the class's ``__setattr__`` first, and the
property's setter only runs through its ``object.__setattr__``. ember ran the property's setter
directly (the class's ``__setattr__`` skipped: a counter it keeps was one short, a wrong answer),
and its ``object.__setattr__`` wrote the instance dict, never the setter (fuzz seed 4500048,
gen_extra4's ``Box``)."""
import torch

from ember_test_helpers import check_same


class Box:
    def __init__(self, v):
        object.__setattr__(self, "sets", [])
        self.v = v

    def __setattr__(self, name, value):
        self.sets.append(name)
        object.__setattr__(self, name, value)

    @property
    def twice(self):
        return self.v * 2

    @twice.setter
    def twice(self, value):
        self.v = value / 2


class Doubler:
    """A data descriptor written in Python."""

    def __set_name__(self, owner, name):
        self.slot = "_" + name

    def __get__(self, obj, owner=None):
        return self if obj is None else getattr(obj, self.slot)

    def __set__(self, obj, value):
        object.__setattr__(obj, self.slot, value * 2)


class Held:
    d = Doubler()

    def __init__(self, v):
        object.__setattr__(self, "log", [])
        self.d = v

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


class NoSetter:
    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)

    @property
    def ro(self):
        return 1


def test_custom_setattr_runs_before_the_property_setter():
    def fn(x):
        b = Box(x * 1)
        b.twice = x * 4
        b.twice = b.twice + x
        return b.v, len(b.sets), tuple(b.sets), sorted(vars(b))

    check_same(fn, torch.rand(3))


def test_object_setattr_reaches_a_python_data_descriptor():
    def fn(x):
        h = Held(x)
        h.d = h.d + 1
        object.__setattr__(h, "d", x * 3)
        return h.d, tuple(h.log), sorted(vars(h))

    check_same(fn, torch.rand(3))


def test_object_setattr_on_a_property_without_setter_raises_as_eager():
    def fn(x):
        n = NoSetter()
        try:
            n.ro = 2
        except AttributeError as e:
            return x + 1, str(e)
        return x, ""

    check_same(fn, torch.rand(3))
