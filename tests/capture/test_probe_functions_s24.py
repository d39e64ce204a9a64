"""Python functions and builtins called from compiled code: programs a probe found answering
differently from eager (or breaking where torch.compile makes one graph). Each is compared with
eager; graph counts are torch.compile's where it makes one graph."""
import operator

import torch

from ember_test_helpers import check_same, stats


# -- operator.setitem / delitem on a container holding a tensor act on the container ----------

def test_operator_setitem_of_a_tensor_into_a_dict():
    def f(x):
        d = {"a": 1}
        operator.setitem(d, "b", x)
        return d
    check_same(f, torch.ones(2), graphs=0)


def test_operator_setitem_of_a_tensor_into_a_list():
    def f(x):
        lst = [1, 2]
        operator.setitem(lst, 0, x * 2)
        return lst
    check_same(f, torch.ones(2))


def test_operator_getitem_of_a_list_of_tensors():
    def f(x):
        return operator.getitem([x, x + 1], 1) * 2
    check_same(f, torch.ones(2))


# -- an instance __dict__ written by the frame decides later attribute reads -------------------

class _NonDataDescriptor:
    def __get__(self, obj, typ=None):
        return 42


class _Holder:
    d = _NonDataDescriptor()
    c = 7

    def m(self):
        return 1


def _holder():
    h = _Holder()
    h.w = 1
    return h


def test_instance_dict_write_shadows_a_non_data_descriptor():
    def f(x, u):
        u.__dict__["d"] = 1
        return x + u.d
    check_same(f, torch.zeros(1), _holder())


def test_instance_dict_write_shadows_a_class_attribute():
    def f(x, u):
        u.__dict__["c"] = 1
        return x + u.c
    check_same(f, torch.zeros(1), _holder())


def test_instance_dict_write_shadows_a_method():
    def f(x, u):
        u.__dict__["m"] = lambda: 5
        return x + u.m()
    check_same(f, torch.zeros(1), _holder())


def test_instance_dict_write_of_a_new_attribute_then_read():
    def f(x, u):
        u.__dict__["zz"] = 3
        vars(u)["yy"] = 4
        return x + u.zz + u.yy
    check_same(f, torch.zeros(1), _holder())
    assert stats()["graph_breaks"] == 0


def test_instance_dict_pop_then_hasattr():
    def f(x, u):
        d = u.__dict__
        d.pop("w", None)
        d.setdefault("c", 11)
        return x + u.c, (u.w if hasattr(u, "w") else 0)
    check_same(f, torch.zeros(1), _holder())


def test_instance_dict_write_after_a_break_then_read():
    def f(x):
        u = _Holder()
        a = u.d
        torch._dynamo.graph_break()
        u.__dict__["d"] = 1
        return x + a + u.d, a, u.d
    check_same(f, torch.zeros(1), graphs=None, fullgraph=False)
