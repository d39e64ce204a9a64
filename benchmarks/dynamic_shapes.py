"""Automatic dynamic shapes, ember vs torch.compile: recompiles, the dynamic recompile's time, and
the dynamic graph's steady state against a static graph of the same size.

    python -m benchmarks.dynamic_shapes [--models nanogpt,mlp] [--backends aot_eager,inductor]

Per (model, backend, compiler), in a fresh process (Inductor caches off, 1 torch thread):

* a train step (forward, loss, backward) at batch 4 (the static compile), then at batch 5: the
  recompile that makes the batch dimension symbolic; ``dyn_compile_s`` is that first call at
  batch 5 minus an eager step. Then batches 6 and 7: ``recomp`` counts the graphs compiled after
  the first (target: 1, as torch's automatic dynamic).
  ``static_compile_s`` is the first call at batch 4 likewise (ember's first symbolic compile
  pays the one-time import of sympy and the ShapeEnv, which torch pays at its first compile:
  the sum of both is the time a user waits).
* ``dyn_ms``: median step at batch 6 on the dynamic graph; ``static_ms``: the same step on a graph
  compiled with ``dynamic=False`` at batch 6 (its own process state, after a reset). Target:
  ``dyn_ms / static_ms`` <= 1.05, and ember's ``dyn_compile_s`` <= 0.5x torch's.
* ``ok``: outputs and gradients of every step match eager.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import time

import torch


def _row(model: str, backend: str, compiler: str, iters: int) -> dict:
    os.environ.setdefault("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")
    torch.set_num_threads(1)
    import importlib
    importlib.import_module("torch._dynamo")  # (imported by both compilers: kept out of the timings)
    from benchmarks.compilers import get_compiler
    from benchmarks.measure import _grads, _max_diff, _median_ms, _tensors
    from benchmarks.zoo import get_model
    spec = get_model(model)
    ref = spec.make_model()
    mine = copy.deepcopy(ref)
    comp = get_compiler(compiler)
    tol = 10.0 if backend == "inductor" else 1.0

    def step(m, fwd, inputs):
        m.zero_grad(set_to_none=True)
        return spec.fwd_bwd(fwd, inputs)

    def agrees(inputs, fwd) -> bool:
        el, eo = step(ref, ref, inputs)
        cl, co = step(mine, fwd, inputs)
        d_out, s_out = _max_diff(_tensors(eo) + [el], _tensors(co) + [cl])
        d_grad, s_grad = _max_diff(_grads(ref), _grads(mine))
        return d_out <= tol * (spec.atol + spec.rtol * s_out) and d_grad <= tol * (spec.atol + spec.rtol * s_grad)

    row = {"model": model, "backend": backend, "compiler": compiler, "ok": True}
    inputs4 = spec.make_inputs(4)
    eager4_ms = _median_ms(lambda: step(ref, ref, inputs4), 5)
    comp.reset()
    t = time.perf_counter()
    fwd = comp.compile(mine, backend=backend)
    row["ok"] &= agrees(inputs4, fwd)
    row["static_compile_s"] = round(max(time.perf_counter() - t - 2 * eager4_ms / 1e3, 0.0), 3)
    graphs_static = comp.counts()["graphs"]
    inputs5 = spec.make_inputs(5)
    eager_ms = _median_ms(lambda: step(ref, ref, inputs5), 5)
    t = time.perf_counter()
    row["ok"] &= agrees(inputs5, fwd)
    row["dyn_compile_s"] = round(max(time.perf_counter() - t - 2 * eager_ms / 1e3, 0.0), 3)
    for b in (6, 7):
        row["ok"] &= agrees(spec.make_inputs(b), fwd)
    row["recomp"] = comp.counts()["graphs"] - graphs_static
    inputs6 = spec.make_inputs(6)
    row["dyn_ms"] = round(_median_ms(lambda: step(mine, fwd, inputs6), iters), 3)

    comp.reset()
    static = copy.deepcopy(ref)
    sfwd = comp.compile(static, backend=backend, dynamic=False)
    step(static, sfwd, inputs6)
    row["static_ms"] = round(_median_ms(lambda: step(static, sfwd, inputs6), iters), 3)
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="nanogpt,mlp")
    p.add_argument("--backends", default="aot_eager,inductor")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--row", help=argparse.SUPPRESS)  # model,backend,compiler: one row, as JSON
    a = p.parse_args()
    if a.row:
        model, backend, compiler = a.row.split(",")
        print(json.dumps(_row(model, backend, compiler, a.iters)))
        return
    print(f"{'model':<9} {'backend':<10} | {'recomp e/t':>10} | {'dyn compile s  e / t   e/t':>27} | "
          f"{'static+dyn s  e / t   e/t':>26} | "
          f"{'dyn/static step  ember  torch':>30} | ok e/t")
    for model in a.models.split(","):
        for backend in a.backends.split(","):
            rows = {}
            for compiler in ("ember", "torch"):
                out = subprocess.run([sys.executable, "-m", "benchmarks.dynamic_shapes", "--row",
                                      f"{model},{backend},{compiler}", "--iters", str(a.iters)],
                                     capture_output=True, text=True)
                try:
                    rows[compiler] = json.loads(out.stdout.strip().splitlines()[-1])
                except (IndexError, json.JSONDecodeError):
                    rows[compiler] = {"error": (out.stderr.strip().splitlines() or ["?"])[-1][:120]}
            e, t = rows["ember"], rows["torch"]
            if "error" in e or "error" in t:
                print(f"{model:<9} {backend:<10} | error: {e.get('error') or t.get('error')}")
                continue
            se, st = e["static_compile_s"] + e["dyn_compile_s"], t["static_compile_s"] + t["dyn_compile_s"]
            print(f"{model:<9} {backend:<10} | {e['recomp']:>4} {t['recomp']:>5} | "
                  f"{e['dyn_compile_s']:>9} {t['dyn_compile_s']:>7} {e['dyn_compile_s'] / max(t['dyn_compile_s'], 1e-9):>6.2f} | "
                  f"{se:>9.3f} {st:>7.3f} {se / max(st, 1e-9):>6.2f} | "
                  f"{e['dyn_ms'] / e['static_ms']:>22.2f} {t['dyn_ms'] / t['static_ms']:>6.2f} | "
                  f"{'y' if e['ok'] else 'N'}/{'y' if t['ok'] else 'N'}")


if __name__ == "__main__":
    main()
