"""``operator.length_hint``: the length of a list, tuple, dict or set, and the items left of a list
iterator (advanced or reversed) are known to the trace: one graph, as torch.compile (it used to
break the graph, EB0037). Compared with eager."""
import operator

import torch

from ember_test_helpers import check_same


def test_length_hint_of_containers_and_list_iterators():
    def f(x):
        lst = [1, 2, 3]
        it = iter(lst)
        next(it)
        rev = reversed(lst)
        n = operator.length_hint(lst) + operator.length_hint((1, 2)) + operator.length_hint({"a": 1})
        n += operator.length_hint({1, 2, 3, 4}) * 10 + operator.length_hint(it) * 100
        n += operator.length_hint(rev) * 1000
        return x * n
    check_same(f, torch.randn(3, requires_grad=True), graphs=1)


def test_length_hint_follows_a_list_the_frame_grows():
    def f(x, lst):
        it = iter(lst)
        lst.append(x)
        return x * operator.length_hint(it), lst
    check_same(f, torch.randn(3), [1, 2], graphs=1)
