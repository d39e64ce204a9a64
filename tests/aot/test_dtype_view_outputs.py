"""Outputs that are dtype-changing views (view_as_real, view_as_complex, .view(dtype)) of a
tensor the backward saves: the saved tensor is re-made as a view of the returned output
(ember/aot/runtime.py, ``restrided``) in its own dtype, so the backward reads the right values
and still sees in-place changes of the output (eager's version check); a lazy conjugate view
keeps its conj bit; an output that is a strided real piece of the saved complex tensor (``z.imag``)
is viewed whole first."""
import pytest
import torch

import ember

PROGRAMS = {
    "view_as_real_of_polar": (lambda r, th: torch.view_as_real(torch.polar(r, th)), True),
    "view_as_real_and_abs": (lambda r, th: (torch.view_as_real(torch.polar(r, th)), torch.polar(r, th).abs()), True),
    "view_as_complex_of_exp": (lambda r, th: torch.view_as_complex(torch.stack([r, th], -1).exp()), False),
    "view_as_real_of_complex_exp": (lambda r, th: torch.view_as_real(torch.complex(r, th).exp()), True),
    # the backward also saves z.conj(), a lazy conjugate view of z: re-made, it keeps its conj bit
    "view_as_real_and_conj_product": (lambda r, th: (torch.view_as_real(torch.polar(r, th)),
                                                     (torch.polar(r, th) * torch.polar(r, th).conj()).real), True),
    "view_as_real_and_angle_abs": (lambda r, th: (torch.view_as_real(z := torch.polar(r, th)), z.angle(), z.abs(),
                                                  (z * z.conj()).real), True),
    # the output is a strided float piece (z.imag, z.real) of the complex tensor abs saves: the saved
    # z is re-made from the whole storage (a dtype view of the piece itself fails)
    "imag_and_abs": (lambda r, th: ((z := torch.complex(r, th * 2)).abs(), z.imag), True),
    "real_and_abs": (lambda r, th: ((z := torch.complex(r, th * 2)).abs(), z.real), True),
    "conj_imag_and_abs": (lambda r, th: ((z := torch.complex(r, th * 2)).abs(), z.conj().imag), True),
}


def _grads(fn, backend):
    torch.manual_seed(0)
    r = torch.rand(3, requires_grad=True)
    th = torch.randn(3, requires_grad=True)
    if backend is not None:
        ember.reset()
        fn = ember.compile(fn, backend=backend)
    out = fn(r, th)
    outs = out if isinstance(out, tuple) else (out,)
    loss = 0
    for k, o in enumerate(outs):
        w = torch.arange(o.numel(), dtype=torch.float32).reshape(o.shape) + k + 1
        loss = loss + (torch.view_as_real(o) if o.is_complex() else o).mul(w if not o.is_complex() else w[..., None]).sum()
    loss.backward()
    return [o.detach() for o in outs], r.grad, th.grad


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("backend", ["aot_eager"])
def test_gradients_through_dtype_view_outputs(name, backend):
    fn, _ = PROGRAMS[name]
    ref = _grads(fn, None)
    got = _grads(fn, backend)
    for a, b in zip(ref[0], got[0]):
        torch.testing.assert_close(b, a)
    torch.testing.assert_close(got[1], ref[1])
    torch.testing.assert_close(got[2], ref[2])


def test_in_place_change_of_the_output_still_raises_in_backward():
    def f(r, th):
        return torch.view_as_real(torch.polar(r, th))

    def run(fn):
        r = torch.rand(3, requires_grad=True)
        out = fn(r, torch.randn(3))
        with torch.no_grad():
            out.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()

    run(f)
    run(ember.compile(f, backend="aot_eager"))


def test_in_place_change_of_an_imag_output_still_raises_in_backward():
    def f(r, th):
        z = torch.complex(r, th)
        return z.abs(), z.imag

    def run(fn):
        r = torch.rand(3, requires_grad=True)
        a, im = fn(r, torch.randn(3))
        with torch.no_grad():
            im.mul_(2)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            a.sum().backward()

    run(f)
    run(ember.compile(f, backend="aot_eager"))
