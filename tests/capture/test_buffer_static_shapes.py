"""A module's buffer keeps static sizes, as its parameters do: a buffer replaced by one of
another size compiles again rather than making the buffer's sizes symbols (torch.compile's
force_parameter_static_shapes covers parameters and buffers of modules; ember made buffers
dynamic on their second size: one graph fewer than torch.compile). A plain tensor attribute
(not a registered buffer) is automatic dynamic as before."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class WithBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.zeros(3))
        self.plain = torch.zeros(3)

    def forward(self, x):
        return x + self.table.sum() + self.table.shape[0], x * self.plain.sum()


def _count(set_attr, dynamic=None):
    m = WithBuffer()
    cnt = CompileCounter()
    compiled = compile(m, backend=cnt, dynamic=dynamic)
    for n in (3, 4, 5, 6):
        set_attr(m, torch.arange(float(n)))
        x = torch.randn(3, requires_grad=True)
        assert_same(compiled(x), m(x))
    return cnt.frame_count


@pytest.mark.parametrize("dynamic", [None, True])
def test_buffer_of_another_size_recompiles(dynamic):
    assert _count(lambda m, t: setattr(m, "table", t), dynamic) == 4


def test_plain_tensor_attribute_is_automatic_dynamic():
    assert _count(lambda m, t: setattr(m, "plain", t)) == 2
