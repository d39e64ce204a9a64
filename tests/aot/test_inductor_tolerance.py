"""The Inductor comparison itself (tests/inductor_tolerance.py) passes rounding and catches real errors."""
import pytest
import torch

from inductor_tolerance import assert_close_inductor


def test_rounding_level_difference_passes():
    x = torch.randn(64, 64, dtype=torch.float64)
    expected = x.float()
    actual = (expected + 2e-5)  # beyond assert_close's fp32 default, within Inductor's 1e-4
    assert_close_inductor(actual, expected)


def test_fp64_reference_arbitrates():
    torch.manual_seed(0)
    ref64 = torch.randn(1000, dtype=torch.float64) * 100
    expected = (ref64 + torch.randn(1000, dtype=torch.float64) * 1e-3).float()  # eager's own error
    actual = (ref64 + torch.randn(1000, dtype=torch.float64) * 1e-3).float()   # as far from fp64
    with pytest.raises(AssertionError):
        assert_close_inductor(actual, expected)  # too far apart for the plain tolerance
    assert_close_inductor(actual, expected, fp64=ref64)  # but no worse than eager vs fp64


def test_real_error_fails_even_with_fp64():
    ref64 = torch.randn(100, dtype=torch.float64)
    expected = ref64.float()
    actual = expected.clone()
    actual[3] += 0.01
    with pytest.raises(AssertionError):
        assert_close_inductor(actual, expected, fp64=ref64)


def test_dtype_and_shape_must_match():
    with pytest.raises(AssertionError):
        assert_close_inductor(torch.zeros(3), torch.zeros(3, dtype=torch.float64))
    with pytest.raises(AssertionError):
        assert_close_inductor(torch.zeros(3), torch.zeros(1, 3))
