"""bytecode/closure_twin.py: a closure's code taking its cells as leading arguments runs as the
closure does (cells shared, nonlocal writes seen by the defining frame, tracebacks unchanged)."""
import sys
import traceback

import pytest

from ember.bytecode.closure_twin import closure_twin, closure_twin_code


def _outer(k):
    y = [k]
    z = 5

    def inner(a, /, b=2, *args, c=3, **kw):
        nonlocal z
        z += 1

        def deeper():
            return y[0] + z
        if a == 99:
            raise ValueError("boom")
        return a * y[0] + b + c + deeper() + sum(args) + len(kw), z
    return inner, (lambda: z)


@pytest.mark.parametrize("call", [((1,), {}), ((1, 2, 4, 5), {"c": 1, "q": 1}), ((7, 0), {"c": -1})])
def test_twin_runs_as_the_closure_and_shares_its_cells(call):
    args, kwargs = call
    f_ref, z_ref = _outer(10)
    f, z = _outer(10)
    twin = closure_twin(f)
    assert twin.__name__ == "inner" and twin.__qualname__ == f.__qualname__
    for _ in range(2):  # the nonlocal write lands in the defining frame's cell
        assert twin(*f.__closure__, *args, **kwargs) == f_ref(*args, **kwargs)
        assert z() == z_ref()


def test_twin_raises_with_the_same_traceback_lines():
    f, _ = _outer(1)
    twin = closure_twin(f)

    def lines(fn, *pre):
        try:
            fn(*pre, 99)
        except ValueError as e:
            tb = traceback.extract_tb(e.__traceback__)[-1]
            "".join(traceback.format_exception(e))  # every position walkable
            return tb.lineno, tb.name, tb.line
        raise AssertionError("no exception")
    assert lines(twin, *f.__closure__) == lines(f)


def test_twin_code_is_made_once_per_code_and_not_for_generators_or_class_cells():
    f1, _ = _outer(1)
    f2, _ = _outer(2)
    assert closure_twin_code(f1.__code__) is closure_twin_code(f2.__code__)

    def gen_outer(n):
        def g():
            yield n
        return g

    class A:
        def m(self):
            return super().__repr__()  # reads the __class__ cell
    assert closure_twin_code(gen_outer(1).__code__) is None
    assert closure_twin_code(A.m.__code__) is None

    def plain(x):
        return x + 1
    assert closure_twin_code(plain.__code__) is plain.__code__  # no cells: its own twin


@pytest.mark.skipif(sys.version_info < (3, 11), reason="ember supports 3.11+")
def test_twin_of_a_closure_over_a_cell_it_defines_itself():
    def outer():
        a = 1

        def inner():
            b = a + 1

            def innermost():
                return b * 10
            return innermost()
        return inner
    f = outer()
    assert closure_twin(f)(*f.__closure__) == f() == 20
