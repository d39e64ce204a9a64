"""Nested graph breaks (capture/nested_breaks.py): a break inside a function the trace inlined
resumes inside it. One graph covers the caller's code before the call and the callee's before the
break; everything after the break (the callee's rest, then each caller's) is one more graph.

Each case runs eagerly and compiled, on several inputs, and compares results, printed output,
mutated state and graph counts. The counts are what torch.compile 2.13 makes with
``torch._dynamo.config.nested_graph_breaks = True`` (the setting torch's own test suite runs
with), counted with a CompileCounter backend."""
import io

import pytest
import torch

import ember
from tests.helpers import CompileCounter

_OUT = io.StringIO()
gb = torch._dynamo.graph_break


def _f1(x):
    x = x + 1
    gb()
    return x + 2


def _f2(x):
    return _f1(x + 4) + 8


def _f3(x):
    return _f2(x + 16) + 32


def _make(k):
    def inner(x):
        y = x * k
        gb()
        return y + k
    return inner


def _closure_per_call(x, fn):
    return fn(x + 1) * 2


class _Helper:
    def helper(self, x):
        x = x.sin()
        print("helper", file=_OUT)
        return x.cos()

    def run(self, x):
        return self.helper(x + 1) - 1


_OBJ = _Helper()


def _method(x):
    return _OBJ.run(x)


def _leaf_branch(x):
    y = x + 1
    if y.sum() > 0:
        return y * 2
    return y * 3


def _branch_in_callee(x):
    return _leaf_branch(x) + 1


def _pending_outer_call(x):
    return torch.add(_leaf_branch(x), 1)


def _kw_leaf(x, *, s=1):
    y = x * s
    print("kw", file=_OUT)
    return y


def _keyword_call(x):
    return _kw_leaf(x, s=3) + 1


def _item_leaf(x):
    v = x.sum().item()
    return x + v


def _item_in_callee(x):
    return _item_leaf(x * 2) * 2


def _deep3(x):
    z = x + 1
    gb()
    return z


def _deep2(x):
    a = x * 2
    b = _deep3(a)
    return a + b


def _locals_at_every_level(x):
    c = [x]
    return _deep2(c[0]) + len(c)


def _side_leaf(x, lst):
    lst.append(1)
    gb()
    lst.append(2)
    return x + len(lst)


def _list_written_around_the_break(x):
    lst = []
    y = _side_leaf(x, lst)
    return y + len(lst)


def _two_breaks_leaf(x):
    x = x + 1
    gb()
    x = x + 2
    gb()
    return x + 3


def _two_breaks(x):
    return _two_breaks_leaf(x) * 2


def _star_leaf(*args):
    gb()
    return args[0] + args[1]


def _star_args(x):
    return _star_leaf(x, x) + 1


class _Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        print("inner", file=_OUT)
        return y.relu()


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = _Inner()
        self.b = _Inner()

    def forward(self, x):
        return self.b(self.a(x) + 1) * 2


_MODEL = _Outer()


def _submodules(x):
    return _MODEL(x)


def _nonlocal_written(x):
    n = 0

    def bump(y):
        nonlocal n
        n += 1
        print("bump", file=_OUT)
        n += 1
        return y + n
    r = bump(x)
    return r + n


_X = torch.randn(3)

# name: (function, argument tuples, graphs torch.compile makes with nested graph breaks)
CASES = {
    "three_levels": (_f3, [(_X,), (_X + 1,)], 2),
    "two_levels": (_f2, [(_X,), (_X + 1,)], 2),
    "closure_made_per_call": (_closure_per_call, [(_X, _make(1)), (_X, _make(2)), (_X, _make(3))], 4),
    "method": (_method, [(_X,), (_X + 1,)], 2),
    "branch_on_a_tensor_in_the_callee": (_branch_in_callee, [(_X.abs(),), (-_X.abs() - 2,)], 3),
    "pending_outer_call": (_pending_outer_call, [(_X.abs(),)], 2),
    "keyword_call": (_keyword_call, [(_X,)], 2),
    "item_in_the_callee": (_item_in_callee, [(_X,), (_X + 1,)], 3),
    "locals_at_every_level": (_locals_at_every_level, [(_X,)], 2),
    "list_written_around_the_break": (_list_written_around_the_break, [(_X,)], 1),
    "two_breaks_in_the_callee": (_two_breaks, [(_X,), (_X + 1,)], 3),
    "star_args": (_star_args, [(_X,)], 1),
    "submodules": (_submodules, [(_X,), (_X + 1,)], 3),
}


def _run(fn, argsets):
    _OUT.seek(0)
    _OUT.truncate()
    out = [fn(*a) for a in argsets]
    return out, _OUT.getvalue()


@pytest.mark.parametrize("case", list(CASES))
def test_nested_break_matches_eager_and_torch_counts(case):
    fn, argsets, torch_graphs = CASES[case]
    ember.reset()
    cnt = CompileCounter()
    expected, expected_text = _run(fn, argsets)
    got, text = _run(ember.compile(fn, backend=cnt), argsets)
    for e, g in zip(expected, got):
        assert torch.allclose(e, g)
    assert text == expected_text
    assert cnt.frame_count == torch_graphs


def test_without_nesting_the_caller_breaks_at_the_call():
    ember.reset()
    cnt = CompileCounter()
    with ember.config.patch(nested_graph_breaks=False):
        got = ember.compile(_f3, backend=cnt)(_X)
    assert torch.allclose(got, _f3(_X))
    assert cnt.frame_count == 6  # (each level: its code before the call, and after)


def test_nonlocal_write_in_the_callee_reaches_the_caller():
    ember.reset()
    expected, expected_text = _run(_nonlocal_written, [(_X,), (_X + 1,)])
    got, text = _run(ember.compile(_nonlocal_written, backend="eager"), [(_X,), (_X + 1,)])
    for e, g in zip(expected, got):
        assert torch.equal(e, g)
    assert text == expected_text


def _raises_after_break(x):
    gb()
    raise ValueError("boom")


def _caught_by_the_caller(x):
    try:
        return _raises_after_break(x)
    except ValueError:
        return x - 1


def _propagates(x):
    return _raises_after_break(x + 1)


def test_exceptions_after_a_nested_break_reach_the_callers_handler():
    ember.reset()
    assert torch.equal(ember.compile(_caught_by_the_caller, backend="eager")(_X), _X - 1)
    with pytest.raises(ValueError, match="boom"):
        ember.compile(_propagates, backend="eager")(_X)


def test_each_closure_object_uses_its_own_cells():
    ember.reset()
    compiled = ember.compile(_closure_per_call, backend="aot_eager")
    for k in (1, 2, 3, 2.5):
        assert torch.equal(compiled(_X, _make(k)), _closure_per_call(_X, _make(k)))


def test_grads_through_a_nested_break():
    ember.reset()
    x1 = torch.randn(3, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    _f3(x1).sum().backward()
    ember.compile(_f3, backend="aot_eager")(x2).sum().backward()
    assert torch.allclose(x1.grad, x2.grad)


@torch.compiler.disable
def _check_then_raise(t, limit):
    if t.abs().max() > limit:
        raise ValueError("too big")
    return t * 2


def _leaf_raising_at_the_break(x, limit):
    y = x + 1
    y = _check_then_raise(y, limit)  # (a break: runs eagerly, may raise)
    return y - 1


def _caller_catching(x, limit):
    try:
        return _leaf_raising_at_the_break(x, limit) * 3
    except ValueError:
        return x * 0 - 7


def _leaf_raising_after_the_break(x, limit):
    y = x + 1
    print("leaf", file=_OUT)
    if limit < 1:
        raise RuntimeError("limit")
    return y


def _caller_catching_the_rest(x, limit):
    try:
        r = _leaf_raising_after_the_break(x, limit)
    except RuntimeError:
        r = x - 100
    return r + 1


def _leaf_with_own_try(x, limit):
    try:
        y = _check_then_raise(x, limit)
    except ValueError:
        y = x * 10
    return y + 1


def _caller_of_leaf_with_own_try(x, limit):
    return _leaf_with_own_try(x + 1, limit) * 2


def _grad_leaf(x):
    y = x * 2
    print("grad leaf", torch.is_grad_enabled(), file=_OUT)
    return y * x, torch.is_grad_enabled()


def _caller_in_no_grad(x):
    with torch.no_grad():
        a, mode = _grad_leaf(x)
    return a + x, mode, torch.is_grad_enabled()


def _star_call(x, limit):
    args = (x, limit)
    return _leaf_raising_at_the_break(*args) + 1


@pytest.mark.parametrize("fn", [_caller_catching, _caller_catching_the_rest, _caller_of_leaf_with_own_try,
                                _star_call])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_exceptions_at_and_after_the_break_reach_eager_handlers(fn, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    x = torch.randn(4)
    for limit in (100.0, 0.5, 100.0, 0.0):  # (the break raising, then not, then again)
        _OUT.seek(0)
        _OUT.truncate()
        try:
            expected = fn(x, limit)
        except Exception as e:  # noqa: BLE001 - compared below
            expected = e
        expected_text = _OUT.getvalue()
        _OUT.seek(0)
        _OUT.truncate()
        try:
            got = compiled(x, limit)
        except Exception as e:  # noqa: BLE001
            got = e
        assert _OUT.getvalue() == expected_text
        if isinstance(expected, Exception):
            assert type(got) is type(expected) and str(got) == str(expected)
        else:
            assert torch.equal(got, expected)


def test_grad_mode_of_a_callers_with_block_holds_in_the_callees_rest():
    ember.reset()
    x = torch.randn(3, requires_grad=True)
    expected, expected_text = _run(_caller_in_no_grad, [(x,)])
    got, text = _run(ember.compile(_caller_in_no_grad, backend="aot_eager"), [(x,)])
    (ea, emode, eafter), (ga, gmode, gafter) = expected[0], got[0]
    assert torch.equal(ea, ga) and ea.requires_grad == ga.requires_grad
    assert (emode, eafter) == (gmode, gafter)
    assert text == expected_text
    assert torch.is_grad_enabled()
