"""ember.fake: one fake per real tensor, storage sharing kept, no ShapeEnv for static tracing."""

import torch

from ember.fake.convert import FakeContext, is_fake


def test_same_real_tensor_gives_same_fake():
    ctx = FakeContext()
    x = torch.randn(3, 4)
    a, b = ctx.fake(x), ctx.fake(x)
    assert a is b and is_fake(a)
    assert a.shape == x.shape and a.stride() == x.stride() and a.dtype == x.dtype


def test_views_of_one_storage_share_a_fake_storage():
    ctx = FakeContext()
    base = torch.randn(4, 4)
    v1, v2 = ctx.fake(base[0]), ctx.fake(base.t())
    assert v1.untyped_storage()._cdata == v2.untyped_storage()._cdata
    assert ctx.fake(torch.randn(4)).untyped_storage()._cdata != v1.untyped_storage()._cdata


def test_leafness_and_requires_grad_survive_conversion():
    ctx = FakeContext()
    p = torch.nn.Parameter(torch.randn(2))
    inter = p * 2
    fp, fi = ctx.fake(p), ctx.fake(inter)
    assert fp.requires_grad and fp.is_leaf
    assert fi.requires_grad and not fi.is_leaf


def test_static_tracing_makes_no_shape_env():
    ctx = FakeContext()
    assert ctx.shape_env is None
    with ctx.enabled():
        out = ctx.fake(torch.randn(2, 3)) @ ctx.fake(torch.randn(3, 5))
    assert tuple(out.shape) == (2, 5) and isinstance(out.shape[0], int)
