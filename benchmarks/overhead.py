"""Per-call overhead of a compiled callable: ember vs ``torch.compile(backend="eager")``.

    python -m benchmarks.overhead [--calls 2000 --repeats 15 --json out.json]

overhead = (time of one call of the compiled callable)
         - (time of calling the graph(s) the backend returned, directly)

i.e. what the compiler adds around the graph: guard checks, the cache lookup,
argument gathering (parameters, inputs), output handling. The backend is a
recording one that runs the graph as is (like ``eager``) and keeps the callable
it returned, so the graph alone can be timed with the same inputs. Both
compilers are timed in one process, in alternating rounds (median of repeats),
so load from elsewhere on the machine hits both alike. Target: ember ≤ 1.0×.

Cases: a tiny MLP (Linear(8,8)-ReLU-Linear(8,8), batch 2) and a 3-op function
``(x + 1) * 2 - y``; with ``--grad`` the MLP runs with autograd on, by default
both run under ``torch.no_grad()`` (inference, where overhead matters most).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any, Callable

import torch

from benchmarks.compilers import get_compiler, recording_backend, short_error


def three_ops(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x + 1) * 2 - y


def make_cases() -> dict[str, tuple[Callable[[], Any], tuple]]:
    """name -> (make the thing to compile, its inputs)."""
    def mlp():
        torch.manual_seed(0)
        return torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8))
    def gpt2():
        # HF GPT-2 (2 layers, 64 dim), eval, returning logits: a realistic guard set (~350 guards)
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64, use_cache=False)
        return _Logits(GPT2LMHeadModel(cfg).eval())

    g = torch.Generator().manual_seed(0)
    return {
        "mlp": (mlp, (torch.randn(2, 8, generator=g),)),
        "3ops": (lambda: three_ops, (torch.randn(8, generator=g), torch.randn(8, generator=g))),
        "gpt2": (gpt2, (torch.randint(0, 128, (1, 8), generator=g),)),
    }


class _Logits(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids).logits


def _materialize(t):
    """A real tensor like ``t`` (example inputs may be fake tensors)."""
    if not isinstance(t, torch.Tensor):
        return t
    try:
        t.data_ptr()  # fake tensors raise here
        return t
    except Exception:  # noqa: BLE001
        real = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype).normal_() \
            if t.dtype.is_floating_point else torch.zeros(t.shape, dtype=t.dtype)
        return real.requires_grad_(t.requires_grad)


def _per_call_us(fn: Callable[[], Any], calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) / calls * 1e6


def prepare(compiler: str, case: str, grad: bool) -> dict[str, Any]:
    """Compile one case; returns callables for the compiled call and the graph call."""
    make, inputs = make_cases()[case]
    comp = get_compiler(compiler)
    comp.reset()
    rec = recording_backend()
    compiled = comp.compile(make(), backend=rec)
    ctx = torch.enable_grad if grad else torch.no_grad
    with ctx():
        expected = make()(*inputs)
        got = compiled(*inputs)
        compiled(*inputs)
    if not torch.allclose(got, expected):
        raise AssertionError(f"{compiler} {case}: compiled result differs from eager")
    if not rec.compiled:
        why = "; ".join(comp.fallback_reasons()) or "backend was never called"
        raise AssertionError(f"no graph compiled ({why})")
    graph_calls = []
    for fn, gm in zip(rec.compiled, rec.graphs):
        args = [_materialize(a) for a in _example_inputs_of(rec, gm)]
        graph_calls.append((fn, args))

    def call_compiled():
        return compiled(*inputs)

    def call_graphs():
        for fn, args in graph_calls:
            fn(*args)

    return {"compiled": call_compiled, "graphs": call_graphs, "n_graphs": len(graph_calls),
            "ctx": ctx}


def _example_inputs_of(rec, gm):
    return rec.example_inputs[rec.graphs.index(gm)]


def run(cases: list[str], compilers: list[str], calls: int, repeats: int,
        grad: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for case in cases:
        prepared, failed = {}, {}
        for c in compilers:
            try:
                prepared[c] = prepare(c, case, grad)
            except Exception as e:  # noqa: BLE001
                failed[c] = short_error(e)
        samples = {c: {"call": [], "graph": []} for c in prepared}
        ctx = torch.enable_grad if grad else torch.no_grad
        with ctx():
            for p in prepared.values():  # warm up
                _per_call_us(p["compiled"], max(calls // 10, 10))
                _per_call_us(p["graphs"], max(calls // 10, 10))
            for _ in range(repeats):
                for c, p in prepared.items():
                    samples[c]["call"].append(_per_call_us(p["compiled"], calls))
                    samples[c]["graph"].append(_per_call_us(p["graphs"], calls))
        res: dict[str, Any] = {}
        for c, s in samples.items():
            overheads = [a - b for a, b in zip(s["call"], s["graph"])]
            res[c] = {"call_us": statistics.median(s["call"]),
                      "graph_us": statistics.median(s["graph"]),
                      "overhead_us": statistics.median(overheads),
                      "graphs": prepared[c]["n_graphs"], "status": "ok"}
        for c, why in failed.items():
            res[c] = {"status": "failed", "reason": why}
        if all(res.get(c, {}).get("status") == "ok" for c in ("ember", "torch")):
            e, t = res["ember"]["overhead_us"], res["torch"]["overhead_us"]
            res["ratio_ember_torch"] = e / t if t > 0 else None
        results[case] = res
    return results


def format_results(results: dict[str, Any], calls: int, repeats: int) -> str:
    lines = [f"per-call overhead in µs (median of {repeats} rounds × {calls} calls)",
             f"{'case':<6}{'compiler':<9}{'call':>9}{'graph':>9}{'overhead':>10}{'graphs':>8}"]
    for case, res in results.items():
        for c in ("ember", "torch"):
            r = res.get(c)
            if r is None:
                continue
            if r["status"] != "ok":
                lines.append(f"{case:<6}{c:<9}  FAILED: {r['reason']}")
                continue
            lines.append(f"{case:<6}{c:<9}{r['call_us']:>9.2f}{r['graph_us']:>9.2f}"
                         f"{r['overhead_us']:>10.2f}{r['graphs']:>8}")
        ratio = res.get("ratio_ember_torch")
        if ratio is not None:
            lines.append(f"{case:<6}ember/torch overhead ratio: {ratio:.2f}x  (target <= 1.0x)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.overhead",
                                description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="mlp,3ops")
    p.add_argument("--compilers", default="ember,torch")
    p.add_argument("--calls", type=int, default=2000, help="calls per timed round")
    p.add_argument("--repeats", type=int, default=15, help="rounds; the median is reported")
    p.add_argument("--grad", action="store_true", help="run with autograd enabled")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    results = run(a.cases.split(","), a.compilers.split(","), a.calls, a.repeats, a.grad)
    print(format_results(results, a.calls, a.repeats))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
