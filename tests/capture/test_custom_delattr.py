"""``del obj.name`` on an object made in the frame whose class defines ``__delattr__``: Python calls
it, and it decides (ignore the deletion, record it, or hand it to ``object.__delattr__`` /
``super().__delattr__``). ember broke the graph (EB0008 "with a custom __delattr__"), so
``fullgraph=True`` raised."""
import pytest
import torch

from ember_test_helpers import CompileCounter, check_same, compile


class Guarded:
    def __init__(self, val):
        self.val = val
        self.deletion_attempted = False
        self.other = 1

    def __delattr__(self, attr):
        if attr == "val":
            self.deletion_attempted = True  # refused: `val` stays
        else:
            super().__delattr__(attr)


class Recording:
    def __init__(self):
        self.a = 1
        self.b = 2

    def __delattr__(self, name):
        object.__delattr__(self, name)
        self.deleted = name


def deletes(t):
    g = Guarded(t * 2)
    del g.val
    del g.other
    r = Recording()
    del r.a
    return (t + 1, hasattr(g, "val"), g.deletion_attempted, hasattr(g, "other"), hasattr(r, "a"),
            r.deleted, r.b, g.val)


def test_custom_delattr_is_called_in_the_graph():
    check_same(deletes, torch.ones(3), graphs=1, fullgraph=True)


def deletes_missing(t):
    g = Guarded(1)
    del g.missing  # super().__delattr__ raises AttributeError, as in eager
    return t


def test_custom_delattr_raising_is_eagers_error():
    with pytest.raises(AttributeError) as eager:
        deletes_missing(torch.ones(1))
    with pytest.raises(AttributeError) as compiled:
        compile(deletes_missing, backend=CompileCounter())(torch.ones(1))
    assert str(compiled.value) == str(eager.value)
