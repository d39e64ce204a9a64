"""Dicts and lists from outside are guarded only as far as the trace reads them (as torch.compile).

``k in d``, ``d[k]``, ``d.get(k)`` and ``len(d)`` guard the key's presence, the value's own guards
and the length; iterating, copying, writing or ``**d`` guard the whole key set (and every value's
type), as before. The recompile counts are torch.compile's on the same programs.
"""
from __future__ import annotations

import copy

import pytest
import torch

import ember
from ember_test_helpers import CompileCounter

CALLS = [{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 1, "b": 2, "c": 1}, {"b": 2, "a": 1},
         {"a": 1, "b": 2.5}, {"a": 2, "zz": 3}, {"a": 1, "t": torch.ones(3)}, {"a": 1, "n": {"m": 2}},
         {"b": 1}]


def _contains(x, d):
    return x + 1 if "a" in d else x - 1


def _getitem(x, d):
    return x * d["a"]


def _get(x, d):
    return x * d.get("a", 0)


def _length(x, d):
    return x * len(d)


def _missing_key(x, d):
    return x * d["zz"]


def _values(x, d):
    return x * sum(v for v in d.values() if isinstance(v, int))


def _keys_listed(x, d):
    return [k for k, _v in d.items()], x + 1


def _written(x, d):
    d["new"] = 5
    return x * d.get("a", 1)


def _popped(x, d):
    return x * d.pop("a", 3)


def _star_star(x, d):
    def h(a=0, b=0, **kw):
        return a + b + len(kw)
    return x * h(**d)


def _truth(x, d):
    return x + (1 if d else 2)


def _tensor_value(x, d):
    return x * d["t"] if "t" in d else x + 0


def _nested(x, d):
    return x * d["n"]["m"] if "n" in d else x + 0


def _copied(x, d):
    e = dict(d)
    e["q"] = 1
    return x * len(e)


def _across_a_break(x, d):
    y = x * d.get("a", 1)
    print("", end="")
    return y + d.get("b", 0)


def _compared(x, d):
    return x + (d == {"a": 1, "b": 2})


def _counted(fn):
    ember.reset()
    counter = CompileCounter()
    return ember.compile(fn, backend=counter), counter


def _run(fn, calls):
    compiled, counter = _counted(fn)
    for d in calls:
        x = torch.rand(3)
        d_eager, d_ember = copy.copy(d), copy.copy(d)
        try:
            want = fn(x, d_eager)
        except KeyError as e:
            with pytest.raises(KeyError, match=str(e)):
                compiled(x, d_ember)
            continue
        got = compiled(x, d_ember)
        if isinstance(want, tuple):
            assert want[0] == got[0]
            want, got = want[1], got[1]
        torch.testing.assert_close(got, want)
        assert d_eager.keys() == d_ember.keys()
    return counter.frame_count


# graphs over CALLS: torch.compile 2.13 makes 2, 2, 3 and 6 (its len() also guards the keys)
@pytest.mark.parametrize("fn, graphs", [
    (_contains, 2),  # "a" present / absent
    (_getitem, 2),   # d["a"] == 1, then 2: automatic dynamic
    (_get, 3),       # 1, then 2 (dynamic), then absent
    (_length, 3),    # lengths 2, 3, 1
])
def test_reads_guard_only_what_they_read(fn, graphs):
    calls = [c for c in CALLS if "a" in c] if fn is _getitem else CALLS
    assert _run(fn, calls) == graphs


@pytest.mark.parametrize("fn", [_missing_key, _values, _keys_listed, _written, _popped, _star_star, _truth,
                                _tensor_value, _nested, _copied, _across_a_break, _compared])
def test_every_access_pattern_answers_as_eager(fn):
    _run(fn, CALLS)


def test_value_type_change_of_an_unread_key_does_not_recompile():
    calls = [{"scale": 2.0, "step": 1}, {"scale": 2.0, "step": "one"}, {"scale": 2.0, "step": torch.ones(2)},
             {"scale": 2.0, "step": 1, "extra": None}]
    assert _run(lambda x, batch: x * batch["scale"], calls) == 1


def test_key_removed_after_a_read_recompiles():
    fn = _getitem
    assert _run(fn, [{"a": 1}, {"a": 1, "b": 0}]) == 1
    with pytest.raises(KeyError):
        ember.compile(fn, backend="eager")(torch.rand(3), {"b": 1})


# Lists from outside: ``lst[i]`` and ``len(lst)`` guard the length and the items read only.
LIST_CALLS = [[1, 2], [1, 3], [1, 2.5], [1, "s"], [1, 2, 3], [2, 2], [1, None]]


def _run_list(fn, calls):
    compiled, counter = _counted(fn)
    for lst in calls:
        x = torch.rand(3)
        a, b = list(lst), list(lst)
        torch.testing.assert_close(compiled(x, a), fn(x, b))
        assert a == b
    return counter.frame_count


# graphs over LIST_CALLS: torch.compile 2.13 makes 3, 2, 7 and 6
@pytest.mark.parametrize("fn, graphs", [
    (lambda x, lst: x * lst[0], 3),          # lengths 2 and 3, then lst[0] == 2: dynamic
    (lambda x, lst: x * len(lst), 2),        # lengths 2, 3
    (lambda x, lst: x * sum(v for v in lst if isinstance(v, int)), 7),  # iterated: every item's type
    (lambda x, lst: x + (1 if lst else 0), 2),
])
def test_list_reads_guard_only_what_they_read(fn, graphs):
    assert _run_list(fn, LIST_CALLS) == graphs


@pytest.mark.parametrize("fn", [
    lambda x, lst: x * lst[-1],
    lambda x, lst: x * lst[1:][0],
    lambda x, lst: (lst.append(x.sum()), x * len(lst))[1],
    lambda x, lst: (lst.__setitem__(0, 7), x * lst[0])[1],
    lambda x, lst: x * lst[0] if len(lst) > 2 else x - lst[1] if isinstance(lst[1], int) else x,
])
def test_list_access_patterns_answer_as_eager(fn):
    _run_list(fn, [[1, 2], [1, 3], [3, 2, 1], [2, 5.5]])


def test_list_index_out_of_range_raises_as_eager():
    fn = ember.compile(lambda x, lst: x * lst[5], backend="eager")
    with pytest.raises(IndexError):
        fn(torch.rand(2), [1, 2])


# Tuples from outside (arguments, *args): ``t[i]`` / ``len(t)`` wrap and guard the items read only.
TUPLE_CALLS = [(1, 2), (1, 3), (1, 2.5), (1, "s"), (1, 2, 3), (2, 2), (1, None)]


def _run_tuple(fn, calls, star=False):
    compiled, counter = _counted(fn)
    for t in calls:
        x = torch.rand(3)
        got, want = (compiled(x, *t), fn(x, *t)) if star else (compiled(x, t), fn(x, t))
        torch.testing.assert_close(got, want)
    return counter.frame_count


def _star_first(x, *args):
    return x * args[0]


# graphs over TUPLE_CALLS: torch.compile 2.13 makes 3, 3 and 2 (ember, reading every item: 7, -, 5)
@pytest.mark.parametrize("fn, graphs", [
    (lambda x, t: x * t[0], 3),    # lengths 2 and 3, then t[0] == 2: dynamic
    (lambda x, t: x * t[-2], 3),   # t[-2]: t[0] at length 2, t[1] at length 3
    (lambda x, t: x * len(t), 2),
])
def test_tuple_reads_guard_only_what_they_read(fn, graphs):
    assert _run_tuple(fn, TUPLE_CALLS) == graphs


def test_star_args_read_by_index():
    assert _run_tuple(_star_first, TUPLE_CALLS, star=True) == 3  # torch.compile: 3


@pytest.mark.parametrize("fn", [
    lambda x, t: x * sum(v for v in t if isinstance(v, int)),
    lambda x, t: x * t[1:][0] if len(t) > 2 else x * t[0],
    lambda x, t: x * (t == (1, 2)),
    lambda x, t: x.view(-1, 1) * torch.tensor(t[:2] if isinstance(t[1], int) else (0, 0)).view(1, -1),
    lambda x, t: x * max(t[0], 2),
])
def test_tuple_access_patterns_answer_as_eager(fn):
    _run_tuple(fn, [(1, 2), (1, 3), (3, 2, 1), (2, 5)])
