"""A nested function without cells, made anew by each run of its ``def``, called from a frame that
runs as it is: one compiled cache for its code (as for closures, and as torch.compile compiles
per code), not a compile per function object up to the recompile limit.
"""
from __future__ import annotations

import io

import torch

import ember
from ember_test_helpers import CompileCounter

SINK = io.StringIO()


def _loop_with_defs(x, n, vary):
    out = x
    for i in range(n):
        print(i, file=SINK)  # a break inside a loop: this frame runs as it is, its callees compile
        def helper(a, k=(i + 1 if vary else 2)):  # noqa: E306 — a new function object each iteration
            t = a * 2
            return t.sin() * k + 1
        out = helper(out)
    return out


def _graphs(vary):
    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(_loop_with_defs, backend=counter)
    for n in (3, 4):
        x = torch.rand(3)
        torch.testing.assert_close(compiled(x, n, vary), _loop_with_defs(x, n, vary))
    return counter.frame_count


def test_same_defaults_one_graph():
    assert _graphs(vary=False) == 1  # torch.compile: 1 (ember compiled one per iteration: 7)


def test_changing_default_is_guarded():
    assert _graphs(vary=True) == 2  # k = 1, then symbolic (torch.compile: 2)
