"""Builtins applied to a symbolic size keep it symbolic: ``len(x)`` and ``math.prod(x.shape)``.

Found by the HuggingFace sweep's ``--vary`` rows: CLIP's contrastive loss is
``cross_entropy(logits, torch.arange(len(logits)))``; ``len()`` of the tensor read the batch size
as a plain int, so after the one automatic-dynamic recompile a third batch size compiled again
(torch.compile: no further graph). Each test compares with eager at three sizes and counts graphs
against torch.compile's two (static, then dynamic).
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import ember
from ember_test_helpers import assert_same, check_raises_same, clone_inputs, stats


def _run_sizes(fn, shapes, *, grad=False, backend="aot_eager"):
    compiled = ember.compile(fn, backend=backend)
    for shape in shapes:
        x = torch.randn(*shape)
        a, b = clone_inputs(x), clone_inputs(x)
        if grad:
            a.requires_grad_()
            b.requires_grad_()
        expected, actual = fn(a), compiled(b)
        assert_same(actual, expected)
        if grad:
            expected.sum().backward()
            actual.sum().backward()
            assert_same(b.grad, a.grad)
    return stats()["graphs"]


def contrastive_loss(logits):
    return F.cross_entropy(logits, torch.arange(len(logits), device=logits.device))


def arange_of_len(x):
    return torch.arange(len(x)) * x.sum()


def new_zeros_of_len(x):
    return x.new_zeros(len(x), 2) + x[:, :2]


def prod_of_shape(x):
    return x.reshape(math.prod(x.shape)) * 2


def prod_of_list_with_start(x):
    return x.reshape(math.prod(list(x.shape[1:]), start=x.shape[0]))


@pytest.mark.parametrize("fn", [contrastive_loss, arange_of_len, new_zeros_of_len, prod_of_shape,
                                prod_of_list_with_start])
def test_a_third_size_reuses_the_dynamic_graph(fn):
    # torch.compile: the first sizes, then one dynamic graph for every later size
    assert _run_sizes(fn, [(4, 4), (6, 6), (8, 8)], grad=True) == 2


def test_len_of_a_static_size_is_a_constant():
    def f(x):
        return x * len(x) if len(x) > 2 else x
    assert _run_sizes(f, [(4, 3), (4, 3)]) == 1


def test_prod_of_constants_and_generators_still_folds():
    def f(x):
        return x * math.prod((2, 3)) + math.prod(i for i in (1, 2)) + math.prod([], start=5)
    assert _run_sizes(f, [(4, 3)]) == 1


def test_len_of_a_0d_tensor_raises_as_eager():
    def f(x):
        return len(x)
    check_raises_same(f, torch.tensor(1.0))


def test_prod_of_tensors_multiplies_them_as_eager():
    def f(x):
        return math.prod([x, x + 1, 2.5], start=x[0])
    assert _run_sizes(f, [(3,)], grad=True) == 1


@pytest.mark.parametrize("args", [(5,), ()])
def test_prod_of_a_non_iterable_raises_as_eager(args):
    def f(x):
        return x + math.prod(*args)
    check_raises_same(f, torch.ones(2))


def nbytes_of_input(x):
    return x * x.nbytes + x.numel() * x.itemsize


def test_nbytes_of_a_dynamic_input():
    # the fake tensor refuses numel() of symbolic sizes: reading nbytes was an internal error
    # (the frame ran eagerly from its second size on)
    ember.reset()
    assert _run_sizes(nbytes_of_input, [(2, 3), (3, 3), (4, 3)], grad=True) == 2
