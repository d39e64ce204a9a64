"""``operator.neg(v)``, ``operator.lt(a, b)``, ``operator.not_(v)`` ... on objects of user classes do
what the operator syntax does: they run the class's own ``__neg__`` / ``__lt__`` / ``__bool__``
(``Translator.unary_op`` / ``compare_op``, shared with the opcodes). They used to break the graph
(EB0037 / EB0038) where ``-v`` and ``a < b`` were traced."""
import functools
import operator

import pytest
import torch

from ember_test_helpers import check_same


class Boxed:
    def __init__(self, t):
        self.t = t

    def __neg__(self):
        return Boxed(-self.t)

    def __pos__(self):
        return Boxed(self.t * 1)

    def __invert__(self):
        return Boxed(self.t + 100)

    def __lt__(self, other):
        return self.t.shape[0] < other.t.shape[0]

    def __le__(self, other):
        return self.t.shape[0] <= other.t.shape[0]

    def __eq__(self, other):
        return isinstance(other, Boxed) and self.t.shape == other.t.shape

    __hash__ = object.__hash__

    def __bool__(self):
        return self.t.dim() > 1


def unary_functions(x):
    b = Boxed(x)
    return operator.neg(b).t + operator.pos(b).t * 2 + operator.invert(b).t * 3


def comparison_functions(x, y):
    a, b = Boxed(x), Boxed(y)
    flags = [operator.lt(a, b), operator.le(a, b), operator.gt(a, b), operator.ge(a, b),
             operator.eq(a, b), operator.ne(a, b)]
    return x * sum(flags) + len(flags)


def truth_functions(x, y):
    return x * (operator.truth(Boxed(x)) + 2 * operator.not_(Boxed(y)) + 4 * operator.not_(Boxed(x)))


def operators_as_values(x, y):
    # the operator functions passed around, as map / sorted / reduce take them
    negated = list(map(operator.neg, [Boxed(x), Boxed(y)]))
    smallest = functools.reduce(lambda p, q: p if operator.le(p, q) else q, [Boxed(y), Boxed(x)])
    return negated[0].t + negated[1].t.sum() + smallest.t.sum()


@pytest.mark.parametrize("fn, args", [
    (unary_functions, lambda: (torch.randn(3),)),
    (comparison_functions, lambda: (torch.randn(3), torch.randn(4))),
    (comparison_functions, lambda: (torch.randn(4), torch.randn(4))),
    (truth_functions, lambda: (torch.randn(2, 3), torch.randn(3))),
    (operators_as_values, lambda: (torch.randn(2), torch.randn(3))),
], ids=["unary", "compare-lt", "compare-eq", "truth", "as-values"])
def test_operator_functions_run_the_class_dunders(fn, args):
    check_same(fn, *args(), graphs=1, fullgraph=True)


def test_operator_functions_on_tensors_and_numbers_unchanged():
    def f(x, n):
        return operator.neg(x) + operator.lt(n, 3) + operator.not_(n) + operator.eq(x, x).float()
    check_same(f, torch.randn(3), 2, graphs=1, fullgraph=True)
