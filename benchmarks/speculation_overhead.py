"""What speculation checkpoints (ember/capture/speculation.py) add to tracing: one frame applying
an autograd.Function N times (each apply is a checkpoint, and its backward, traced at the apply,
another), traced with checkpoints and with a no-op stand-in for them.

    python -m benchmarks.speculation_overhead [--applies 100 --repeats 3]

Reported: the best of ``repeats`` cold compiles (capture + eager backend) each way, in ms.
"""
from __future__ import annotations

import argparse
import time

import torch

import ember
import ember.capture.speculation as speculation
from ember.fake.snapshot import FakeSnapshot


class _Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * x.cos()


class _NoCheckpoint:
    def __init__(self, tx):
        self.fakes = FakeSnapshot([], None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def restore(self):
        return True

    def restore_fakes(self):
        return True

    def close(self):
        pass


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        ember.reset()
        start = time.perf_counter()
        ember.compile(fn, backend="eager")(torch.randn(8, requires_grad=True))
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--applies", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()

    def f(x):
        for _ in range(a.applies):
            x = _Fn.apply(x) + x * 2
        return x
    _best(f, 1)  # warm-up (imports)
    real = speculation.Checkpoint
    try:
        speculation.Checkpoint = _NoCheckpoint
        without = _best(f, a.repeats)
    finally:
        speculation.Checkpoint = real
    with_ = _best(f, a.repeats)
    print(f"{a.applies} applies: with checkpoints {with_:.0f} ms, without {without:.0f} ms "
          f"({with_ / without:.2f}x)")


if __name__ == "__main__":
    main()
