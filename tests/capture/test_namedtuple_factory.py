"""``collections.namedtuple(...)`` called inside a compiled frame (variables/constructors.py).

The class is made while tracing, as torch.compile does: one graph over repeated calls
(before: a graph break at ``sys.intern`` inside namedtuple, then a resume function guarded on the
new class of each call, so every call recompiled). torch.compile's counts (checked with
EMBER_TEST_REFERENCE=torch): 1 graph for two calls of each program below.
"""
import collections

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


def plain(x):
    P = collections.namedtuple("P", ["a", "b"])
    p = P(x, x + 1)
    return p.a * p.b


def keywords_and_methods(x):
    P = collections.namedtuple("P", "a b")
    p = P(a=x, b=2)
    return p._replace(b=3).b * x, p._asdict()["a"] + 1


def defaults(x):
    P = collections.namedtuple("P", ["a", "b"], defaults=[5])
    p = P(x)
    return p.a * p.b, tuple(p)[0], len(p)


def unpacked(x):
    P = collections.namedtuple("P", ["a", "b"])
    a, b = P(x, x * 2)
    return a + b, isinstance(P(1, 2), tuple)


def made_from_a_list(x):
    P = collections.namedtuple("P", ["a", "b"])
    return P._make([x, x + 1]).b


def indexed_and_shown(x):
    P = collections.namedtuple("P", ["a", "b"])
    p = P(x, x)
    return p[1] + 1, repr(P(1, 2))


@pytest.mark.parametrize("fn", [plain, keywords_and_methods, defaults, unpacked, made_from_a_list,
                                indexed_and_shown], ids=lambda f: f.__name__)
def test_namedtuple_made_in_the_frame(fn):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for _ in range(3):
        assert_same(compiled(torch.arange(3.)), fn(torch.arange(3.)))
    assert cnt.frame_count == 1


def test_namedtuple_instance_returned():
    def f(x):
        P = collections.namedtuple("P", ["a", "b"])
        return P(x + 1, 2)
    out, ref = compile(f, backend=CompileCounter())(torch.ones(2)), f(torch.ones(2))
    assert type(out).__name__ == "P" and out._fields == ref._fields
    assert_same(tuple(out), tuple(ref))


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises InternalTorchDynamoError (it catches TypeError only)")
def test_invalid_field_names_raise_as_eager():
    def f(x):
        return collections.namedtuple("P", ["a", "a"])(x, x)
    with pytest.raises(ValueError, match="Encountered duplicate field name"):
        f(torch.ones(1))
    with pytest.raises(ValueError, match="Encountered duplicate field name"):
        compile(f, backend=CompileCounter())(torch.ones(1))


def factory_as_a_key(d, x):
    # the factory function itself as a dict key / set element: found by identity, as any function
    marked = {collections.namedtuple, "other"}
    scale = 2 if collections.namedtuple in d else 3
    return d[3] * scale + (1 if collections.namedtuple in marked else 0)


def test_factory_as_a_dict_key_and_its_guard():
    from ember_test_helpers import check_same
    counter = check_same(factory_as_a_key, {collections.namedtuple: None, 3: torch.ones(2)}, torch.zeros(1))
    compiled = compile(factory_as_a_key, backend=counter, fullgraph=True)
    without = {2: None, 3: torch.ones(2)}  # another key set: the membership answer changes
    assert_same(compiled(without, torch.zeros(1)), factory_as_a_key(without, torch.zeros(1)))
    assert counter.frame_count == 2
