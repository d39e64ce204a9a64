"""A binding of torch's runtime (``torch._C.*``) called with a symbolic size is still process state.

Under ``dynamic=True`` the batch size ``torch.vmap`` passes to
``torch._C._functorch._vmap_increment_nesting`` is a SymInt. The call used to be treated as a
pure function of its (symbolic) arguments and run on them at trace time: it pushed a vmap level
for real, the trace then broke at the matching decrement, and the level was never popped. Every
later random op in the process failed ("vmap: called random operation while in randomness
error mode"). It must break before the call, as with a static batch size.
"""
import pytest
import torch
import torch.nn.functional as F

from ember_test_helpers import assert_same, compile


def _no_functorch_level_left():
    assert torch._C._functorch.peek_interpreter_stack() is None
    torch.rand(2)  # raises while a vmap level in "error" randomness mode is still active


@pytest.mark.parametrize("dynamic", [False, True])
def test_vmap_leaves_no_level(dynamic):
    def fn(x):
        return torch.vmap(lambda a: a.square())(x)

    x = torch.rand(37, 3, dtype=torch.float64)
    assert_same(compile(fn, backend="eager", dynamic=dynamic)(x), fn(x))
    _no_functorch_level_left()


@pytest.mark.parametrize("dynamic", [False, True])
def test_jacfwd_leaves_no_level(dynamic):
    def func(x, idxs):
        return x.square() * F.one_hot(idxs, 3)

    def fn(x, idxs):
        return torch.func.jacfwd(func, argnums=(0,))(x, idxs)

    idxs = torch.randint(3, (37,), dtype=torch.int64)
    x = torch.rand(37, 3, dtype=torch.float64)
    assert_same(compile(fn, backend="eager", dynamic=dynamic)(x, idxs), fn(x, idxs))
    _no_functorch_level_left()


def test_vmap_random_after_dynamic_compile():
    # the symptom the leak caused: a later, unrelated compiled random op
    def fn(x):
        return torch.vmap(lambda a: a * 2)(x)

    compile(fn, backend="eager", dynamic=True)(torch.ones(5, 2))
    g = compile(lambda x: x + torch.rand(3).sum() * 0, backend="eager")
    assert_same(g(torch.ones(3)), torch.ones(3))
