"""How close Inductor's results must be to eager's: what Inductor promises, not bit equality.

Inductor reorders and fuses floating-point work (reductions especially), and its CPU
code differs by CPU (vector width, FMA), so its results differ from eager's by rounding:
a BatchNorm gradient on one machine is 1.2e-5 away from eager. Torch's own accuracy
checks for Inductor compare at a per-dtype tolerance (1e-4 for fp32), and when that
fails, against a float64 run of the same program: the compiled result passes if its
error from fp64 is no worse than a small multiple of eager's own error from fp64.
This module does the same; every Inductor comparison in the tests goes through it.

    assert_close_inductor(compiled, eager, fp64=eager_in_float64, what="grad of w")
"""
from __future__ import annotations

import torch

#: (rtol, atol) per dtype
TOLERANCES = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 1e-2),
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
}
#: compiled error vs fp64 may be this multiple of eager's error vs fp64 (plus tol / 10)
ERROR_MULTIPLIER = 2.0


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, (0.0, 0.0))  # integers and bools: exact


def _rmse(a: torch.Tensor, b: torch.Tensor) -> float:
    return torch.sqrt(torch.mean(torch.square(a.double() - b.double()))).item() if a.numel() else 0.0


def assert_close_inductor(actual: torch.Tensor, expected: torch.Tensor, fp64: torch.Tensor | None = None,
                          what: str = "") -> None:
    """``actual`` (Inductor) agrees with ``expected`` (eager) as far as Inductor promises."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (
        what, actual.shape, expected.shape, actual.dtype, expected.dtype)
    rtol, atol = tolerance(expected.dtype)
    actual, expected = actual.detach(), expected.detach()
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True)
        return
    except AssertionError as e:
        if fp64 is None or not expected.is_floating_point():
            raise AssertionError(f"{what}: {e}") from None
        first = e
    res_error = _rmse(fp64, actual)
    ref_error = _rmse(fp64, expected)
    assert res_error <= ERROR_MULTIPLIER * ref_error + atol / 10, (
        f"{what}: compiled error vs fp64 {res_error:.3g} > {ERROR_MULTIPLIER} x eager's {ref_error:.3g} "
        f"+ {atol / 10:.1g}\n{first}")


def to_float64(value):
    """A float64 copy of tensors (leaves keep requires_grad) for a reference run."""
    if isinstance(value, torch.Tensor):
        t = value.detach().clone().to(torch.float64) if value.is_floating_point() else value.detach().clone()
        return t.requires_grad_(value.requires_grad) if t.is_floating_point() else t
    if isinstance(value, (list, tuple)):
        return type(value)(to_float64(v) for v in value)
    return value
