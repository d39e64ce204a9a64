"""Capture time: ember vs ``torch.compile``, backend "eager", inference forward.

    python -m benchmarks.compile_time [--cases nanogpt,gpt2,gpt2_12l --repeats 3]

For each case and compiler, ``--repeats`` fresh processes (fresh inductor
caches, see benchmarks.run) each build the model, run one eager forward under
``torch.no_grad()``, then time ``compile()`` plus the first compiled call;
capture time = that minus one eager forward. ``torch._dynamo`` (which ember's
ShapeEnv imports too, as does transformers) is imported before timing, so
neither side pays for the one-time import. With the "eager" backend the backend does nothing, so
this is the frontend's cost: bytecode analysis, tracing, guards. The median over
processes is reported with the ember/torch ratio (target ≤ 0.5×).

Cases: ``nanogpt`` (the built-in GPT), ``gpt2`` (zoo HF GPT2, 2 layers, 64
dim), ``gpt2_12l`` (HF GPT2 with the GPT-2 small architecture: 12 layers, 768
dim, random weights).
"""
from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import time
from typing import Any

CASES = ("nanogpt", "gpt2", "gpt2_12l")


def _build(case: str):
    import torch
    if case == "gpt2_12l":
        from transformers import GPT2Config, GPT2LMHeadModel
        torch.manual_seed(0)
        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
        cfg._attn_implementation = "eager"
        model = GPT2LMHeadModel(cfg)
        g = torch.Generator().manual_seed(1)
        inputs = {"input_ids": torch.randint(0, cfg.vocab_size, (1, 32), generator=g)}
        return model, lambda m: m(**inputs)
    from benchmarks.zoo import get_model
    spec = get_model(case)
    model = spec.make_model()
    inputs = spec.infer_inputs(spec.make_inputs(spec.batch_size))
    return model, lambda m: spec.forward(m, inputs)


def child(case: str, compiler: str, backend: str) -> dict[str, Any]:
    import torch

    from benchmarks.compilers import get_compiler, short_error
    row: dict[str, Any] = {"case": case, "compiler": compiler, "backend": backend, "status": "ok"}
    try:
        t = time.perf_counter()
        importlib.import_module("torch._dynamo")  # both compilers need it (ember via ShapeEnv)
        row["dynamo_import_s"] = time.perf_counter() - t
        torch.set_num_threads(1)
        model, call = _build(case)
        model.eval()
        with torch.no_grad():
            call(model)
            t = time.perf_counter()
            call(model)
            eager_s = time.perf_counter() - t
            comp = get_compiler(compiler)
            comp.reset()
            t = time.perf_counter()  # compile() included
            compiled = comp.compile(model, backend=backend)
            call(compiled)
            first_s = time.perf_counter() - t
        row.update(eager_s=eager_s, first_call_s=first_s, capture_s=max(first_s - eager_s, 0.0),
                   **comp.counts())
        extra = comp.extra()
        if extra:
            row["extra"] = extra
        fallbacks = comp.fallback_reasons()
        if fallbacks or row["graphs"] == 0:
            row.update(status="fallback",
                       reason="ran eagerly: " + ("; ".join(fallbacks) or "no graph compiled")[:300])
    except Exception as e:  # noqa: BLE001
        row.update(status="failed", reason=short_error(e))
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compile_time",
                                description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="nanogpt,gpt2")
    p.add_argument("--compilers", default="ember,torch")
    p.add_argument("--backend", default="eager")
    p.add_argument("--repeats", type=int, default=3, help="fresh processes per case and compiler")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--json", default=None)
    p.add_argument("--child", nargs=2, metavar=("CASE", "COMPILER"), help=argparse.SUPPRESS)
    p.add_argument("--out", default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)

    if a.child:
        row = child(a.child[0], a.child[1], a.backend)
        text = json.dumps(row)
        if a.out:
            with open(a.out, "w") as f:
                f.write(text)
        else:
            print(text)
        return 0

    from benchmarks.run import run_module_fresh
    cases = [c for c in a.cases.split(",") if c]
    compilers = [c for c in a.compilers.split(",") if c]
    summary: dict[str, Any] = {}
    for case in cases:
        summary[case] = {}
        for rep in range(a.repeats):
            for comp in compilers:  # alternate compilers so load drift hits both
                row, why = run_module_fresh(
                    "benchmarks.compile_time",
                    ["--child", case, comp, "--backend", a.backend], a.timeout)
                if row is None:
                    row = {"case": case, "compiler": comp, "status": "failed", "reason": why}
                summary[case].setdefault(comp, []).append(row)
                print(f"  {case} {comp} #{rep + 1}: " + (
                    f"{row['capture_s']:.3f}s ({row.get('graphs')} graph(s), "
                    f"{row.get('graph_breaks')} break(s))" if row["status"] == "ok"
                    else f"{row['status'].upper()}: {row['reason']}"), flush=True)

    print(f"\ncapture time, backend {a.backend!r}, median of {a.repeats} fresh process(es)")
    print(f"{'case':<10}" + "".join(f"{c + ' s':>12}" for c in compilers) + f"{'ember/torch':>13}")
    result: dict[str, Any] = {}
    for case, by in summary.items():
        med = {}
        for comp, rows in by.items():
            ok = [r["capture_s"] for r in rows if r["status"] == "ok"]
            med[comp] = statistics.median(ok) if ok else None
        line = f"{case:<10}" + "".join(
            f"{med[c]:>12.3f}" if med.get(c) is not None else f"{'-':>12}" for c in compilers)
        ratio = (med["ember"] / med["torch"]
                 if med.get("ember") is not None and med.get("torch") else None)
        line += f"{ratio:>12.2f}x" if ratio is not None else f"{'-':>13}"
        print(line)
        result[case] = {"median_capture_s": med, "ratio_ember_torch": ratio, "runs": by}
    for case, by in summary.items():
        for comp, rows in by.items():
            for r in rows:
                if r["status"] != "ok":
                    print(f"  {case} {comp}: {r['reason']}")
                    break
    print("target: ember/torch <= 0.5x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
