"""A frame (or a resume function) that traced no tensor operation but asked
``torch.compiler.is_compiling()`` is not skipped: torch.compile commits such a frame (its answer,
True, decides what the frame does: upstream test_skip_non_tensor.test_do_not_skip_side_effects,
test_reconstruct.test_graph_break_in_wrapped_*), where ember ran it eagerly from then on and the
program saw False (``assert torch.compiler.is_compiling()`` after a break raised AssertionError).
"""
import torch

from ember_test_helpers import CompileCounter, compile

counter_value = 0


def bump_when_compiling(x):
    global counter_value
    if torch.compiler.is_compiling():
        counter_value += 1
    return x


def test_global_write_under_is_compiling_every_call():
    global counter_value
    counter_value = 0
    compiled = compile(bump_when_compiling, backend=CompileCounter())
    x = torch.ones(2)
    for _ in range(3):
        assert compiled(x) is x
    assert counter_value == 3  # torch.compile: 3; eager (the skipped frame): 0


def test_assert_is_compiling_in_resume_after_break():
    def inner(x):
        x = x + 1
        torch._dynamo.graph_break()
        assert torch.compiler.is_compiling()
        assert not torch.is_grad_enabled()
        return x + 2

    def outer(x):
        x = torch.no_grad()(inner)(x)
        # the rest of outer (a resume function) has no tensor operation
        assert torch.compiler.is_compiling()
        assert torch.is_grad_enabled()
        return x

    compiled = compile(outer, backend=CompileCounter())
    inp = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(compiled(inp), inp + 3)


def test_frame_without_is_compiling_still_skipped():
    calls = []

    def only_python(x, log):
        log.append(len(log))
        return x

    counter = CompileCounter()
    compiled = compile(only_python, backend=counter)
    x = torch.ones(1)
    compiled(x, calls)
    compiled(x, calls)
    assert calls == [0, 1] and counter.frame_count == 0
