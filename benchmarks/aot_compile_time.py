"""Compile time and steady-state step time: ember's AOT backends vs torch's.

    .venv/bin/python benchmarks/aot_compile_time.py [--models gpt2,bert,llama] [--repeat 3] [--steps 30]

Each measurement runs in a fresh subprocess with Inductor's caches disabled
(``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1``, a fresh ``TORCHINDUCTOR_CACHE_DIR``).

* compile: wall time of the first train step (forward + loss + backward) of
  ``torch.compile(model, backend=B)`` minus nothing — Dynamo capture is
  included for both sides, so the ratio understates the AOT-layer difference;
  the AOT layer's own time (``ember.metrics`` phase ``aot``) is reported too,
  and "AOT layer only": the graphs Dynamo captured, compiled by ember's
  ``aot_eager`` vs torch's ``aot_module_simplified(fw_compiler=nop)``, timed
  through the first forward and backward.
  B = ember's ``aot_eager`` vs torch's ``"aot_eager"``.
* steady: median time per train step after warm-up, ember's ``inductor`` vs
  torch's ``"inductor"``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r"""
import json, sys, time, importlib, types
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
try:
    import ember
except ModuleNotFoundError as e:   # ember.api may not exist yet in this checkout
    if e.name != "ember.api":
        raise
    for m in [m for m in sys.modules if m == "ember" or m.startswith("ember.")]:
        del sys.modules[m]
    stub = types.ModuleType("ember.api"); stub.compile = stub.reset = stub.explain = None
    sys.modules["ember.api"] = stub
    import ember
import torch
from ember import metrics
from models import make_model, make_batch, train_step
torch.set_num_threads({threads})
model = make_model({model!r}); ids, labels = make_batch()
backend = ember.lookup_backend({backend!r}) if {ember!r} else {backend!r}
compiled = torch.compile(model, backend=backend)
metrics.clear()
t0 = time.perf_counter(); train_step(compiled, ids, labels); first = time.perf_counter() - t0
for _ in range({warmup}):   # torch's inductor needs a few steps before it is steady
    model.zero_grad(set_to_none=True); train_step(compiled, ids, labels)
times = []
for _ in range({steps}):
    model.zero_grad(set_to_none=True)
    t0 = time.perf_counter(); train_step(compiled, ids, labels); times.append(time.perf_counter() - t0)
times.sort()
print(json.dumps({{"first": first, "steady": times[len(times) // 2], "aot": metrics.compile_times().get("aot", 0.0)}}))
"""


LAYER_CHILD = r"""
import json, sys, time, types
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
try:
    import ember
except ModuleNotFoundError as e:
    if e.name != "ember.api":
        raise
    for m in [m for m in sys.modules if m == "ember" or m.startswith("ember.")]:
        del sys.modules[m]
    stub = types.ModuleType("ember.api"); stub.compile = stub.reset = stub.explain = None
    sys.modules["ember.api"] = stub
    import ember
import torch
from models import make_model, make_batch
torch.set_num_threads({threads})
model = make_model({model!r}); ids, labels = make_batch()
captured = []
def grab(gm, example_inputs):
    captured.append((gm, example_inputs))
    return gm.forward
torch.compile(model, backend=grab)(input_ids=ids, labels=labels)
times = []
for gm, example_inputs in captured:
    t0 = time.perf_counter()
    if {ember!r}:
        compiled = ember.lookup_backend("aot_eager")(gm, example_inputs)
    else:
        from torch._functorch.aot_autograd import aot_module_simplified
        from functorch.compile import nop
        compiled = aot_module_simplified(gm, example_inputs, fw_compiler=nop)
    outs = compiled(*example_inputs)
    loss = sum(o.sum() for o in outs if isinstance(o, torch.Tensor) and o.requires_grad)
    loss.backward()   # includes the lazy backward compile
    times.append(time.perf_counter() - t0)
print(json.dumps({{"layer": sum(times), "graphs": len(captured)}}))
"""


def run_layer(model: str, use_ember: bool, threads: int) -> dict:
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error")
    code = LAYER_CHILD.format(root=ROOT, tests=os.path.join(ROOT, "tests", "aot"), model=model,
                              ember=use_ember, threads=threads)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"layer {model}/ember={use_ember} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_one(model: str, backend: str, use_ember: bool, steps: int, threads: int, warmup: int = 0) -> dict:
    env = dict(os.environ)
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ember-bench-inductor-")
    env["TRANSFORMERS_VERBOSITY"] = "error"
    code = CHILD.format(root=ROOT, tests=os.path.join(ROOT, "tests", "aot"), model=model, backend=backend,
                        ember=use_ember, steps=steps, threads=threads, warmup=warmup)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{model}/{backend}/ember={use_ember} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt2,bert,llama")
    ap.add_argument("--repeat", type=int, default=3, help="subprocesses per measurement (median taken)")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=10, help="inductor steps before timing")
    args = ap.parse_args()

    rows = []
    for model in args.models.split(","):
        res = {}
        for key, backend, use_ember, steps, warmup in [
                ("ember_aot_eager", "aot_eager", True, 3, 0),
                ("torch_aot_eager", "aot_eager", False, 3, 0),
                ("ember_inductor", "inductor", True, args.steps, args.warmup),
                ("torch_inductor", "inductor", False, args.steps, args.warmup)]:
            runs = [run_one(model, backend, use_ember, steps, args.threads, warmup) for _ in range(args.repeat)]
            res[key] = {k: statistics.median(r[k] for r in runs) for k in ("first", "steady", "aot")}
            print(f"  {model:6s} {key:16s} first step {res[key]['first']:.2f}s  steady {res[key]['steady'] * 1e3:.2f}ms"
                  + (f"  (ember aot layer {res[key]['aot']:.2f}s)" if use_ember else ""), flush=True)
        for key, use_ember in [("ember_layer", True), ("torch_layer", False)]:
            runs = [run_layer(model, use_ember, args.threads) for _ in range(args.repeat)]
            res[key] = {"layer": statistics.median(r["layer"] for r in runs)}
            print(f"  {model:6s} {key:16s} AOT layer only (compile + first fw/bw, aot_eager): "
                  f"{res[key]['layer']:.2f}s over {runs[0]['graphs']} graph(s)", flush=True)
        rows.append((model, res))

    print()
    print(f"{'model':8s} {'aot_eager compile ember/torch':>30s} {'AOT layer only ember/torch':>28s} "
          f"{'inductor compile ember/torch':>29s} {'inductor steady ember/torch':>28s}")
    for model, r in rows:
        ce, ct = r["ember_aot_eager"]["first"], r["torch_aot_eager"]["first"]
        ie, it = r["ember_inductor"]["first"], r["torch_inductor"]["first"]
        se, st = r["ember_inductor"]["steady"], r["torch_inductor"]["steady"]
        le, lt = r["ember_layer"]["layer"], r["torch_layer"]["layer"]
        print(f"{model:8s} {f'{ce:.2f}s / {ct:.2f}s = {ce / ct:.2f}x':>30s} {f'{le:.2f}s / {lt:.2f}s = {le / lt:.2f}x':>28s} "
              f"{f'{ie:.1f}s / {it:.1f}s = {ie / it:.2f}x':>29s} "
              f"{f'{se * 1e3:.2f}ms / {st * 1e3:.2f}ms = {se / st:.2f}x':>28s}")
    print("\ntargets: aot_eager compile <= 0.50x, inductor steady <= 1.05x")


if __name__ == "__main__":
    main()
