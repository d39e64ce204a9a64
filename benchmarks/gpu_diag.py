"""Per-tensor differences and a per-step profile of one zoo model, ember vs torch.compile.

    python -m benchmarks.gpu_diag --model resnet --device cuda --what diff
    python -m benchmarks.gpu_diag --model bert --device cuda --what profile

``diff``: one train step of fresh copies of the model, eagerly twice (the noise floor: cuDNN's
backward kernels are not deterministic) and through each compiler/backend in ``--configs``; prints
the largest differences against the first eager run by name (output, loss, each gradient, each
buffer), absolute and relative to the largest reference magnitude of that tensor. With
``--no-tf32`` TF32 is off for matmuls and convolutions in every run.

``profile``: after warm-up, the step time of eager and of each compiled config, forward and
backward timed apart, the kernels launched and host synchronizations per step (CUDA only: torch's
sync debug mode counts them), and the top host-side ops of one step by self CPU time.

This is a diagnostic for the GPU machine (issue 13's open rows in docs/benchmarks.md); it prints,
asserts nothing, and never raises past one config (a failed config prints its error).
"""
from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
import traceback
import warnings

import torch

from benchmarks.compilers import get_compiler
from benchmarks.measure import _tensors, _to


def _compile(kind: str, model):
    compiler, backend = kind.split(":")
    c = get_compiler(compiler)
    c.reset()
    return c.compile(model, backend=backend)


def _named_results(spec, model, fwd, inputs):
    model.zero_grad(set_to_none=True)
    loss, out = spec.fwd_bwd(fwd, inputs)
    res = {f"out[{i}]": t for i, t in enumerate(_tensors(out))}
    res["loss"] = loss
    for n, p in model.named_parameters():
        if p.grad is not None:
            res["grad:" + n] = p.grad
    for n, b in model.named_buffers():
        res["buf:" + n] = b
    return {k: v.detach().clone() for k, v in res.items()}


def _compare(ref, got):
    rows = []
    for k, r in ref.items():
        g = got.get(k)
        if g is None or g.shape != r.shape:
            rows.append((float("inf"), float("inf"), k, "missing or shape differs"))
            continue
        if not r.dtype.is_floating_point or r.numel() == 0:
            if not torch.equal(r, g):
                rows.append((float("inf"), float("inf"), k, "values differ"))
            continue
        d = float((r.double() - g.double()).abs().max())
        s = float(r.double().abs().max())
        rows.append((d / s if s else d, d, k, f"max|ref| {s:.3g}"))
    rows.sort(reverse=True)
    return rows


def diff(spec, configs, device, batch):
    torch.manual_seed(0)
    base = spec.make_model().to(device).train()
    inputs = _to(spec.make_inputs(batch), device)
    ref = _named_results(spec, m := copy.deepcopy(base), m, inputs)
    for kind in ["eager:again"] + configs:
        try:
            model = copy.deepcopy(base)
            fwd = model if kind == "eager:again" else _compile(kind, model)
            got = _named_results(spec, model, fwd, inputs)
            rows = _compare(ref, got)
            worst = rows[0] if rows else (0.0, 0.0, "-", "")
            print(f"\n== {kind}: worst rel {worst[0]:.3g} abs {worst[1]:.3g} ({worst[2]})")
            for rel, d, k, note in rows[:8]:
                print(f"   {rel:10.3g} {d:10.3g}  {k}  {note}")
        except Exception as e:  # noqa: BLE001 - one config's failure is printed, not raised
            print(f"\n== {kind}: FAILED {type(e).__name__}: {e}")
            traceback.print_exc(limit=6)


def _sync(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time(fn, device, iters):
    ts = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        _sync(device)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1e3


def profile(spec, configs, device, batch, iters, top):
    torch.manual_seed(0)
    base = spec.make_model().to(device).train()
    inputs = _to(spec.make_inputs(batch), device)
    for kind in ["eager:-"] + configs:
        try:
            model = copy.deepcopy(base)
            fwd = model if kind == "eager:-" else _compile(kind, model)

            def step():
                model.zero_grad(set_to_none=True)
                return spec.fwd_bwd(fwd, inputs)

            def fwd_only():
                model.zero_grad(set_to_none=True)
                out = spec.forward(fwd, inputs)
                return spec.loss(out, inputs)

            t0 = time.perf_counter()
            step()
            _sync(device)
            first = time.perf_counter() - t0
            for _ in range(5):
                step()
            step_ms = _time(step, device, iters)
            fwd_ms = _time(fwd_only, device, iters)
            syncs = -1
            if device.startswith("cuda"):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    torch.cuda.set_sync_debug_mode("warn")
                    try:
                        step()
                    finally:
                        torch.cuda.set_sync_debug_mode(0)
                syncs = sum("synchroniz" in str(w.message) for w in caught)
                sync_msgs = sorted({str(w.message)[:120] for w in caught
                                    if "synchroniz" in str(w.message)})
            acts = [torch.profiler.ProfilerActivity.CPU]
            if device.startswith("cuda"):
                acts.append(torch.profiler.ProfilerActivity.CUDA)
            with torch.profiler.profile(activities=acts) as prof:
                step()
                _sync(device)
            ev = prof.key_averages()
            kernels = sum(e.count for e in ev if e.device_type.name == "CUDA")
            print(f"\n== {kind}: first call {first:.2f} s, step {step_ms:.3f} ms, forward+loss "
                  f"{fwd_ms:.3f} ms, backward ~{step_ms - fwd_ms:.3f} ms, device kernels/step "
                  f"{kernels}, host syncs/step {syncs}")
            if syncs > 0:
                for m in sync_msgs[:5]:
                    print("   sync:", m)
            print(ev.table(sort_by="self_cpu_time_total", row_limit=top, max_name_column_width=60))
        except Exception as e:  # noqa: BLE001
            print(f"\n== {kind}: FAILED {type(e).__name__}: {e}")
            traceback.print_exc(limit=6)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--what", default="diff", choices=["diff", "profile"])
    p.add_argument("--configs", default="ember:aot_eager,ember:inductor,torch:inductor",
                   help="compiler:backend, comma-separated")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--no-tf32", action="store_true")
    a = p.parse_args(argv)
    if a.no_tf32:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    from benchmarks.zoo import get_model
    spec = get_model(a.model)
    configs = [c for c in a.configs.split(",") if c]
    print(f"# {a.model} {a.what} on {a.device}; torch {torch.__version__}; tf32 "
          f"matmul={torch.backends.cuda.matmul.allow_tf32} cudnn={torch.backends.cudnn.allow_tf32}")
    if a.what == "diff":
        diff(spec, configs, a.device, a.batch or spec.batch_size)
    else:
        profile(spec, configs, a.device, a.batch or spec.batch_size, a.iters, a.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
