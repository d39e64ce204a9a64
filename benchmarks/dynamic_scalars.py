"""Python scalars that change every call: graphs compiled and wall time, ember vs torch.compile.

    python -m benchmarks.dynamic_scalars [--calls 8] [--backend aot_eager]

Each program is called ``--calls`` times with a new float each call (a scale, a learning
rate in a param group, a clamp bound, a loss logged with ``.item()`` after a graph break).
Reported per program: graphs compiled by each compiler over the calls and the wall time of
all calls (compiles included, as a training loop pays them), in one process after a warm-up
compile of each. Target: ember
compiles at most 2 graphs per program (static, then one symbolic float), no more than torch.
"""
from __future__ import annotations

import argparse
import time

import torch


def scale(x, a):
    return x * a + 1


def param_group(p, g, group):
    p.add_(g, alpha=-group["lr"])
    return p


def clamp(x, a):
    return x.clamp(min=-a, max=a)


def logged_loss(x, log):
    loss = (x * x).mean()
    value = loss.item()  # a graph break; the resume function receives a new float every call
    log.append(value)
    return loss * value


def programs(calls: int):
    x = torch.randn(64)
    return {
        "scale": (scale, [(x, 0.1 * (i + 1)) for i in range(calls)]),
        "param_group_lr": (param_group, [(torch.zeros(64), x, {"lr": 0.01 * (i + 1)}) for i in range(calls)]),
        "clamp_bound": (clamp, [(x, 0.5 + 0.1 * i) for i in range(calls)]),
        "logged_loss_item": (logged_loss, [(torch.randn(64), []) for _ in range(calls)]),
    }


def run_ember(fn, calls, backend):
    import ember
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    t = time.perf_counter()
    for args in calls:
        compiled(*args)
    return ember.stats()["graphs"], time.perf_counter() - t


def run_torch(fn, calls, backend):
    import torch._dynamo
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(fn, backend=backend)
    t = time.perf_counter()
    for args in calls:
        compiled(*args)
    return torch._dynamo.utils.counters["stats"]["unique_graphs"], time.perf_counter() - t


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=8)
    p.add_argument("--backend", default="aot_eager")
    a = p.parse_args()
    warm = [(torch.randn(4), 0.5)]
    run_ember(scale, warm, a.backend)  # (imports and first-compile setup out of the table)
    run_torch(scale, warm, a.backend)
    print(f"{'program':<18} {'ember graphs':>12} {'torch graphs':>12} {'ember s':>8} {'torch s':>8} {'ratio':>6}")
    for name, (fn, calls) in programs(a.calls).items():
        eg, et = run_ember(fn, calls, a.backend)
        tg, tt = run_torch(fn, calls, a.backend)
        print(f"{name:<18} {eg:>12} {tg:>12} {et:>8.3f} {tt:>8.3f} {et / tt:>6.2f}")


if __name__ == "__main__":
    main()
