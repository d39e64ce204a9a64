"""``x ** n`` with an int ``n`` that changes between calls (a symbolic int after the automatic
dynamic recompile), on a tensor that requires grad, under aot_eager: pow's autograd formula compares
the Scalar exponent with 0 (and ``n ** x``'s takes the log of the Scalar base), which a SymInt cannot
do — the joint trace failed with "NYI SymInt equality" and the frame ran eagerly (torch.compile
raises). The exponent is a symbolic float now, the base of ``n ** x`` its value
(lowering.symbolic_pow_as_float)."""
import pytest
import torch

import ember
from ember_test_helpers import REFERENCE, assert_same, compile, reset, stats

pytestmark = pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises on these programs")


def _inplace(x, n):
    y = x * 1
    y.pow_(n)
    return y


PROGRAMS = {
    "operator": lambda x, n: x ** n,
    "torch_pow": lambda x, n: torch.pow(x, n) * 2,
    "method": lambda x, n: x.pow(n).sum(),
    "inplace": _inplace,
    "rpow": lambda x, n: n ** x,
    "mixed": lambda x, n: (x ** n + x ** (n + 1)) / n,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_symbolic_int_power_with_grad_compiles(name):
    fn = PROGRAMS[name]
    reset()
    compiled = compile(fn, backend="aot_eager")
    for n in (2, 3, 4, -1, 5):
        a = (torch.rand(3) + 0.5).requires_grad_()
        b = a.detach().clone().requires_grad_()
        expected, actual = fn(a, n), compiled(b, n)
        assert_same(actual, expected)
        expected.sum().backward()
        actual.sum().backward()
        assert_same(b.grad, a.grad)
    assert stats()["fallbacks"] == 0


def test_int_tensor_power_keeps_its_dtype():
    fn = PROGRAMS["operator"]
    compiled = compile(fn, backend="aot_eager")
    for n in (2, 3, 4):
        x = torch.arange(4)
        assert_same(compiled(x, n), fn(x, n))
