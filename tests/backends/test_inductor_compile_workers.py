"""The inductor backend starts Inductor's kernel-compiling worker pool before it traces, as torch's
inductor backend does (a pool first asked for at the first kernel is not ready, and the kernels
then compile one by one: seconds of cold compile on a GPU model). On a machine without Triton,
Inductor itself decides to use no pool; the call is made either way, and its failure is harmless."""
from __future__ import annotations

import torch
import torch._inductor.async_compile as async_compile

from ember_test_helpers import compile


def _f(x):
    return (x.sin() + 1).sum()


def test_pool_warmed_before_the_graph_compiles(monkeypatch):
    import torch._inductor.compile_fx as compile_fx
    events = []
    monkeypatch.setattr(async_compile, "maybe_warm_pool", lambda: events.append("warm"))
    real = compile_fx.compile_fx_inner

    def inner(*args, **kwargs):
        events.append("compile")
        return real(*args, **kwargs)
    monkeypatch.setattr(compile_fx, "compile_fx_inner", inner)
    x = torch.randn(8)
    out = compile(_f, backend="inductor")(x)
    torch.testing.assert_close(out, _f(x))
    assert events and events[0] == "warm" and "compile" in events, events


def test_a_failing_warm_up_is_harmless(monkeypatch):
    def boom():
        raise OSError("no processes here")
    monkeypatch.setattr(async_compile, "maybe_warm_pool", boom)
    x = torch.randn(8)
    torch.testing.assert_close(compile(lambda t: t.cos() * 2, backend="inductor")(x), x.cos() * 2)
