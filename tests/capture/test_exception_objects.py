"""User exceptions made in the frame around traced values (``raise Err("bad", x * 2)``): raised
and caught inside the frame they stay in one graph, as torch.compile's; one that leaves the frame
is made and raised by eager (ember/capture/variables/exception_objects.py)."""
import sys

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, check_same, clone_inputs, compile

# torch.compile runs these frames eagerly (str(e), a subclass's method, sys.exception() in the
# handler: 0 graphs); ember keeps them in one
WHOLE = 0 if REFERENCE else 1


class TensorError(Exception):
    def __init__(self, msg, t):
        super().__init__(msg)
        self.t = t

    def scaled(self):
        return self.t * 3


class BareError(Exception):  # its __init__ does not call its base's: args are what __new__ kept
    def __init__(self, t):
        self.t = t


class SubError(TensorError):
    pass


def _raise_in_callee(x):
    raise TensorError("bad", x * 2)


def test_raised_in_callee_caught_in_caller_one_graph():
    def f(x):
        try:
            _raise_in_callee(x)
        except TensorError as e:
            return e.t + 1
    check_same(f, torch.randn(3), fullgraph=False)


def test_handler_reads_args_str_and_type():
    def f(x):
        try:
            raise TensorError("msg", x.sin())
        except TensorError as e:
            return e.t.cos(), e.args, str(e), repr(e), isinstance(e, Exception), type(e) is TensorError
    check_same(f, torch.randn(3), fullgraph=False, graphs=WHOLE)


def test_methods_subclass_and_bare_init():
    def f(x):
        try:
            raise SubError("s", x * 2)
        except TensorError as e:
            a = e.scaled()
        try:
            raise BareError(x + 1)
        except BareError as e:
            return a, e.t * 2, e.args
    # (BareError's args hold the tensor __new__ kept: only the count of them is read here)
    def g(x):
        a, b, args = f(x)
        return a, b, len(args)
    check_same(g, torch.randn(3), fullgraph=False, graphs=WHOLE)


def test_builtin_exception_with_tensor_argument():
    def f(x):
        try:
            raise ValueError(x * 2, "k")
        except ValueError as e:
            return e.args[0] + 1, e.args[1]
    check_same(f, torch.randn(3), fullgraph=False)


def test_handler_writes_attributes_and_nested_finally():
    def f(x):
        try:
            try:
                _raise_in_callee(x)
            finally:
                x = x * 5
        except KeyError:
            return x
        except TensorError as e:
            e.extra = x * 4
            e.t = e.t + 1
            return e.t + e.extra, e.__context__ is None, e.__cause__ is None
    check_same(f, torch.randn(3), fullgraph=False)


def test_loop_and_sys_exception():
    def f(x):
        out = []
        for i in range(2):
            try:
                raise TensorError("i", x * i)
            except TensorError as e:
                out.append(sys.exception().t)
        return out
    check_same(f, torch.randn(3), fullgraph=False, graphs=WHOLE)


def test_never_raised():
    def f(x):
        e = TensorError("never raised", x + 1)
        return e.t * 2, e.args
    check_same(f, torch.randn(3), fullgraph=False)


def test_gradient_through_the_exception():
    def f(x):
        try:
            _raise_in_callee(x.sin())
        except TensorError as e:
            return (e.t * x).sum()
    check_same(f, torch.randn(3, requires_grad=True), fullgraph=False)


def _raises_same(f, *args):
    """Eager and compiled raise the same exception (type, message, its tensor, cause, context)."""
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    caught = []
    for fn in (f, compiled, compiled):
        with pytest.raises(Exception) as info:
            fn(*clone_inputs(args))
        caught.append(info.value)
    eager = caught[0]
    for got in caught[1:]:
        assert type(got) is type(eager) and str(got) == str(eager)
        assert type(got.__cause__) is type(eager.__cause__) and type(got.__context__) is type(eager.__context__)
        for a, b in ((got, eager), (got.__cause__, eager.__cause__)):
            if hasattr(b, "t"):
                torch.testing.assert_close(a.t, b.t)
    return cnt


@pytest.mark.parametrize("case", ["raise", "reraise", "made_before", "from"])
def test_uncaught_is_made_and_raised_by_eager(case):
    def f_raise(x):
        y = x + 1
        raise TensorError("bad", y * 2)

    def f_reraise(x):
        try:
            _raise_in_callee(x)
        except TensorError:
            x = x + 1
            raise

    def f_made_before(x):
        err = TensorError("bad", x * 2)
        x = x + 1
        raise err

    def f_from(x):
        try:
            _raise_in_callee(x)
        except TensorError as e:
            raise RuntimeError("wrapped") from e

    f = {"raise": f_raise, "reraise": f_reraise, "made_before": f_made_before, "from": f_from}[case]
    cnt = _raises_same(f, torch.randn(3))
    assert cnt.frame_count >= 1  # (what comes before the exception is made is compiled)


def test_escaping_the_frame_is_made_by_eager():
    def f(x, log):
        try:
            _raise_in_callee(x)
        except TensorError as e:
            log.append(e)
        return x + 1

    x = torch.randn(3)
    log_eager, log_comp = [], []
    cnt = CompileCounter()
    expected = f(x, log_eager)
    got = compile(f, backend=cnt)(x, log_comp)
    torch.testing.assert_close(got, expected)
    assert len(log_comp) == 1 and type(log_comp[0]) is TensorError and log_comp[0].args == ("bad",)
    torch.testing.assert_close(log_comp[0].t, log_eager[0].t)

    def g(x):
        try:
            _raise_in_callee(x)
        except TensorError as e:
            return e
    e_eager, e_comp = g(x), compile(g, backend=CompileCounter())(x)
    assert type(e_comp) is TensorError and e_comp.args == e_eager.args
    torch.testing.assert_close(e_comp.t, e_eager.t)


def test_raise_from_a_tensor_is_eagers_type_error():
    def f(x):
        y = x * 2
        raise ValueError("v") from y
    with pytest.raises(TypeError, match="exception causes must derive from BaseException"):
        compile(f, backend=CompileCounter())(torch.randn(3))
