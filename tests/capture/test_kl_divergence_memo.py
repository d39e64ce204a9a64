"""``kl_divergence`` traced without its memo (capture/polyfills/torch_utils.py): the first call
used to write the memo its guard read, so the second call recompiled (2 graphs; torch.compile
2.13: 1 graph, no recompile)."""
import pytest
import torch
from torch.distributions import Categorical, Normal, kl
from torch.distributions.kl import kl_divergence

import ember
from ember_test_helpers import CompileCounter, assert_same


def normal_kl(x):
    return kl_divergence(Normal(x, torch.ones(3)), Normal(torch.zeros(3), torch.ones(3))).sum()


def categorical_kl(x):
    return kl_divergence(Categorical(logits=x), Categorical(logits=torch.zeros(3)))


@pytest.mark.parametrize("fn", [normal_kl, categorical_kl])
def test_no_recompile_after_the_first_call(fn):
    kl._KL_MEMOIZE.clear()  # (as in a fresh process: the first call would fill it)
    cnt = CompileCounter()
    compiled = ember.compile(fn, backend=cnt)
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        assert_same(compiled(x), fn(x))
        kl._KL_MEMOIZE.clear()
    for _ in range(2):  # (and with the memo filled by eager calls)
        x = torch.randn(3, requires_grad=True)
        assert_same(compiled(x), fn(x))
    assert cnt.frame_count == 1
    assert ember.stats()["recompiles"] == 0


def test_unregistered_pair_raises_as_eager():
    def fn(x):
        return kl_divergence(Categorical(logits=x), Normal(x, torch.ones(3)))
    x = torch.randn(3)
    with pytest.raises(NotImplementedError, match="No KL"):
        fn(x)
    with pytest.raises(NotImplementedError, match="No KL"):
        ember.compile(fn, backend="eager")(x)


def test_a_new_registration_is_seen():
    class MyNormal(Normal):
        pass

    def fn(x):
        return kl_divergence(MyNormal(x, torch.ones(3)), Normal(torch.zeros(3), torch.ones(3)))
    compiled = ember.compile(fn, backend="eager")
    x = torch.randn(3)
    assert_same(compiled(x), fn(x))  # (Normal's: MyNormal is a Normal)
    try:
        @kl.register_kl(MyNormal, Normal)
        def _kl_mine(p, q):
            return torch.full_like(p.loc, 7.0)
        assert_same(compiled(x), torch.full((3,), 7.0))
    finally:
        kl._KL_REGISTRY.pop((MyNormal, Normal), None)
        kl._KL_MEMOIZE.clear()
