"""torch.compiler.set_stance (and ember.set_stance): each stance's effect on compiles and answers,
as torch.compile has them (tests/capture/test_stance.py runs the same counts under torch.compile
with EMBER_TEST_REFERENCE=torch)."""
import pytest
import torch

import ember
from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


def double(x):
    return x * 2


@pytest.fixture(autouse=True)
def _default_stance():
    yield
    torch.compiler.set_stance("default")


def _compiled(fn=double):
    counter = CompileCounter()
    return compile(fn, backend=counter, dynamic=False), counter


def test_force_eager_runs_without_compiling_then_default_uses_the_cache():
    f, counter = _compiled()
    with torch.compiler.set_stance("force_eager"):
        assert_same(f(torch.ones(2)), double(torch.ones(2)))
    assert counter.frame_count == 0
    f(torch.ones(2))
    f(torch.ones(2))
    assert counter.frame_count == 1


def test_eager_on_recompile_uses_entries_that_hold_and_never_compiles():
    f, counter = _compiled()
    f(torch.ones(2))
    with torch.compiler.set_stance("eager_on_recompile"):
        assert_same(f(torch.ones(2)), double(torch.ones(2)))
        assert_same(f(torch.ones(3)), double(torch.ones(3)))  # a miss: eagerly
    assert counter.frame_count == 1
    f(torch.ones(3))
    assert counter.frame_count == 2


def test_fail_on_recompile_raises_on_a_miss_and_serves_hits():
    f, counter = _compiled()
    f(torch.ones(2))
    with torch.compiler.set_stance("fail_on_recompile"):
        assert_same(f(torch.ones(2)), double(torch.ones(2)))
        with pytest.raises(RuntimeError, match="fail_on_recompile"):
            f(torch.ones(3))
    assert counter.frame_count == 1


def test_eager_then_compile_runs_the_first_call_eagerly():
    def halve(x):
        return x / 2

    f, counter = _compiled(halve)
    with torch.compiler.set_stance("eager_then_compile"):
        assert_same(f(torch.ones(2)), halve(torch.ones(2)))
        assert counter.frame_count == 0
        assert_same(f(torch.ones(2)), halve(torch.ones(2)))
        assert counter.frame_count == 1


def test_aot_eager_then_compile_compiles_the_first_miss_with_aot_eager():
    def triple(x):  # (torch counts a function's first calls by its code's location, for good)
        return x * 3

    f, counter = _compiled(triple)
    with torch.compiler.set_stance("aot_eager_then_compile"):
        assert_same(f(torch.ones(2)), triple(torch.ones(2)))
        assert counter.frame_count == 0  # (aot_eager compiled it, not the function's backend)
        assert_same(f(torch.ones(3)), triple(torch.ones(3)))
        assert counter.frame_count == 1


def test_force_backend_compiles_with_that_backend():
    f, counter = _compiled()
    other = CompileCounter()
    with torch.compiler.set_stance(force_backend=other):
        assert_same(f(torch.ones(2)), double(torch.ones(2)))
    assert (counter.frame_count, other.frame_count) == (0, 1)


def test_decorator_sets_the_stance_only_while_the_function_runs():
    f, counter = _compiled()

    @torch.compiler.set_stance("force_eager")
    def run(x):
        return f(x)

    assert_same(run(torch.ones(2)), double(torch.ones(2)))
    assert counter.frame_count == 0
    f(torch.ones(2))
    assert counter.frame_count == 1


def test_a_call_sets_the_stance_until_the_next_call():
    f, counter = _compiled()
    torch.compiler.set_stance("force_eager")
    f(torch.ones(2))
    torch.compiler.set_stance("default")
    f(torch.ones(2))
    assert counter.frame_count == 1


def test_force_backend_with_another_stance_is_an_error():
    with pytest.raises(RuntimeError, match="non-default stance cannot have force_backend"):
        torch.compiler.set_stance("force_eager", force_backend="eager")


@pytest.mark.skipif(REFERENCE, reason="ember's own entry point")
def test_ember_set_stance_alone():
    f, counter = _compiled()
    with ember.set_stance("force_eager"):
        f(torch.ones(2))
    assert counter.frame_count == 0
    f(torch.ones(2))
    assert counter.frame_count == 1


def test_eager_then_compile_makes_the_sizes_that_differ_dynamic():
    def scale(x):
        return x * 5

    counter = CompileCounter()
    f = compile(scale, backend=counter)
    with torch.compiler.set_stance("eager_then_compile"):
        for n in (2, 3, 4, 5):
            assert_same(f(torch.ones(n, 3)), scale(torch.ones(n, 3)))
    assert counter.frame_count == 1  # the second call compiles with the batch size a symbol


def test_eager_then_compile_counts_ints_and_container_items_of_the_eager_call():
    """The eagerly run first call records its int arguments and the tensors one container level
    down (`z[0]`) too: the second call compiles them as symbols, the third hits (one graph, as
    torch.compile makes; before, 2)."""
    def f(x, y, z):
        return x * y * z[0]

    counter = CompileCounter()
    compiled = compile(f, backend=counter)
    with torch.compiler.set_stance("eager_then_compile"):
        for n in (1, 2, 3):
            args = (n, torch.randn(n), {0: torch.randn(n)})
            assert_same(compiled(*args), f(*args))
    assert counter.frame_count == 1
    for n in (4, 5):  # (after the stance: still the same graph)
        args = (n, torch.randn(n), {0: torch.randn(n)})
        assert_same(compiled(*args), f(*args))
    assert counter.frame_count == 1
