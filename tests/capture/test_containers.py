"""dict / list / tuple / set manipulation inside the program; nested outputs."""
import collections

import pytest
import torch

from ember_test_helpers import check_same


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


Pair = collections.namedtuple("Pair", ["a", "b"])


def build_and_index_list(x):
    xs = [x, x * 2, x * 3]
    xs.append(x.sum())
    xs.insert(0, x - 1)
    last = xs.pop()
    return xs[1] + xs[-1] + last, len(xs)


def list_extend_slice_reverse(x):
    xs = [x]
    xs.extend([x + 1, x + 2])
    xs += [x + 3]
    ys = xs[::-1]
    ys.reverse()
    return xs[1:3], ys[0]


def list_mutation_inplace_index(x):
    xs = [x, x, x]
    xs[1] = xs[1] * 10
    del xs[0]
    return xs


def dict_build_update_get(x):
    d = {"a": x}
    d["b"] = x * 2
    d.update(c=x * 3)
    d.setdefault("a", None)
    return d.get("b") + d.get("missing", x), sorted(d.keys()), len(d)


def dict_iteration(x):
    d = {"x": x, "y": x + 1, "z": x + 2}
    out = 0
    for k, v in d.items():
        out = out + v * len(k)
    return out, list(d.values())[1], list(d)


def dict_pop_del_in(x):
    d = {"a": x, "b": x + 1, "c": x + 2}
    b = d.pop("b")
    del d["c"]
    return b, "a" in d, "c" in d, d


def dict_input_output(inputs):
    return {"sum": inputs["a"] + inputs["b"], "prod": inputs["a"] * inputs["b"], "keys": tuple(inputs)}


def dict_input_mutated(d):
    d["new"] = d["a"] * 2
    return d["a"] + 1


def list_input_mutated(xs):
    xs.append(xs[0] + 1)
    return len(xs)


def ordered_dict_and_defaultdict(x):
    od = collections.OrderedDict()
    od["first"] = x
    od["second"] = x * 2
    dd = collections.defaultdict(list)
    dd["k"].append(x)
    dd["k"].append(x + 1)
    return od, dict(dd)


def tuple_ops(x):
    tup = (x, x + 1)
    tup = tup + (x + 2,)
    a, *rest = tup
    return a, rest, len(rest), tup * 2


def nested_structure_output(x):
    return {"a": [x, (x + 1, {"b": x * 2})], "c": (1, "two", 3.0, None, True)}


def namedtuple_output(x):
    p = Pair(a=x, b=x + 1)
    return Pair(p.b, p.a * 2), p._replace(a=x * 0)


def namedtuple_input(p):
    return p.a * p.b, p[0]


def set_ops_on_constants(x):
    s = {1, 2, 3}
    s.add(4)
    s.discard(2)
    u = s | {7}
    return x * len(u), 3 in s, sorted(s & {1, 3, 9})


def zip_dict_construction(x):
    keys = ["p", "q"]
    vals = [x, x.neg()]
    return dict(zip(keys, vals))


def list_of_tensors_stack_cat(xs):
    return torch.stack(xs), torch.cat(xs[:2]), sum(xs)


def constants_mixed_in_output(x):
    return x + 1, 42, "label", [3.5, None], {"flag": False}


def only_constants_and_input(x):
    return x, 1, (2, 3)


def list_sort_and_minmax_constants(x):
    vals = [3, 1, 2]
    vals.sort()
    return x * vals[0] + max(vals) - min(vals), vals


def slice_assignment_list(x):
    xs = [x, x + 1, x + 2, x + 3]
    xs[1:3] = [x * 10]
    return xs


def dict_of_lists_comprehension(x):
    groups = {"even": [], "odd": []}
    for i in range(4):
        groups["even" if i % 2 == 0 else "odd"].append(x * i)
    return {k: torch.stack(v).sum(0) for k, v in groups.items()}


PROGRAMS = [
    (build_and_index_list, lambda: (t(3, grad=True),)),
    (list_extend_slice_reverse, lambda: (t(2),)),
    (list_mutation_inplace_index, lambda: (t(2, grad=True),)),
    (dict_build_update_get, lambda: (t(3),)),
    (dict_iteration, lambda: (t(2, grad=True),)),
    (dict_pop_del_in, lambda: (t(2),)),
    (dict_input_output, lambda: ({"a": t(3, grad=True), "b": t(3, seed=1)},)),
    (dict_input_mutated, lambda: ({"a": t(3)},)),
    (list_input_mutated, lambda: ([t(2), t(3)],)),
    (ordered_dict_and_defaultdict, lambda: (t(2),)),
    (tuple_ops, lambda: (t(2),)),
    (nested_structure_output, lambda: (t(2, grad=True),)),
    (namedtuple_output, lambda: (t(2, grad=True),)),
    (namedtuple_input, lambda: (Pair(t(3), t(3, seed=1)),)),
    (set_ops_on_constants, lambda: (t(2),)),
    (zip_dict_construction, lambda: (t(3, grad=True),)),
    (list_of_tensors_stack_cat, lambda: ([t(2, grad=True), t(2, seed=1), t(2, seed=2)],)),
    (constants_mixed_in_output, lambda: (t(2),)),
    (list_sort_and_minmax_constants, lambda: (t(2),)),
    (slice_assignment_list, lambda: (t(2),)),
    (dict_of_lists_comprehension, lambda: (t(3, grad=True),)),
]


@pytest.mark.parametrize("fn,make_args", PROGRAMS,
                         ids=[f"{i}-{f.__name__}" for i, (f, _) in enumerate(PROGRAMS)])
def test_containers(fn, make_args):
    check_same(fn, *make_args())


def test_returning_input_and_constants_only_makes_no_graph():
    """Nothing to compute: the backend is not called (an empty graph)."""
    check_same(only_constants_and_input, t(2), graphs=0)


def test_list_input_mutation_visible_to_caller():
    from ember_test_helpers import CompileCounter, compile
    xs = [t(2)]
    n = compile(list_input_mutated, backend=CompileCounter(), fullgraph=True)(xs)
    assert n == 2 and len(xs) == 2
    torch.testing.assert_close(xs[1], xs[0] + 1)


def test_constant_tuple_concatenated_with_tracked_tuples():
    # `all_hidden = (); all_hidden += (h,)` (HF style), both orders and with +=
    def fn(x):
        t = ()
        t += (x.sin(),)
        t = t + (x.cos(),)
        u = () + t
        v = (1, 2) + (x * 2,)
        return t, u, v, len(t + ())
    check_same(fn, torch.randn(3))


# -- __class__ of builtin values, missing attributes of builtin values, iterators and isinstance ------------
def class_and_attrs(x, y):
    import collections.abc
    lst, tup, it = [x, y], (x, y), iter([x, y])
    return (x + 1, lst.__class__ is list, tup.__class__, type(lst) is list, {}.__class__ is dict,
            isinstance(it, collections.abc.Iterator), isinstance(iter(tup), collections.abc.Iterable),
            hasattr(lst, "foo"), hasattr(tup, "count"), getattr(lst, "bar", 7))


def test_builtin_value_class_and_attributes():
    from ember_test_helpers import stats
    check_same(class_and_attrs, torch.ones(2), torch.ones(2))
    assert stats()["graph_breaks"] == 0


def structseq_built(x, y):
    r = torch.return_types.max((x, y))
    q = tuple(torch.return_types.linalg_qr((2 * x, y - 1)))
    return r, q, r.values + 1, r[1], type(r).__name__


def test_structseq_constructed_in_frame():
    from ember_test_helpers import stats
    check_same(structseq_built, torch.randn(3, 2), torch.randn(2, 4))
    assert stats()["graph_breaks"] == 0


def sequence_comparisons(x, y):
    a, b = (1, x), (2, y)
    r = [a < b, (1, x) == (1, x), a == a, [1, 2] < [1, 3], (1,) < (1, 2), a != b, (x,) == (x,)]
    try:
        [1] < (1,)
    except TypeError as e:
        r.append(str(e))
    return x + 1, r


def test_sequence_comparisons_decided_by_constants():
    from ember_test_helpers import stats
    check_same(sequence_comparisons, torch.ones(2), torch.ones(2))
    assert stats()["graph_breaks"] == 0


def sequence_comparison_reads_data(x, y):
    return x + 1, (1, x) < (1, y)


def test_sequence_comparison_on_tensors_breaks():
    from ember_test_helpers import check_raises_same
    check_raises_same(sequence_comparison_reads_data, torch.ones(2), torch.zeros(2))  # eager: ambiguous bool


_NT = collections.namedtuple("_NT", "a b")


class _O:
    pass


def object_identity_and_misc(x):
    import sys
    NT, O = _NT, _O
    p = NT._make([1, x])
    q = p._replace(a=5)
    o1, o2 = O(), O()

    def k(a, *, b=3):
        return a
    return (p.b + 1, q.a, p, o1 == o2, o1 != o2, o1 == o1, o1 == 3, sys.version_info >= (3, 8),
            sys.version_info.major, k.__kwdefaults__)


def test_default_equality_and_namedtuple_make():
    from ember_test_helpers import stats
    check_same(object_identity_and_misc, torch.ones(2))
    assert stats()["graph_breaks"] == 0


def rebuild_with_class(x):
    updated = []
    for v in x:
        updated.append(v + 1)
    return x.__class__(updated)


def iterator_isinstance(y):
    it = iter([])
    return y + 1 if isinstance(it, list) else y + 2, isinstance(it, (int, str))


def test_class_of_input_list_and_iterator_isinstance():
    from ember_test_helpers import stats
    check_same(rebuild_with_class, [torch.zeros(2), torch.ones(2)])
    check_same(iterator_isinstance, torch.ones(2))
    assert stats()["graph_breaks"] == 0


# -- sorting objects whose class compares in Python (each comparison traced, in CPython's order) ------------
import dataclasses  # noqa: E402


@dataclasses.dataclass(order=True)
class _Pri:
    pri: int
    name: str = dataclasses.field(compare=False)


class _V:
    calls = []

    def __init__(self, v):
        self.v = v

    def __lt__(self, other):
        _V.calls.append((self.v, other.v))
        return self.v < other.v


def sort_objects(x):
    ps = [_Pri(3, "c"), _Pri(1, "a"), _Pri(2, "b")]
    vs = [_V(5), _V(2), _V(9)]
    s = sorted(ps)
    m, mn = max(vs), min(vs)
    vs.sort(reverse=True)
    pairs = sorted([(1, _V(3)), (0, _V(4)), (1, _V(1))])
    return x + 1, [p.name for p in s], m.v, mn.v, [v.v for v in vs], [(a, b.v) for a, b in pairs]


def test_sort_objects_with_python_comparisons():
    from ember_test_helpers import compile, stats
    _V.calls.clear()
    expected = sort_objects(torch.ones(2))
    eager_calls = list(_V.calls)
    _V.calls.clear()
    got = compile(sort_objects)(torch.ones(2))
    assert got[1:] == expected[1:] and _V.calls == eager_calls  # the same comparisons, in order
    assert stats()["graph_breaks"] == 0


def tensor_among_strings(a, items):
    # Tensor.__eq__ of a str/None is NotImplemented: `==` falls back to identity (False), no data read
    mixed = ["b", a, None, "c"]
    return a + 1, mixed.index("c"), mixed.count(None), "c" in mixed, None in (a,), items.index("x"), \
        a in [None, a]


def test_tensor_compared_with_str_or_none_is_not_equal():
    check_same(tensor_among_strings, torch.randn(3), [torch.randn(2), "x"])
