"""The truth of a tensor whose element count is known not to be one (``if x:`` of a 4-element
tensor, ``x in [y]`` and ``list.count`` / ``index`` comparing tensors with ``==``) raises
RuntimeError in eager whatever the data. The trace raises that same error: a ``try`` in the frame
catches it in the graph, fullgraph=True raises it as eager does, and uncaught without fullgraph
the graph still runs what came before (a break where eager raises). One-element tensors stay
data-dependent. Each case compares with eager."""
from __future__ import annotations

import pytest
import torch

from ember_test_helpers import CompileCounter, check_raises_same, check_same, compile


def test_if_of_a_multi_element_tensor_caught_in_the_frame():
    def f(x):
        try:
            if x:
                return x + 1
        except RuntimeError as e:
            return x * 2, str(e)
        return x
    check_same(f, torch.randn(4, requires_grad=True), graphs=1)


def test_bool_of_an_empty_tensor_caught_in_the_frame():
    def f(x, y):
        try:
            return bool(y) + x
        except RuntimeError as e:
            return x - 1, str(e)
    check_same(f, torch.randn(3), torch.empty(0), graphs=1)


def test_not_of_a_multi_element_tensor_under_fullgraph_raises_as_eager():
    def f(x):
        y = x * 2
        return 1 if not y else 2
    check_raises_same(f, torch.randn(4), fullgraph=True)


def test_uncaught_still_compiles_what_comes_before():
    def f(x):
        y = x.sin() * 2
        if y:
            return y
        return x
    check_raises_same(f, torch.randn(4))
    counter = CompileCounter()
    with pytest.raises(RuntimeError, match="more than one value"):
        compile(f, backend=counter)(torch.randn(4))
    assert counter.frame_count == 1  # (y = x.sin() * 2, as torch.compile)


def test_in_list_of_tensors_compares_with_eq_and_raises():
    def f(x, y):
        try:
            found = x in [y]
        except RuntimeError:
            return x * 0
        return x + found
    check_same(f, torch.randn(4, requires_grad=True), torch.randn(4), graphs=1)


def test_in_finds_by_identity_before_comparing():
    def f(x, y):
        return x * ((x in [x, y]) + 1)
    check_same(f, torch.randn(4, requires_grad=True), torch.randn(4), graphs=1)


def test_list_count_of_a_tensor_raises_under_fullgraph_as_eager():
    def f(x, y):
        return [x, y].count(x) + x
    check_raises_same(f, torch.randn(4), torch.randn(4), fullgraph=True)


def test_list_index_against_a_number_broadcasts_and_raises():
    def f(x):
        try:
            return [3, x].index(x) + x
        except RuntimeError:
            return x - 1
    check_same(f, torch.randn(2, 2), graphs=1)


def test_one_element_tensor_stays_data_dependent():
    def f(x, y):
        return x * 2 if y in [x] else x
    counter = CompileCounter()
    compiled = compile(f, backend=counter)
    x = torch.ones(1)
    assert torch.equal(compiled(x, torch.ones(1)), f(x, torch.ones(1)))
    assert torch.equal(compiled(x, torch.zeros(1)), f(x, torch.zeros(1)))


def test_broadcast_mismatch_is_eagers_size_error():
    def f(x, y):
        return x in [y]
    check_raises_same(f, torch.randn(3), torch.randn(4))
