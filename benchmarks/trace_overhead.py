"""What ``EMBER_TRACE`` adds to compile time: a cold compile with the trace off and on.

    python -m benchmarks.trace_overhead [--cases nanogpt,gpt2 --backend aot_eager --repeats 5]

Each run is a fresh process (off and on alternate, so load from elsewhere on the machine hits
both alike) that builds the model, runs one eager train step (forward, loss, backward), then
times ``ember.compile`` plus the first compiled train step; compile = that minus one eager
step. With the trace on, the process writes the trace into a fresh temporary directory (every
record: graphs, AOT joint/forward/backward graphs, guards, metrics). Reported: the median
compile time off and on per case, and on/off (target <= 1.20x).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(case: str, backend: str, trace_dir: str | None) -> dict:
    import torch
    import importlib
    importlib.import_module("torch._dynamo")  # (imported by ember's ShapeEnv: not a trace cost)
    import ember
    import ember.report.trace
    from benchmarks.zoo import get_model
    if trace_dir:
        ember.report.trace.enable(trace_dir)
    torch.set_num_threads(1)
    spec = get_model(case)
    model = spec.make_model()
    inputs = spec.make_inputs(spec.batch_size)
    spec.train_step(model, inputs)
    t = time.perf_counter()
    spec.train_step(model, inputs)
    eager_s = time.perf_counter() - t
    ember.reset()
    t = time.perf_counter()
    compiled = ember.compile(model, backend=backend)
    spec.train_step(compiled, inputs)
    first_s = time.perf_counter() - t
    size = 0
    if trace_dir:
        import ember.report.trace as tr
        size = sum(os.path.getsize(p) for p in tr.log_files(trace_dir))
    return {"compile_s": max(first_s - eager_s, 0.0), "trace_bytes": size, **ember.stats()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.trace_overhead")
    p.add_argument("--cases", default="nanogpt")
    p.add_argument("--backend", default="aot_eager")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--json", default=None)
    p.add_argument("--child", nargs=3, metavar=("CASE", "BACKEND", "TRACE"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        case, backend, trace_dir = args.child
        print(json.dumps(child(case, backend, trace_dir if trace_dir != "-" else None)))
        return 0
    import ember.report.trace  # noqa: F401 — (fail early if the module is missing)
    results = {}
    for case in args.cases.split(","):
        times = {"off": [], "on": []}
        for _ in range(args.repeats):
            for mode in ("off", "on"):
                with tempfile.TemporaryDirectory() as d:
                    env = {k: v for k, v in os.environ.items() if k != "EMBER_TRACE"}
                    out = subprocess.run([sys.executable, "-m", "benchmarks.trace_overhead", "--child", case,
                                          args.backend, d if mode == "on" else "-"],
                                         capture_output=True, text=True, env=env, timeout=600)
                    if out.returncode != 0:
                        print(out.stderr[-2000:], file=sys.stderr)
                        return 1
                    row = json.loads(out.stdout.strip().splitlines()[-1])
                    times[mode].append(row["compile_s"])
                    if mode == "on":
                        times.setdefault("bytes", []).append(row["trace_bytes"])
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        results[case] = {"off_s": off, "on_s": on, "ratio": on / off if off else float("nan"),
                         "trace_kb": statistics.median(times["bytes"]) / 1024, "runs": times}
        print(f"{case:10s} {args.backend}: compile off {off:.3f}s  on {on:.3f}s  on/off {on / off:.2f}x  "
              f"(trace {results[case]['trace_kb']:.0f} KiB; median of {args.repeats} fresh processes each)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
