"""Python's ``random`` module in a compiled frame (variables/random_draws.py).

``random.randint`` / ``randrange`` / ``uniform`` / ``random`` with constant arguments are drawn in
Python just before the graph, on the same generator: the values and Python's random stream after
the call equal eager's, and a new value each call does not recompile (torch.compile 2.13: one
graph for randint/randrange/uniform over three calls; two for random.random(), which it breaks on;
ember captures that one too). A use that needs the number in Python breaks the graph and runs on
the real value.
"""
import math
import random

import pytest
import torch
import torch._dynamo

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

RNG = random.Random(0)


def _run(fn, *args, calls=3):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for i in range(calls):
        rng_state = RNG.getstate()
        random.seed(i)
        out = compiled(*args)
        after = (random.getstate(), RNG.getstate())
        RNG.setstate(rng_state)
        random.seed(i)
        ref = fn(*args)
        assert_same(out, ref)
        assert after == (random.getstate(), RNG.getstate()), "the random stream differs from eager's"
    return cnt.frame_count


CAPTURED = {
    "randint": lambda x: x + random.randint(1, 10),
    "uniform": lambda x: x * random.uniform(0.5, 1.5),
    "randrange": lambda x: x - random.randrange(10),
    "randrange_step": lambda x: x - random.randrange(0, 20, 3),
    "keywords": lambda x: x + random.randint(a=1, b=3),
    "reversed": lambda x: random.uniform(0, 1) - x,
    "two_draws": lambda x: x * random.randint(1, 5) + random.uniform(0, 1) * x,
    "pow": lambda x: x ** random.uniform(1, 2),
    "int_tensor_float_value": lambda x: x.int() + random.uniform(0, 3),
    "bool_tensor_int_value": lambda x: x.bool() + random.randint(1, 3),
    "half_tensor": lambda x: x.half() * random.uniform(1, 2),
    "value_returned": lambda x: (x * random.randint(1, 5), random.randint(1, 9)),
    "in_a_list": lambda x: [x + 1, random.uniform(0, 1)],
}


@pytest.mark.parametrize("name", sorted(CAPTURED))
def test_draws_are_captured_without_recompiling(name):
    if REFERENCE and name == "int_tensor_float_value":
        pytest.skip("torch.compile 2.13 answers float64 here (eager: float32)")
    assert _run(CAPTURED[name], torch.arange(3.)) == 1


def _helper():
    return random.uniform(-1, 1)


def test_draw_in_an_inlined_function():
    assert _run(lambda x: x + _helper(), torch.ones(3)) == 1


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 breaks the graph at random.random() (2 graphs)")
def test_random_random_is_captured():
    assert _run(lambda x: x + random.random(), torch.ones(3)) == 1


def test_draws_around_a_graph_break():
    def f(x):
        a = random.randint(1, 3)
        y = x * a
        torch._dynamo.graph_break()
        return y + random.uniform(0, 1), a
    _run(f, torch.ones(3))


@pytest.mark.parametrize("g", [
    lambda x: x + 1 if random.random() > 0.5 else x - 1,
    lambda x: torch.ones(random.randint(1, 5)) + x.sum(),
    lambda x: x * int(random.uniform(1, 5)),
    lambda x: x + math.floor(random.uniform(0, 3)),
    lambda x: x[random.randint(0, 2)],
    lambda x: (x + 1, f"{random.uniform(0, 1):.3f}"),
    lambda x: torch.full((2,), random.uniform(0, 1)),
    lambda x: x.add(random.uniform(0, 1)),
    lambda x: x > random.uniform(0, 1),
    lambda x: x * random.randint(1, x.shape[0]),
    lambda x: (random.seed(3), x * random.uniform(0, 1))[1],
    lambda x: x * random.choice([1, 2, 3]),
    lambda x: x + RNG.randint(1, 5),
], ids=["branch", "size", "int", "floor", "index", "fstring", "full", "method_arg", "compare", "nonconstant_arg",
        "seed_first", "choice", "other_generator"])
def test_other_uses_run_on_the_real_value(g, request):
    if REFERENCE and request.node.callspec.id in ("floor", "other_generator"):
        pytest.skip("torch.compile 2.13: an internal error (floor), another stream than eager's (other_generator)")
    _run(g, torch.arange(3.))


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises an InternalTorchDynamoError")
def test_a_draw_that_raises_raises_as_eager():
    f = compile(lambda x: x + random.randint(5, 1), backend=CompileCounter())
    random.seed(0)
    with pytest.raises(ValueError):
        f(torch.ones(2))
    state = random.getstate()
    random.seed(0)
    with pytest.raises(ValueError):
        random.randint(5, 1)
    assert state == random.getstate()


@pytest.mark.skipif(REFERENCE, reason="ember's rerun of a graph that raises (capture/rerun.py)")
def test_graph_that_raises_draws_once():
    def f(x, i):
        v = random.uniform(0, 1)
        return x[i] * v
    compiled = compile(f, backend=CompileCounter())
    compiled(torch.ones(3), torch.tensor(0))
    random.seed(5)
    with pytest.raises(IndexError):
        compiled(torch.ones(3), torch.tensor(7))
    after = random.getstate()
    random.seed(5)
    with pytest.raises(IndexError):
        f(torch.ones(3), torch.tensor(7))
    assert after == random.getstate()


# Python arithmetic on a drawn value (derived_value): computed right after the draws, one graph.
# torch.compile 2.13 gives up on the whole frame here ("unimplemented builtin op on tensor
# arguments": 0 graphs, the frame runs eagerly); f3-style code (`y = x * r; y * 2`) it captures.
ARITHMETIC = {
    "scaled": lambda x: x + random.uniform(0, 1) * 2,
    "shifted_int": lambda x: x * (random.randint(1, 5) + 1),
    "random_random": lambda x: x * (1 - random.random()),
    "negated": lambda x: x - -random.uniform(0, 1),
    "two_draws": lambda x: x * (random.randint(1, 9) * 3 - random.random()),
    "floordiv_int_tensor": lambda x: x.int() * (random.randint(0, 4) // 2 - 1),
    "truediv_int_tensor": lambda x: x.int() * (random.randint(0, 4) / 3),
    "zero_dim": lambda x: x.sum() + random.uniform(0, 1) * 2,
    "half": lambda x: x.half() * (random.uniform(1, 2) % 0.5),
    "inplace": lambda x: x * _scaled_draw(),
    "returned": lambda x: (x * 2, random.randint(1, 9) * 3 - 0.5),
}


def _scaled_draw():
    r = random.uniform(0, 1)
    r *= 4
    r -= 1
    return r


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 runs these frames eagerly (0 graphs)")
@pytest.mark.parametrize("name", sorted(ARITHMETIC))
def test_arithmetic_on_draws_is_captured(name):
    assert _run(ARITHMETIC[name], torch.arange(3.)) == 1


def test_arithmetic_on_a_draw_across_a_graph_break():
    def f(x):
        a = random.uniform(1, 2) * 3
        torch._dynamo.graph_break()
        return x + a, -a
    _run(f, torch.ones(2))


@pytest.mark.parametrize("g", [
    lambda x: x * (2 / random.randint(1, 3)),        # a drawn divisor: 0 on another call raises mid-frame
    lambda x: x * (2 ** random.randint(-2, 2)),      # int ** int: int or float, by value
    lambda x: (x + 1, random.randint(1, 5) * 2 ** 62),  # past int64 for some draws
], ids=["drawn_divisor", "int_pow", "int64_overflow"])
def test_arithmetic_that_depends_on_the_value_still_runs_on_it(g):
    _run(g, torch.arange(3.))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.complex64, torch.int32, torch.int64,
                                   torch.bool])
@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 answers float64 / complex128 here (a wrong dtype)")
def test_a_draw_with_a_zero_dim_tensor_keeps_its_dtype(dtype):
    x = torch.tensor(1).to(dtype)
    _run(lambda x: x + random.uniform(0, 1), x)
    _run(lambda x: x * random.randint(1, 3), x)


# --------------------------------------------------------------------------- #
# random.Random objects from outside the frame: a global one, or an argument
# --------------------------------------------------------------------------- #

def _global_generator(x):
    return x * RNG.random() + RNG.uniform(1, 2) + RNG.randint(0, 9) + RNG.randrange(5)


def _generator_argument(x, g):
    return x * g.random() + g.randint(1, 6) + g.uniform(-1, 1)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 draws other values than eager from a Random object")
def test_global_generator_object_is_captured():
    # ember broke at Random.random (C) and inside random.py's randint: 3 graphs
    assert _run(_global_generator, torch.arange(3.)) == 1


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 draws other values than eager from a Random object")
def test_generator_argument_draws_from_each_calls_generator():
    cnt = CompileCounter()
    compiled = compile(_generator_argument, backend=cnt)
    for seed in (1, 2, 3, 3):
        g_c, g_e = random.Random(seed), random.Random(seed)
        g_c.random()  # (a different position in the stream for each call)
        g_e.random()
        assert_same(compiled(torch.ones(3), g_c), _generator_argument(torch.ones(3), g_e))
        assert g_c.getstate() == g_e.getstate()
    assert cnt.frame_count == 1  # torch.compile: 1 graph (no guard on which generator)


def test_same_generator_passed_twice_draws_in_program_order():
    def fn(x, g1, g2):
        return x * g1.random() + g2.random() * 10 + g1.randint(0, 100)

    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for shared in (False, True, False):
        a_c, a_e = random.Random(4), random.Random(4)
        b_c, b_e = (a_c, a_e) if shared else (random.Random(5), random.Random(5))
        assert_same(compiled(torch.ones(2), a_c, b_c), fn(torch.ones(2), a_e, b_e))
        assert (a_c.getstate(), b_c.getstate()) == (a_e.getstate(), b_e.getstate())
