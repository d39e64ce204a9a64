"""``torch.compiler.reset()`` resets ember as it resets torch.compile: the next call compiles again
(counts as torch.compile's; ``EMBER_TEST_REFERENCE=torch`` runs the same program on it)."""
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def double(x):
    return x * 2


def test_torch_compiler_reset_forgets_compiled_entries():
    counter = CompileCounter()
    compiled = compile(double, backend=counter)
    x = torch.randn(3)
    assert_same(compiled(x), double(x))
    assert_same(compiled(x), double(x))
    assert counter.frame_count == 1
    torch.compiler.reset()
    assert_same(compiled(x), double(x))  # compiled again after the reset
    assert_same(compiled(x), double(x))
    assert counter.frame_count == 2


def test_torch_compiler_reset_restarts_the_recompile_count():
    counter = CompileCounter()
    compiled = compile(double, backend=counter)
    for dtype in (torch.float32, torch.float64):
        compiled(torch.ones(3, dtype=dtype))
    torch.compiler.reset()
    for dtype in (torch.float32, torch.float64):
        assert_same(compiled(torch.ones(3, dtype=dtype)), double(torch.ones(3, dtype=dtype)))
    assert counter.frame_count == 4
