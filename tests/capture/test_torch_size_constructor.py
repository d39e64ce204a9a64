"""``torch.Size([x.shape[0], 2])`` built in the frame from a symbolic size keeps it symbolic
(variables/constructors.construct): ember read every item as a constant, so after the automatic
dynamic recompile each further size compiled again (torch.compile: static, then one dynamic graph)."""
from __future__ import annotations

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

PROGRAMS = {
    "new_zeros": lambda x: x.new_zeros(torch.Size([x.shape[0], 2])) + x[:, :1],
    "tuple_arg": lambda x: x.reshape(torch.Size((x.shape[0] * x.shape[1],))) * 2,
    "of_shape": lambda x: (x.expand(torch.Size(x.shape)) + 1, torch.Size([x.size(0), 3])),
    "returned": lambda x: (x * 2, torch.Size([x.shape[0], 3]), type(torch.Size([x.shape[0]])).__name__),
    "numel": lambda x: x.sum() * torch.Size([x.shape[0], 4]).numel(),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_size_of_symbolic_items_is_two_graphs(name):
    fn = PROGRAMS[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, fullgraph=True)
    for n in (2, 3, 4, 5):
        x = torch.randn(n, 3)
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 2


def test_size_of_plain_ints_and_bad_items_as_eager():
    if REFERENCE:
        pytest.skip("torch.compile 2.13 raises InternalTorchDynamoError for torch.Size([n, 2.5]), not TypeError")
    def fn(x):
        return x.new_ones(torch.Size([2, 3])).sum() + x, torch.Size([])
    assert_same(compile(fn, backend=CompileCounter(), fullgraph=True)(torch.ones(3)), fn(torch.ones(3)))

    def bad(x):
        return torch.Size([x.shape[0], 2.5])
    with pytest.raises(TypeError):
        bad(torch.ones(3))
    compiled = compile(bad, backend=CompileCounter())
    for n in (2, 3, 4):
        with pytest.raises(TypeError):
            compiled(torch.ones(n))
