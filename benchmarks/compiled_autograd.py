"""Compiled autograd: backward time, graph count and backward compile time, ember vs torch.

    python -m benchmarks.compiled_autograd [--models mlp,nanogpt] [--backends aot_eager,inductor]
                                           [--forward eager,compiled] [--iters 15]

For every model × backend × forward mode, in one process, three variants of the same train step
(copies of one model, same seed):

* ``eager``: the autograd engine (the reference for gradients)
* ``ember``: ``ember.compiled_autograd.enable(backend)``, forward ``ember.compile(model, backend)``
  when ``--forward compiled``
* ``torch``: ``torch._dynamo.compiled_autograd.enable(torch.compile(backend=backend))``, forward
  ``torch.compile(model, backend=backend)`` when compiled

Measured: ``first_ms`` (the first backward: tracing + compiling the backward graph), ``bwd_ms``
(median and min of ``--iters`` backwards, variants interleaved round by round, forward not
timed), ``compile_s`` = first - min, ``graphs`` (backward graphs compiled: ember's
``counters.traced``, torch's ``counters["compiled_autograd"]["captures"]``) and the largest
gradient difference from eager. CPU, wall clock, ``--threads 1`` by default; on a shared machine
the min is the steadier number.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import statistics
import time

import torch
import torch.nn as nn

import ember


def make_mlp():
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(256, 256), nn.GELU())], nn.Linear(256, 10))
    x = torch.randn(64, 256)

    def step(m):
        return m(x).logsumexp(-1).mean()
    return model, step


def make_nanogpt():
    from ember.report import demo_model
    cfg = demo_model.GPTConfig()
    model = demo_model.make_model(cfg)
    idx, targets = demo_model.make_batch(cfg, batch_size=4)

    def step(m):
        return m(idx, targets)[1]
    return model, step


MODELS = {"mlp": make_mlp, "nanogpt": make_nanogpt}


class Variant:
    def __init__(self, name, model, forward, backward_ctx, graphs):
        self.name, self.model, self.forward = name, model, forward
        self.backward_ctx, self.graphs = backward_ctx, graphs
        self.times: list = []
        self.first_ms = None

    def run(self, step) -> float:
        self.model.zero_grad(set_to_none=True)
        with self.backward_ctx():
            loss = step(self.forward)
            t0 = time.perf_counter()
            loss.backward()
            return (time.perf_counter() - t0) * 1e3


def _torch_ca(backend):
    from torch._dynamo import compiled_autograd
    compiler = torch.compile(backend=backend)
    enable = getattr(compiled_autograd, "enable", None) or compiled_autograd._enable  # (2.13: _enable)
    return lambda: enable(compiler)


def _torch_captures() -> int:
    from torch._dynamo.utils import counters
    return int(counters["compiled_autograd"]["captures"])


def bench(model_name: str, backend: str, forward: str, iters: int) -> list[dict]:
    import torch._dynamo
    torch._dynamo.reset()
    ember.reset()
    ember.compiled_autograd.reset()
    base, step = MODELS[model_name]()
    models = {k: copy.deepcopy(base) for k in ("eager", "ember", "torch")}
    compiled = forward == "compiled"
    variants = [
        Variant("eager", models["eager"], models["eager"], contextlib.nullcontext, lambda: 0),
        Variant("ember", models["ember"],
                ember.compile(models["ember"], backend=backend) if compiled else models["ember"],
                lambda: ember.compiled_autograd.enable(backend), lambda: ember.compiled_autograd.counters.traced),
        Variant("torch", models["torch"],
                torch.compile(models["torch"], backend=backend) if compiled else models["torch"],
                _torch_ca(backend), _torch_captures),
    ]
    if compiled:  # forward compiles are not the backward's: do them first, untimed
        for v in variants:
            with torch.no_grad():
                step(v.forward)
    for v in variants:
        v.first_ms = v.run(step)
    grads = {v.name: [p.grad.clone() for p in v.model.parameters()] for v in variants}
    for _ in range(iters):
        for v in variants:
            v.times.append(v.run(step))
    rows = []
    for v in variants:
        med = statistics.median(v.times)
        diff = max(float((a - b).abs().max()) for a, b in zip(grads[v.name], grads["eager"]))
        rows.append(dict(model=model_name, backend=backend, forward=forward, variant=v.name,
                         bwd_ms=med, min_ms=min(v.times), first_ms=v.first_ms,
                         compile_s=(v.first_ms - min(v.times)) / 1e3,
                         graphs=v.graphs(), max_grad_diff=diff))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mlp,nanogpt")
    p.add_argument("--backends", default="aot_eager,inductor")
    p.add_argument("--forward", default="eager,compiled")
    p.add_argument("--iters", type=int, default=15)
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads (1: steadier timings on a shared machine)")
    a = p.parse_args(argv)
    import torch._dynamo  # noqa: F401  (imported before anything is timed, as benchmarks.measure does)
    torch.set_num_threads(a.threads)
    print("| model | backend | forward | variant | backward ms (median) | (min) | first backward ms | "
          "backward compile s | backward graphs | max grad diff |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in a.models.split(","):
        for b in a.backends.split(","):
            for f in a.forward.split(","):
                for r in bench(m, b, f, a.iters):
                    print(f"| {r['model']} | {r['backend']} | {r['forward']} | {r['variant']} | {r['bwd_ms']:.2f} | {r['min_ms']:.2f} | "
                          f"{r['first_ms']:.1f} | {r['compile_s']:.2f} | {r['graphs']} | {r['max_grad_diff']:.1e} |",
                          flush=True)


if __name__ == "__main__":
    main()
