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


# -- a missing attribute raises eager's AttributeError message ---------------------------------

class _Plain:
    pass


class _Slotted:
    __slots__ = ("a",)


_PLAIN = _Plain()
_LINEAR = torch.nn.Linear(2, 2)


def _attribute_error(get):
    try:
        get()
    except AttributeError as e:
        return str(e)
    return None


def test_attribute_error_messages_are_eagers():
    import math

    def f(x):
        o = _Plain()
        gets = [lambda: None.foo, lambda: (1).foo, lambda: "s".foo, lambda: o.foo, lambda: _PLAIN.foo,
                lambda: _Plain.foo, lambda: math.foo, lambda: _attribute_error.foo, lambda: x.foo,
                lambda: _LINEAR.foo, lambda: [].foo, lambda: {}.foo, lambda: (1,).foo,
                lambda: _Slotted().a, lambda: len.foo]
        return x + 1, [_attribute_error(g) for g in gets]
    check_same(f, torch.ones(2))


# -- class attributes assigned in the frame: recorded and replayed, seen by later reads --------

class _Counted:
    n = 0

    def __init__(self):
        _Counted.n += 1

    def get(self):
        return self.n


class _CountedSub(_Counted):
    pass


class _Scaled(torch.nn.Module):
    scale = 1.0

    def forward(self, x):
        type(self).scale = self.scale * 2
        return x * self.scale


def _reset_counted():
    _Counted.n = 0
    if "n" in _CountedSub.__dict__:
        del _CountedSub.n
    if hasattr(_Counted, "extra"):
        del _Counted.extra
    _Scaled.scale = 1.0


def _run_both(fn, *args):
    from ember_test_helpers import CompileCounter, assert_same, compile
    _reset_counted()
    expected = fn(*args)
    expected_state = (_Counted.n, _CountedSub.n, _Scaled.scale)
    _reset_counted()
    counter = CompileCounter()
    actual = compile(fn, backend=counter)(*args)
    assert_same(actual, expected)
    assert (_Counted.n, _CountedSub.n, _Scaled.scale) == expected_state
    _reset_counted()
    return counter


def test_class_attribute_increment_in_a_constructor():
    def f(x):
        _Counted()
        c = _Counted()
        return x + _Counted.n, c.n, c.get(), _CountedSub.n
    assert _run_both(f, torch.ones(2)).frame_count == 1
    assert stats()["graph_breaks"] == 0


def test_class_attribute_assigned_on_a_subclass_shadows_the_base():
    def f(x):
        _CountedSub.n = 10
        return x + _CountedSub.n + _Counted.n
    assert _run_both(f, torch.ones(2)).frame_count == 1


def test_new_class_attribute_holding_a_tensor():
    def f(x):
        _Counted.extra = x * 2
        return _Counted.extra + 1, _Counted().extra
    assert _run_both(f, torch.ones(2)).frame_count == 1


def test_class_attribute_written_through_type_of_a_module():
    assert _run_both(_Scaled(), torch.ones(2)).frame_count == 1


def test_class_attribute_written_before_a_graph_break():
    def f(x):
        _Counted.n = 5
        torch._dynamo.graph_break()
        return x + _Counted.n
    _run_both(f, torch.ones(2))


# -- a functools.partial made in the frame can be returned and live across a graph break --------

def _breaking_callee(x, k=1):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos() * k


def test_partial_made_in_the_frame_called_at_a_graph_break():
    import functools

    def f(x):
        p = functools.partial(_breaking_callee, k=2)
        return p(x) + 1
    # as torch.compile: the callee's two graphs (compiled through the partial) and the rest of f
    check_same(f, torch.ones(2), graphs=3, fullgraph=False)
    assert stats()["fallbacks"] == 0


def test_partial_made_in_the_frame_is_returned():
    import functools

    def f(x):
        p = functools.partial(functools.partial(torch.add, x), alpha=3)
        return p, x + 1
    from ember_test_helpers import compile
    x = torch.ones(2)
    p, y = compile(f)(x)
    assert isinstance(p, functools.partial) and p.keywords == {"alpha": 3}
    torch.testing.assert_close(p(x), f(x)[0](x))
    torch.testing.assert_close(y, x + 1)


# -- list.remove / index compare as CPython: identity first, then == (a tensor's is data) --------

def test_list_remove_compares_tensors_like_eager():
    def f(x):
        y = x + 1
        lst = [x, y]
        lst.remove(y)  # x == y first: eager raises (a tensor's truth)
        return lst
    from ember_test_helpers import check_raises_same
    check_raises_same(f, torch.ones(2))


def test_list_remove_and_index_by_identity():
    def f(x):
        y = x + 1
        lst = [x, y, 3]
        i = lst.index(x)
        lst.remove(x)
        return lst, i, (x, y).index(x)
    check_same(f, torch.ones(2))


def test_list_remove_missing_constant():
    def f(x):
        lst = [3, 4]
        try:
            lst.remove(5)
        except ValueError as e:
            return x + 1, str(e), lst
    check_same(f, torch.ones(2))


def test_globals_subscript_in_frame():
    def f(x):
        return x + globals()["_GLOBAL_THREE"], "_GLOBAL_THREE" in globals()
    check_same(f, torch.ones(2), graphs=None, fullgraph=False)


_GLOBAL_THREE = 3


# -- an exception nothing in the frame catches: a graph break at the raising instruction --------

class _CodedError(Exception):
    def __init__(self, msg, code):
        super().__init__(msg)
        self.code = code


def _raise_coded(x, code):
    if code:
        raise _CodedError("coded", code)
    return x


def _graphs_and_error(fn, *args):
    from ember_test_helpers import CompileCounter, compile
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        expected = e
    counter = CompileCounter()
    try:
        compile(fn, backend=counter)(*args)
    except Exception as e:  # noqa: BLE001
        actual = e
    else:
        raise AssertionError("compiled call did not raise")
    assert type(actual) is type(expected) and str(actual) == str(expected)
    return counter.frame_count, actual


def test_uncaught_raise_in_the_frame_breaks_after_the_graph():
    def f(x):
        y = x + 1
        raise _CodedError("boom", y.shape[0])
    graphs, err = _graphs_and_error(f, torch.ones(2))
    assert graphs == 1 and err.code == 2
    assert stats()["fallbacks"] == 0


def test_uncaught_raise_in_an_inlined_callee_breaks_at_the_call():
    def f(x):
        y = x * 2
        return _raise_coded(y, 7)
    graphs, err = _graphs_and_error(f, torch.ones(2))
    assert graphs == 1 and err.code == 7
    assert stats()["fallbacks"] == 0


def test_uncaught_type_error_of_a_call():
    def g(a, *, b):
        return a + b

    def f(x):
        y = x.sin()
        return g(y)
    _graphs_and_error(f, torch.ones(2))
    assert stats()["fallbacks"] == 0


def test_tensor_dunder_class_is_its_type():
    def f(x):
        y = x + 1
        return y.__class__.__name__, x.__class__ is torch.Tensor, y.__add__(1), y.__radd__(2)
    check_same(f, torch.ones(2))


def test_parameter_dunder_class():
    def f(p):
        return p.__class__ is torch.nn.Parameter, p * 2
    check_same(f, torch.nn.Parameter(torch.ones(2)))


# -- itertools.tee: a lazy pure-Python stand-in ----------------------------------------------------

def test_itertools_tee_of_tensors():
    import itertools

    def f(x):
        a, b = itertools.tee([x, x * 2])
        return list(a), list(b)
    check_same(f, torch.ones(2))


def test_itertools_tee_is_lazy_and_interleaves():
    import itertools
    log = []

    def f(x):
        def gen():
            for i in range(3):
                log.append(i)
                yield x * i
        a, b, c = itertools.tee(gen(), 3)
        first = next(a)
        log.append("after first")
        return first, list(b), next(c), list(a), list(c)
    check_same(f, torch.ones(2), check_cache=False)
    expected = list(log[: len(log) // 2])
    assert log[len(log) // 2:] == expected


# -- a user class's __int__ / __float__ / __index__ / __format__ run traced -----------------------

class _Number:
    def __int__(self):
        return 7

    def __float__(self):
        return 2.5

    def __format__(self, spec):
        return "N" + spec


class _Index:
    def __index__(self):
        return 2


class _BadInt:
    def __int__(self):
        return 1.5


def test_user_number_conversions():
    def f(x):
        return x * int(_Number()), float(_Number()), f"{_Number():>3}", float(_Index()), int(_Index())
    check_same(f, torch.ones(2))


def test_user_index_in_subscripts():
    def f(x):
        i = _Index()
        return x[i], [10, 20, 30][i], (1, 2, 3)[i], range(5)[i], "abc"[i], operator.index(i)
    check_same(f, torch.arange(4.0))


def test_user_int_returning_a_float_raises_like_eager():
    def f(x):
        try:
            int(_BadInt())
        except TypeError as e:
            return x + 1, str(e)
    check_same(f, torch.ones(2))


# -- `in` / index / count / remove on a list of objects with a Python __eq__ ----------------------

class _Key:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _Key) and other.v == self.v

    def __hash__(self):
        return hash(self.v)


def test_list_search_with_a_user_eq():
    def f(x):
        keys = [_Key(1), _Key(2), _Key(1)]
        found = _Key(2) in keys, _Key(5) in keys, keys.index(_Key(2)), keys.count(_Key(1))
        keys.remove(_Key(1))
        return x + found[2], found, [k.v for k in keys]
    check_same(f, torch.ones(2))


def test_inspect_signature_of_a_function_made_in_the_frame():
    import inspect

    def f(x):
        def target(a, b=1, *, c: int = 2):
            return a * b + c
        kw = {"b": 3, "zz": 9, "c": 1}
        params = inspect.signature(target).parameters
        return target(x, **{k: v for k, v in kw.items() if k in params}), list(params)
    check_same(f, torch.ones(2))


def test_functions_made_in_the_frame_as_dict_keys_and_set_elements():
    def f(x):
        def a(t):
            return t * 2
        b = lambda t: t + 1  # noqa: E731
        d = {a: "a", b: "b"}
        s = {a, b, a}
        return [d[k] for k in (b, a)], len(s), a in s, x + 1, d, a
    from ember_test_helpers import compile
    x = torch.ones(2)
    expected = f(x)
    names, n, found, y, d, a = compile(f)(x)
    assert (names, n, found) == expected[:3] and stats()["graph_breaks"] == 0
    assert list(d)[0] is a and list(d.values()) == ["a", "b"]
    torch.testing.assert_close(a(x), x * 2)
    torch.testing.assert_close(y, expected[3])


# -- an AttributeError raised while looking an attribute up goes to the class's __getattr__ ------

class _RaisingProperty:
    @property
    def p(self):
        raise AttributeError("nope")

    def __getattr__(self, name):
        return "fallback-" + name


class _RaisingPropertyOnly:
    @property
    def p(self):
        raise AttributeError("nope")


class _RaisingHook:
    def __getattr__(self, name):
        raise AttributeError(f"hook {name}")


class _SlotWithHook:
    __slots__ = ("a",)

    def __getattr__(self, name):
        return 5


_RAISING_PROPERTY = _RaisingProperty()


def test_property_raising_attribute_error_falls_back_to_getattr():
    def f(x):
        got = (_RaisingProperty().p, _RAISING_PROPERTY.p, hasattr(_RaisingProperty(), "p"),
               getattr(_RaisingPropertyOnly(), "p", "dflt"), hasattr(_RaisingPropertyOnly(), "p"),
               _SlotWithHook().a)
        try:
            _RaisingHook().zz
        except AttributeError as e:
            hook = str(e)
        return x + 1, got, hook
    check_same(f, torch.ones(1))


# -- a recursive nested function (its closure holds itself) can be rebuilt ----------------------

def test_recursive_nested_function_returned():
    def f(x):
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)
        return x * fact(4), fact
    from ember_test_helpers import compile
    x = torch.ones(2)
    y, fact = compile(f)(x)
    torch.testing.assert_close(y, x * 24)
    assert fact(5) == 120 and stats()["fallbacks"] == 0


def test_recursive_nested_function_with_a_graph_break_inside():
    def f(x):
        def r(t, n):
            if n == 0:
                torch._dynamo.graph_break()
                return t
            return r(t + 1, n - 1)
        return r(x, 2)
    check_same(f, torch.ones(2), graphs=None, fullgraph=False)
    assert stats()["fallbacks"] == 0


def test_uncaught_builtin_exception_runs_the_frame_eagerly_as_torch_skips_it():
    def f(x):
        y = x + 1
        raise NotImplementedError(f"todo {y.shape[0]}")
    graphs, err = _graphs_and_error(f, torch.ones(2))
    assert graphs == 0 and str(err) == "todo 2"


# -- plain attributes set on tensors in the frame ------------------------------------------------

def _tags(value):
    items = value if isinstance(value, tuple) else (value,)
    return [getattr(t, "tag", None) for t in items if isinstance(t, torch.Tensor)]


def test_attribute_set_on_a_computed_tensor():
    def f(x):
        y = x + 1
        y.tag = "hi"
        z = y * 2
        return y, y.tag, hasattr(y, "tag"), getattr(y, "zz", 0), z
    from ember_test_helpers import compile
    x = torch.ones(2)
    expected, actual = f(x), compile(f)(x)
    assert actual[1:4] == expected[1:4] and _tags(actual) == _tags(expected)
    assert stats()["graph_breaks"] == 0 and stats()["graphs"] == 1


def test_attribute_set_on_an_input_tensor_and_across_a_break():
    def f(x):
        x.note = 5
        y = x + x.note
        y.tag = 3
        torch._dynamo.graph_break()
        return y * y.tag, y
    from ember_test_helpers import compile
    xe, xc = torch.ones(2), torch.ones(2)
    expected, actual = f(xe), compile(f)(xc)
    torch.testing.assert_close(actual[0], expected[0])
    assert xc.note == 5 and actual[1].tag == 3
