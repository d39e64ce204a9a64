"""pybind11 enum members (``torch.nn.attention.SDPBackend``) as dict keys and set elements: their
C++ ``__eq__``/``__hash__`` compare members by value and run no Python code, so the trace keys
them as Python does (before: a graph break)."""
import pytest
import torch
from torch.nn.attention import SDPBackend

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset


def test_enum_members_as_keys_made_in_the_frame():
    def fn(x, backend):
        seen = {backend, SDPBackend.MATH}
        scale = {SDPBackend.MATH: 2.0, SDPBackend.FLASH_ATTENTION: 3.0}
        return x * scale[backend] + len(seen), backend in scale, SDPBackend.EFFICIENT_ATTENTION in scale

    reset()
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    for backend in (SDPBackend.MATH, SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
        assert_same(compiled(x, backend), fn(x, backend))
    assert cnt.frame_count == 2  # one graph per member passed in


@pytest.mark.skipif(REFERENCE, reason="torch.compile fails making its key guard for such a dict (SyntaxError)")
def test_dict_input_keyed_by_enum_members():
    def fn(x, table):
        return x * table[SDPBackend.MATH] + len(table)

    reset()
    compiled = compile(fn, backend=CompileCounter(), fullgraph=True)
    x = torch.randn(3)
    for table in ({SDPBackend.MATH: 2.0}, {SDPBackend.MATH: 5.0, SDPBackend.FLASH_ATTENTION: 1.0}):
        assert_same(compiled(x, table), fn(x, table))
