"""An op whose schema hides an input write, and a Python kernel (``py_impl``) on the Autograd key
that turns it into ops that declare the write: CUDA's ``cudnn_batch_norm`` is one (its Python
kernel calls ``native_batch_norm`` and then ``_native_batch_norm_legit``, which writes the running
statistics). The AOT layer's metadata pass must see the write as the trace does: before, it ran
without the Python dispatcher, found no write, and the new running statistics the trace computed
were dropped (BatchNorm's buffers never updated on CUDA with aot_eager and inductor). The op here
is a CPU stand-in with the same shape: a kernel writing ``stats`` behind its schema's back."""
from __future__ import annotations

import pytest
import torch
from torch._C import DispatchKey

from ember_test_helpers import assert_same, compile

_lib = torch.library.Library("ember_pyimpl_test", "DEF")
_lib.define("bn_like(Tensor x, Tensor stats) -> Tensor")


def _kernel(x, stats):
    stats.add_(x.detach().mean(0))  # a write the schema does not declare
    return x * 2


_lib.impl("bn_like", _kernel, "CPU")
_lib.impl("bn_like", lambda x, stats: torch.empty_like(x), "Meta")


@torch.ops.ember_pyimpl_test.bn_like.default.py_impl(DispatchKey.Autograd)
def _declared(x, stats):
    with torch.no_grad():
        stats.add_(x.detach().mean(0))
    return x * 2


def f(x, stats):
    return torch.ops.ember_pyimpl_test.bn_like(x, stats) + 1


@pytest.mark.parametrize("backend", ["aot_eager", "eager"])
@pytest.mark.parametrize("requires_grad", [True, False])
def test_write_of_python_kernel_reaches_the_input(backend, requires_grad):
    cf = compile(f, backend=backend)
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=requires_grad)
    s_eager, s_comp = torch.zeros(3), torch.zeros(3)
    for _ in range(2):  # the second call runs the cached graph
        out_e, out_c = f(x, s_eager), cf(x, s_comp)
        assert_same(out_c, out_e)
        assert_same(s_comp, s_eager, "stats written by the op")
    assert s_comp.abs().sum() > 0
    if requires_grad:
        g_e, = torch.autograd.grad(f(x, torch.zeros(3)).sum(), x)
        g_c, = torch.autograd.grad(cf(x, torch.zeros(3)).sum(), x)
        assert_same(g_c, g_e)


def test_batchnorm_running_stats_aot_cpu_unchanged_behaviour():
    # the CPU path (no Python kernel involved) keeps updating the running statistics
    torch.manual_seed(0)
    ref = torch.nn.BatchNorm1d(3)
    mod = torch.nn.BatchNorm1d(3)
    cmod = compile(mod, backend="aot_eager")
    x = torch.randn(8, 3, requires_grad=True)
    assert_same(cmod(x), ref(x))
    assert_same(mod.running_mean, ref.running_mean)
    assert_same(mod.running_var, ref.running_var)
    assert_same(mod.num_batches_tracked, ref.num_batches_tracked)
