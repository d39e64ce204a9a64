"""Guard cost of symbolic entries as the number of dynamic inputs grows: ember vs torch.compile.

    python -m benchmarks.dynamic_guards [--inputs 1,4,16,64 --calls 3000]

A function of N tensor inputs (each ``x_i * x_i.size(0)``, summed) compiled with
``dynamic=True`` and backend ``eager``: every input's dimension is a symbol, and
the entry's shape guards read every input's sizes and strides. Reported: time
per call minus eager's (the compiler's overhead, guards included), per input,
for ember and torch.compile, measured in alternating rounds in one process.
The target is flat per-input cost (guard code linear in the inputs, with a
small constant), at or below torch.compile's.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch


def make_fn(n: int):
    names = [f"x{i}" for i in range(n)]
    body = " + ".join(f"({v} * {v}.size(0)).sum()" for v in names)
    ns: dict = {}
    exec(f"def f({', '.join(names)}):\n    return {body}\n", ns)  # noqa: S102 — a generated benchmark function
    return ns["f"]


def per_call(fn, args, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return (time.perf_counter() - t) / calls


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--inputs", default="1,4,16,64")
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    import torch._dynamo
    import ember
    print(f"{'inputs':>6} {'eager us':>9} {'ember us':>9} {'torch us':>9} {'ember/input':>11} {'torch/input':>11} "
          f"{'e/t':>5}")
    for n in (int(v) for v in a.inputs.split(",")):
        fn = make_fn(n)
        args = [torch.randn(3 + i % 5, 2) for i in range(n)]
        ember.reset()
        torch._dynamo.reset()
        e = ember.compile(fn, backend="eager", dynamic=True)
        t = torch.compile(fn, backend="eager", dynamic=True)
        rounds = {"eager": [], "ember": [], "torch": []}
        with torch.no_grad():
            for f in (fn, e, t):
                per_call(f, args, 50)  # compile, warm up
            for _ in range(a.repeats):
                for name, f in (("eager", fn), ("ember", e), ("torch", t)):
                    rounds[name].append(per_call(f, args, a.calls))
        med = {k: statistics.median(v) * 1e6 for k, v in rounds.items()}
        oe, ot = med["ember"] - med["eager"], med["torch"] - med["eager"]
        print(f"{n:>6} {med['eager']:>9.1f} {med['ember']:>9.1f} {med['torch']:>9.1f} {oe / n:>11.2f} "
              f"{ot / n:>11.2f} {oe / ot if ot > 0 else float('nan'):>5.2f}")
        assert ember.stats()["recompiles"] == 0


if __name__ == "__main__":
    main()
