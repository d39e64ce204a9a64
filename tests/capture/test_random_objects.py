"""``random.Random(seed)`` made in the frame with a constant seed: its values follow from the seed,
so they are constants of the graph (torch.compile: one graph; ember broke at ``Random.seed``).
Values, exceptions and the state of an escaping generator equal eager's."""
import random

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, check_raises_same, check_same, compile


def draws(x):
    x = x + 1
    rr = random.Random(2)
    return x * rr.random() + rr.uniform(1, 3) + rr.randint(0, 9) + rr.randrange(2, 20, 3)


def state_roundtrip(x):
    rr = random.Random(5)
    st = rr.getstate()
    a = rr.random()
    rr.setstate(st)
    b = rr.random()
    rr.seed(7)
    return x + a + b + rr.randrange(10) + rr.gauss(0, 1) + rr.choice([1, 2, 3]), a == b


def test_seeded_generator_in_frame_one_graph():
    check_same(draws, torch.randn(3), graphs=1)  # torch.compile: 1 graph


def test_seeded_generator_state_methods():
    # ember: 1 graph; torch.compile 2.13 breaks at gauss (it traces only random/randint/randrange/uniform)
    check_same(state_roundtrip, torch.randn(3), graphs=None if REFERENCE else 1, fullgraph=not REFERENCE)


def test_global_generator_untouched():
    random.seed(11)
    expected_next = random.Random(11).random()
    compile(draws, fullgraph=True)(torch.ones(2))
    assert random.random() == expected_next  # the frame's own generator is not Python's global one


def test_escaping_generator_has_eagers_state():
    def f(x):
        rr = random.Random(3)
        return x * rr.random(), rr

    counter = CompileCounter()
    out, gen = compile(f, backend=counter)(torch.ones(2))
    expected, eager_gen = f(torch.ones(2))
    assert counter.frame_count == 1
    assert torch.equal(out, expected)
    assert type(gen) is random.Random
    assert gen.getstate() == eager_gen.getstate()
    assert [gen.random() for _ in range(3)] == [eager_gen.random() for _ in range(3)]


def test_generator_live_across_a_break():
    def f(x):
        rr = random.Random(4)
        a = rr.random()
        print("", end="")  # a graph break with the generator live across it
        return x * a + rr.random()

    check_same(f, torch.ones(2), graphs=None, fullgraph=False)


def bad_range(x):
    rr = random.Random(3)
    return x + rr.randint(5, 1)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises InternalTorchDynamoError, not eager's ValueError")
def test_invalid_arguments_raise_like_eager():
    check_raises_same(bad_range, torch.ones(2))
