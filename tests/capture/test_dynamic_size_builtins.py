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


# A user class whose dunders answer with a size (a KV cache's __len__ is its key tensor's length):
# the builtin that called the dunder kept the size as a symbol only for a tensor; for the object it
# read the value, so a cache growing by one each step compiled a graph per step.
class SizedBy:
    def __init__(self, t, less=0):
        self.t, self.less = t, less

    def __len__(self):
        return self.t.shape[0] - self.less

    def __index__(self):
        return self.t.shape[0] - self.less

    def __int__(self):
        return self.t.shape[0] * 2

    def __float__(self):
        return self.t.shape[0] / 2


def len_of_object(x):
    return x * len(SizedBy(x))


def index_of_object(x):
    import operator
    return x[:operator.index(SizedBy(x, 1))] * int(SizedBy(x)) + float(SizedBy(x))


def max_of_one_size(x):
    return x * max(s for s in x.shape) + min([x.shape[-1]])


def real_part_of_a_size(x):
    return x * x.shape[0].real + x.shape[0].numerator + x.shape[0].imag + x.shape[0].denominator


@pytest.mark.parametrize("fn", [len_of_object, index_of_object, max_of_one_size, real_part_of_a_size])
def test_a_size_through_a_user_dunder_or_one_item_stays_dynamic(fn):
    assert _run_sizes(fn, [(4,), (6,), (8,), (5,)], grad=True) == 2


def test_len_of_object_going_negative_raises_as_eager():
    def f(x):
        try:
            return x * len(SizedBy(x, 3))
        except ValueError as e:
            return x - 1, str(e)
    # 4 static; 6 dynamic with len >= 0; 2 fails that guard (a graph that raises); 8 reuses the
    # dynamic one; 1 is always a static size
    assert _run_sizes(f, [(4,), (6,), (2,), (8,), (1,)], backend="eager") == 4


def test_kv_cache_len_in_a_decode_loop_compiles_twice():
    class Cache:
        def __init__(self):
            self.k = None

        def update(self, k):
            self.k = k if self.k is None else torch.cat([self.k, k], -2)
            return self.k

        def __len__(self):
            return 0 if self.k is None else self.k.shape[-2]

    def attend(cache, x):
        k = cache.update(x)
        return (x @ k.transpose(-1, -2)).softmax(-1) @ k, len(cache)

    ember.reset()
    torch.manual_seed(0)
    xs = [torch.randn(1, 1, 4) for _ in range(6)]
    cache_c, cache_e = Cache(), Cache()
    compiled = ember.compile(attend, backend="eager")
    for x in xs:
        assert_same(compiled(cache_c, x), attend(cache_e, x))
    assert_same(cache_c.k, cache_e.k)
    # static (no cache), static length 2, then one graph for every later length (torch.compile: 3)
    assert stats()["graphs"] == 3


def attention_shape_asserts(q):
    # HF fsmt's attention: `assert list(query.size()) == [tgt_len, bsz, embed_dim]` — a list
    # compared with a list (item by item, no size fixed); a list never equals a tuple
    tgt_len, bsz, embed_dim = q.size()
    assert list(q.size()) == [tgt_len, bsz, embed_dim]
    if list(q.shape) != (tgt_len, bsz, embed_dim) and [bsz] == [q.size(1)]:
        q = q * 2
    if list(q.shape[1:]) == [3, embed_dim]:
        q = q + 1
    return q.sin()


def test_list_of_symbolic_sizes_compared_with_a_list():
    # (fsmt recompiled at every new batch size: the lists were folded as constants, fixing sizes)
    assert _run_sizes(attention_shape_asserts, [(2, 3, 4), (5, 3, 4), (7, 3, 4), (6, 3, 4)], grad=True) == 2
    ember.reset()
    assert _run_sizes(attention_shape_asserts, [(2, 3, 4), (2, 5, 4), (2, 6, 4)]) == 2
