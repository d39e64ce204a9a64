"""One measurement: one zoo model, one compiler, one backend, one mode.

``python -m benchmarks.run`` starts this module in a fresh subprocess per row
(``python -m benchmarks.measure --model nanogpt --compiler ember ... --out row.json``);
``measure(...)`` can also be called in-process. It never raises: whatever goes
wrong becomes ``status="failed"`` with ``phase`` and ``reason``.

What is measured, in order (wall clock; on ``--device cuda`` every timed call ends with
``torch.cuda.synchronize()``, and ``peak_cuda_mb`` is the peak of allocated GPU memory):

1. two identical copies of the model (same seed); the eager copy runs the step
   once (reference outputs, loss, grads, buffers), then ``warmup`` + a few
   more times (the median is used for ``compile_s``).
2. the other copy is compiled; ``compile_s`` = time of ``compile()`` plus the
   first compiled call, minus one eager call (median). ``torch._dynamo`` (which
   ember's ShapeEnv imports too) is imported before anything is timed;
   ``dynamo_import_s`` records how long that took. Its loss/outputs/grads/buffers are compared
   with the eager reference: ``max_diff_out``, ``max_diff_grad``.
3. ``warmup`` more compiled calls, then ``iters`` compiled and ``iters`` eager
   calls timed in alternating rounds: ``step_ms`` and ``eager_ms`` (medians),
   ``speedup`` = eager_ms / step_ms. ``graphs`` and ``graph_breaks`` are read now.
4. the batch size takes two more values; ``recompiles`` = graphs compiled for them.
5. ``peak_rss_mb`` = the process's peak resident set size.
"""
from __future__ import annotations

import argparse
import importlib
import copy
import json
import os
import resource
import statistics
import sys
import time
import warnings
from typing import Any

import torch

from benchmarks.compilers import get_compiler, short_error


def _tensors(obj) -> list[torch.Tensor]:
    """Every tensor in a (nested) output: tuples, lists, dicts, HF ModelOutputs."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):  # includes transformers' ModelOutput
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return []


def _max_diff(a: list[torch.Tensor], b: list[torch.Tensor]) -> tuple[float, float]:
    """(max abs diff, max |ref| over the same tensors); inf if structures differ."""
    if len(a) != len(b):
        return float("inf"), 0.0
    diff, scale = 0.0, 0.0
    for x, y in zip(a, b):
        if x.shape != y.shape:
            return float("inf"), 0.0
        if x.numel() == 0:
            continue
        x, y = x.detach().double(), y.detach().double()
        if x.dtype.is_floating_point:
            d = (x - y).abs()
            d = torch.where(torch.isnan(x) & torch.isnan(y), torch.zeros_like(d), d)
            diff = max(diff, float(d.max()))
            scale = max(scale, float(x.abs().max()))
        else:
            diff = max(diff, float((x != y).any()))
    return diff, scale


def _grads(model: torch.nn.Module) -> list[torch.Tensor]:
    return [p.grad if p.grad is not None else torch.zeros(0) for p in model.parameters()]


def _buffers(model: torch.nn.Module) -> list[torch.Tensor]:
    return [b for b in model.buffers()]


def _to(obj, device: str):
    """``obj`` with every tensor moved to ``device`` (dicts, lists, tuples)."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to(v, device) for v in obj)
    return obj


def _synced(fn, device: str):
    """``fn`` followed by a device synchronize, so that wall-clock time covers its kernels."""
    if not device.startswith("cuda"):
        return fn

    def run(*args):
        out = fn(*args)
        torch.cuda.synchronize()
        return out
    return run


def _median_ms(fn, iters: int) -> float:
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _interleaved_ms(fa, fb, iters: int, rounds: int = 5) -> tuple[float, float]:
    """Median ms per call of ``fa`` and of ``fb``, timed in alternating rounds.

    Alternating means that a burst of load from elsewhere on a shared machine
    slows both sides instead of only one, so their ratio stays meaningful.
    """
    ta, tb = [], []
    per = max(1, iters // rounds)
    for _ in range(rounds):
        for fn, out in ((fa, ta), (fb, tb)):
            for _ in range(per):
                t = time.perf_counter()
                fn()
                out.append(time.perf_counter() - t)
    return statistics.median(ta) * 1e3, statistics.median(tb) * 1e3


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(*args, **kwargs) -> dict[str, Any]:
    """``_measure`` with the warnings that ember or torch issue recorded in ``row["warnings"]`` (the
    distinct messages, first 10): a backward that failed to compile and runs uncompiled, say, is a
    warning, and the subprocess's stderr is not kept."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        row = _measure(*args, **kwargs)
    seen: list[str] = []
    for w in caught:
        text = f"{w.category.__name__}: {w.message}"[:300]
        if text not in seen and not issubclass(w.category, DeprecationWarning):
            seen.append(text)
    if seen:
        row["warnings"] = seen[:10]
    return row


def _measure(model: str, compiler: str, backend: str = "eager", mode: str = "train",
            target: str = "model", batch_size: int | None = None, warmup: int = 3,
            iters: int = 20, recompile_batches: tuple[int, ...] | None = None,
            threads: int | None = 1, device: str = "cpu") -> dict[str, Any]:
    """Measure one row; never raises (see the module docstring).

    ``threads`` sets ``torch.set_num_threads`` (1 by default: on a small shared
    machine, multi-threaded kernels stall whenever another process takes a core).
    """
    row: dict[str, Any] = {"model": model, "compiler": compiler, "backend": backend,
                           "mode": mode, "target": target, "status": "ok"}
    if device != "cpu":
        row["device"] = device
    if threads:
        torch.set_num_threads(threads)
        row["threads"] = threads
    phase = "setup"
    try:
        # Imported up front for both compilers (torch.compile imports it, and so
        # does ember through ShapeEnv; transformers imports it too), so that
        # compile_s measures compiling rather than a one-time import.
        t = time.perf_counter()
        importlib.import_module("torch._dynamo")
        row["dynamo_import_s"] = round(time.perf_counter() - t, 3)
        from benchmarks.zoo import get_model
        torch.manual_seed(0)
        spec = get_model(model)
        bs = batch_size or spec.batch_size
        row["batch_size"] = bs
        train = mode == "train"
        if mode not in ("train", "infer"):
            raise ValueError(f"mode must be train or infer, got {mode!r}")

        ref_model = spec.make_model().to(device)
        cmp_model = copy.deepcopy(ref_model)
        ref_model.train(train)
        cmp_model.train(train)
        inputs = _to(spec.make_inputs(bs), device)
        if device.startswith("cuda"):
            row["gpu"] = torch.cuda.get_device_name()

        def step_(m, fwd_model, inp):
            """One step of ``m`` (whose grads we read) calling ``fwd_model``."""
            if train:
                m.zero_grad(set_to_none=True)
                return spec.fwd_bwd(fwd_model, inp)
            out = spec.infer_step(fwd_model, inp)
            return None, out
        step = _synced(step_, device)

        # 1. eager reference and eager timing
        phase = "eager"
        ref_loss, ref_out = step(ref_model, ref_model, inputs)
        ref = {"out": _tensors(ref_out) + ([ref_loss] if ref_loss is not None else []),
               "grads": [g.clone() for g in _grads(ref_model)] if train else [],
               "buffers": [b.clone() for b in _buffers(ref_model)]}
        for _ in range(warmup):
            step(ref_model, ref_model, inputs)
        eager_ms = _median_ms(lambda: step(ref_model, ref_model, inputs), max(5, iters // 2))
        row["eager_first_ms"] = round(eager_ms, 4)

        # 2. compile + first call
        phase = "compile"
        comp = get_compiler(compiler)
        comp.reset()
        rss_before = _rss_mb()
        t = time.perf_counter()  # compile() included
        if target == "model":
            fwd = comp.compile(cmp_model, backend=backend)
            run = lambda inp: step(cmp_model, fwd, inp)  # noqa: E731 (synchronized)
        elif target == "step":
            def whole_step(inp):
                return step(cmp_model, cmp_model, inp)
            compiled_step = comp.compile(whole_step, backend=backend)
            run = _synced(compiled_step, device)
        else:
            raise ValueError(f"target must be model or step, got {target!r}")
        loss, out = run(inputs)
        first_s = time.perf_counter() - t
        row["first_call_s"] = round(first_s, 4)
        row["compile_s"] = round(max(first_s - eager_ms / 1e3, 0.0), 4)

        phase = "check"
        got_out = _tensors(out) + ([loss] if loss is not None else [])
        d_out, s_out = _max_diff(ref["out"], got_out)
        d_grad, s_grad = _max_diff(ref["grads"], _grads(cmp_model)) if train else (0.0, 0.0)
        d_buf, s_buf = _max_diff(ref["buffers"], _buffers(cmp_model))
        row["max_diff_out"] = d_out
        row["max_diff_grad"] = d_grad
        row["max_diff_buffers"] = d_buf
        tol_scale = 10.0 if backend == "inductor" else 1.0
        row["correct"] = bool(
            d_out <= tol_scale * (spec.atol + spec.rtol * s_out)
            and d_grad <= tol_scale * (spec.atol + spec.rtol * s_grad)
            and d_buf <= tol_scale * (spec.atol + spec.rtol * s_buf))

        # 3. steady state
        phase = "steady"
        for _ in range(warmup):
            run(inputs)
        eager_ms, step_ms = _interleaved_ms(lambda: step(ref_model, ref_model, inputs),
                                            lambda: run(inputs), iters)
        row["eager_ms"] = round(eager_ms, 4)
        row["step_ms"] = round(step_ms, 4)
        row["speedup"] = round(eager_ms / step_ms, 4) if step_ms > 0 else None
        counts = comp.counts()
        row["graphs"] = counts["graphs"]
        row["graph_breaks"] = counts["graph_breaks"]
        row["frames"] = counts["frames"]
        reasons = comp.graph_break_reasons()
        if reasons:
            row["graph_break_reasons"] = reasons[:10]

        # 4. recompiles as the batch size changes
        phase = "recompile"
        for b in recompile_batches or (bs + 2, bs + 4):
            run(_to(spec.make_inputs(b), device))
        row["recompiles"] = comp.counts()["graphs"] - counts["graphs"]

        row["rss_before_compile_mb"] = round(rss_before, 1)
        row["peak_rss_mb"] = round(_rss_mb(), 1)
        if device.startswith("cuda"):
            row["peak_cuda_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        extra = comp.extra()
        if extra:
            row["extra"] = extra
        fallbacks = comp.fallback_reasons()
        if fallbacks:
            row["fallback_reasons"] = fallbacks
            row["note"] = "ran eagerly: " + "; ".join(fallbacks)[:300]
        if counts["graphs"] == 0:  # nothing compiled: the timings are eager's
            row["status"] = "fallback"
            row["phase"] = "compile"
            row["reason"] = row.get("note") or "no graph was compiled" + (
                "; graph breaks: " + "; ".join(reasons[:3]) if reasons else "")
    except BaseException as e:  # noqa: BLE001 - a failed row, never a crash
        if isinstance(e, KeyboardInterrupt):
            raise
        row["status"] = "failed"
        row["phase"] = phase
        row["reason"] = short_error(e)
        row["peak_rss_mb"] = round(_rss_mb(), 1)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--compiler", required=True, choices=["ember", "torch"])
    p.add_argument("--backend", default="eager")
    p.add_argument("--mode", default="train", choices=["train", "infer"])
    p.add_argument("--target", default="model", choices=["model", "step"])
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--out", default=None, help="write the row as JSON here (else stdout)")
    a = p.parse_args(argv)
    t = time.perf_counter()
    row = measure(a.model, a.compiler, a.backend, a.mode, a.target, a.batch_size,
                  a.warmup, a.iters, threads=a.threads, device=a.device)
    row["wall_s"] = round(time.perf_counter() - t, 2)
    row["pid"] = os.getpid()
    text = json.dumps(row)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
