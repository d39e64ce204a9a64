"""``Tensor.random_(from, to)`` under an AOT backend (ember/aot/keyword_ops.py): fx cannot write the
name of ``aten.random.from``, so the trace records it as eager computes it; the values drawn, the
mutated input and the RNG state after the call are eager's, with no fallback to eager."""
import pytest
import torch

import ember

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int8, torch.uint8, torch.bool]
BOUNDS = [(0, 2), (0, 1), (1, None), (0, None), (2, 9), (-3, 7), (-100, 100)]


def _fits(dtype, bounds):
    """Bounds eager accepts for ``dtype`` without an error or a warning."""
    if dtype == torch.bool:
        return bounds[0] >= 0 and (bounds[1] is None or bounds[1] <= 2)
    if dtype == torch.uint8:
        return bounds[0] >= 0
    if dtype == torch.int64:
        return bounds[1] is not None  # no `to`: a range of 2**63 - from, a kernel ember leaves to eager
    return True


CASES = [(d, b) for d in DTYPES for b in BOUNDS if _fits(d, b)]


@pytest.mark.parametrize("dtype,bounds", CASES, ids=[f"{d}-{b}" for d, b in CASES])
def test_random_from_to_matches_eager(dtype, bounds):
    def f(x):
        fresh = torch.empty(3, 4, dtype=dtype).t().random_(*bounds)   # a transposed intermediate
        x[:, ::2].random_(*bounds)                                    # a strided view of an input
        return fresh, x + 0

    x_ref, x_got = torch.zeros(4, 6, dtype=dtype), torch.zeros(4, 6, dtype=dtype)
    torch.manual_seed(0)
    ref = f(x_ref)
    state_ref = torch.get_rng_state()
    ember.reset()
    torch.manual_seed(0)
    with ember.config.patch(strict=True):
        got = ember.compile(f, backend="aot_eager")(x_got)
    assert torch.equal(torch.get_rng_state(), state_ref)
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.stride() == g.stride()
        assert torch.equal(r, g)
    assert torch.equal(x_ref, x_got)
    assert ember.stats()["fallbacks"] == 0


def test_random_from_with_generator():
    def f(x, gen):
        x.random_(3, 9, generator=gen)
        return x * 2

    a, b = torch.zeros(5), torch.zeros(5)
    ref = f(a, torch.Generator().manual_seed(1))
    ember.reset()
    with ember.config.patch(strict=True):
        got = ember.compile(f, backend="aot_eager")(b, torch.Generator().manual_seed(1))
    assert torch.equal(ref, got) and torch.equal(a, b)


@pytest.mark.parametrize("dtype,bounds", [(torch.uint8, (-3, 7)), (torch.bool, (2, 3)), (torch.int8, (0, 300))])
def test_random_from_out_of_range_raises_as_eager(dtype, bounds):
    """Bounds the dtype cannot hold: eager's RuntimeError (the decomposition declines: the frame
    runs eagerly, as it did before ember named the op)."""
    def f(x):
        return x.clone().random_(*bounds)

    x = torch.zeros(4, dtype=dtype)
    with pytest.raises(RuntimeError) as ref:
        f(x)
    ember.reset()
    with ember.config.patch(strict=False), pytest.warns(UserWarning, match="running it eagerly"):
        with pytest.raises(RuntimeError) as got:
            ember.compile(f, backend="aot_eager")(x)
    assert str(got.value) == str(ref.value)


def test_random_from_large_float_bounds_as_eager():
    """Bounds past float32's exact integers: eager moves them (and warns); the decomposition
    declines and the frame runs eagerly."""
    def f(x):
        return x.clone().random_(1, 2 ** 30)

    torch.manual_seed(0)
    with pytest.warns(UserWarning):
        ref = f(torch.zeros(6))
    ember.reset()
    torch.manual_seed(0)
    with ember.config.patch(strict=False), pytest.warns(UserWarning):
        got = ember.compile(f, backend="aot_eager")(torch.zeros(6))
    assert torch.equal(ref, got)
