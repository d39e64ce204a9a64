"""A training step with an lr scheduler, compiled whole: the optimizer update is compiled once
static and once with the lr dynamic, and the scheduler never recompiles.

Every lr scheduler wraps ``opt.step`` in ``torch/optim/lr_scheduler.py``'s ``wrapper``, which calls
``func.__get__(opt, type(opt))(*args)``. Before: ember broke at ``function.__get__`` and ran the rest
of that frame as plain Python, so the optimizer update never compiled (torch.compile: one graph);
once it did, a ``"key" in group`` inside the step folded the group dict as a constant (specialising
the symbolic lr: one recompile per new lr), and ``_init_group``'s guards read the lr's value (the
same); the resume function of ``Optimizer._use_grad`` has a parameter named ``torch`` that shadowed
the shape guards' helper (static retry: the lr a constant again); and the scheduler's own ``step``
was inlined, its ``_step_count`` guarded, a recompile per training step until the recompile limit
(with a warning). torch.compile skips ``lr_scheduler.py``; ember now does too.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset, stats

SCHEDULERS = {
    "lambda": lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0 / (i + 1)),
    "step": lambda opt: torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5),
    "cosine": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=8),  # (lr 0 at step 8)
    "cosine_long": lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100),
    "onecycle": lambda opt: torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.01, total_steps=20),
}
OPTIMIZERS = {
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.01, weight_decay=0.01),
    "adamw_loop": lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=False),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
}


def _train(opt_name, sched_name, backend, steps, clip=True):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = OPTIMIZERS[opt_name](model.parameters())
    sched = SCHEDULERS[sched_name](opt)

    def step(x, y):
        loss = F.mse_loss(model(x), y)
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    counter = CompileCounter()
    fn = step if backend is None else compile(step, backend=backend if backend != "counter" else counter)
    losses = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(steps):
            g = torch.Generator().manual_seed(i)
            losses.append(fn(torch.randn(5, 4, generator=g), torch.randn(5, 1, generator=g)))
    lrs = [group["lr"] for group in opt.param_groups]
    return losses, [p.detach().clone() for p in model.parameters()], lrs, counter, caught


@pytest.mark.parametrize("sched_name", ["lambda", "step", "cosine", "onecycle"])
@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_step_with_scheduler_matches_eager(opt_name, sched_name):
    reset()
    expected = _train(opt_name, sched_name, None, 10)
    actual = _train(opt_name, sched_name, "aot_eager", 10)
    assert_same(actual[0], expected[0], "losses")
    assert_same(actual[1], expected[1], "params")
    assert actual[2] == expected[2]  # the lrs the scheduler set, as in eager


def _update_graphs(counter):
    """Graphs holding the optimizer's parameter update (Adam's running averages)."""
    return [g for g in counter.graphs if any("lerp" in str(n.target) or "addcdiv" in str(n.target)
                                            for n in g.graph.nodes)]


@pytest.mark.parametrize("sched_name", ["lambda", "cosine_long", "step"])
def test_update_compiled_once_static_once_dynamic(sched_name):
    """12 steps, a new lr each: the update is compiled twice (the first lr a constant, then a
    symbol), the scheduler's counters recompile nothing, and nothing hits the recompile limit."""
    reset()
    expected = _train("adamw", sched_name, None, 12)
    losses, params, lrs, counter, caught = _train("adamw", sched_name, "counter", 12)
    assert_same(losses, expected[0], "losses")
    assert_same(params, expected[1], "params")
    assert len(_update_graphs(counter)) == 2, [len(g.graph.nodes) for g in counter.graphs]
    assert stats()["recompiles"] <= 2, stats()
    assert not [w for w in caught if "recompile" in str(w.message)], [str(w.message) for w in caught]


def test_scheduler_step_inside_loop_of_micro_batches():
    """`loss.backward()` inside a loop (the frame runs as it is): the update inside the
    scheduler's wrapper of `opt.step` is still compiled, as torch.compile's frame hook compiles it."""
    reset()

    def run(compiled):
        torch.manual_seed(0)
        model = nn.Linear(4, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5 ** i)
        xs = [torch.randn(3, 4) for _ in range(2)]

        def step():
            total = 0.0
            for x in xs:
                loss = model(x).pow(2).mean() / len(xs)
                loss.backward()
                total = total + loss.detach()
            opt.step()
            sched.step()
            opt.zero_grad()
            return total
        counter = CompileCounter()
        fn = compile(step, backend=counter) if compiled else step
        out = [fn() for _ in range(4)]
        return out, [p.detach().clone() for p in model.parameters()], counter

    expected = run(False)
    actual = run(True)
    assert_same(actual[0], expected[0], "losses")
    assert_same(actual[1], expected[1], "params")
    assert len(_update_graphs(actual[2])) >= 1
