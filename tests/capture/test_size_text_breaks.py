"""Text and number theory of a dynamic size: a graph break, as torch.compile's, not a guard per size.

``str(x.size(0))``, ``"{}".format(n)``, ``"%d" % n``, ``hex(n)``, ``math.gcd(n, 4)`` need the
exact value. Reading it pinned the size: with automatic dynamic shapes every new size recompiled
(4 graphs for 4 sizes). torch.compile 2.13 breaks the graph there instead: 2 graphs (the static
first one, then one dynamic graph; the call runs after it). f-strings, ``"%s" % (n,)``, math.log
and indexing are specialised by torch.compile too (a guard per size), and stay so here.
Counts checked against torch.compile with EMBER_TEST_REFERENCE=torch.
"""
import math

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

SIZES = (2, 3, 4, 5)


def _graphs(g):
    def f(x):
        return x + 1, g(x.shape[0])
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for n in SIZES:
        out, ref = compiled(torch.ones(n)), f(torch.ones(n))
        assert_same(out[0], ref[0])
        assert type(out[1]) is type(ref[1]) and out[1] == ref[1]
    return cnt.frame_count


UNGUARDED = {
    "str": lambda n: str(n), "repr": lambda n: repr(n), "hex": lambda n: hex(n), "bin": lambda n: bin(n),
    "gcd": lambda n: math.gcd(n, 4), "lcm": lambda n: math.lcm(n, 4), "factorial": lambda n: math.factorial(n),
    "isqrt": lambda n: math.isqrt(n), "comb": lambda n: math.comb(n, 2), "isclose": lambda n: math.isclose(n, 3),
    "isfinite": lambda n: math.isfinite(n), "str.format": lambda n: "{}".format(n), "pow": lambda n: pow(n, 2),
    "str_of_float": lambda n: str(n / 2), "__str__": lambda n: n.__str__(), "join": lambda n: ",".join([str(n)]),
    "concat": lambda n: "a" + str(n), "sqrt": lambda n: math.sqrt(n), "ceil": lambda n: math.ceil(n / 2),
}


@pytest.mark.parametrize("name", sorted(UNGUARDED))
def test_value_of_a_dynamic_size_is_not_guarded(name):
    assert _graphs(UNGUARDED[name]) == 2


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 fails on these (TypeError observed: the frame "
                    "is skipped after one graph; format(): an internal error)")
@pytest.mark.parametrize("g", [lambda n: "%d" % n, lambda n: format(n), lambda n: format(n, "d")],
                         ids=["percent", "format", "format_spec"])
def test_percent_and_format_of_a_dynamic_size(g):
    assert _graphs(g) == 2


SPECIALISED = {
    "fstring": lambda n: f"{n}", "percent_tuple": lambda n: "%s" % (n,), "log": lambda n: math.log(n),
    "hash": lambda n: hash(n), "bit_length": lambda n: n.bit_length(), "index": lambda n: (1, 2, 3, 4, 5, 6)[n],
}


@pytest.mark.parametrize("name", sorted(SPECIALISED))
def test_what_torch_compile_specialises_stays_specialised(name):
    assert _graphs(SPECIALISED[name]) == 4


def test_text_of_a_static_size_is_a_constant():
    cnt = CompileCounter()

    def f(x):
        return x * len(str(x.shape[0]) + "{}".format(x.shape[0]) + "%d" % x.shape[0])
    out = compile(f, backend=cnt, fullgraph=True)(torch.ones(3))
    assert_same(out, f(torch.ones(3)))
    assert cnt.frame_count == 1


def test_text_of_a_size_then_more_tensor_work():
    # the break splits the dynamic frame: graph before, resume function's graph after (static
    # first, dynamic on its next size): 5 graphs under torch.compile 2.13 too
    def f(x):
        y = x.sin()
        tag = "n=" + str(x.shape[0])
        return y * 2, tag
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for n in SIZES:
        out, ref = compiled(torch.ones(n)), f(torch.ones(n))
        assert_same(out, ref)
    assert cnt.frame_count == 5
