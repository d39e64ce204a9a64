"""A module built in the frame that registers or lists parameters, buffers or submodules
(variables/new_module.NewModuleVariable): ember models only stateless new modules, and the trace
used to see ``_buffers`` / ``_parameters`` missing and believe that the program raises
AttributeError (the frame then ran eagerly from its start: 0 graphs; a ``try/except
AttributeError`` or ``hasattr`` around it would have taken the wrong branch). Now it is a graph
break (EB0042) at that read, after which the rest compiles."""
import torch
import torch.nn as nn

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


class WithBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        return x + self.b


class ListsParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2

    def forward(self, x):
        return x * self.scale + sum(1 for _ in self.parameters())


def buffer_module(x):
    return WithBuffer()(x * 2) + 1


def listing_module(x):
    return ListsParameters()(x * 2) + 1


def has_parameters_dict(x):
    m = ListsParameters()
    return x * (2 if hasattr(m, "_parameters") else 3)


def registers_with_fallback(x):
    m = ListsParameters()
    try:
        m.register_buffer("c", torch.zeros(3))
        return x + m.c + 1
    except AttributeError:
        return x - 100


def _run(fn):
    cnt = CompileCounter()
    x = torch.arange(3.)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    return cnt.frame_count


def test_buffer_and_listing_break_and_compile_the_rest():
    graphs = [_run(buffer_module), _run(listing_module)]
    if not REFERENCE:
        assert graphs == [1, 2]  # (WithBuffer() runs at the break before any op; the call after it compiles)


def test_reads_of_the_module_state_answer_as_eager():
    _run(has_parameters_dict)
    _run(registers_with_fallback)
