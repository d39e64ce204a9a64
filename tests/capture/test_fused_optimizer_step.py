"""A fused optimizer (``fused=True``) inside a compiled training step: its fused kernel runs as one
eager call, as torch.compile's TorchPatcher wraps ``torch.optim.*._fused_*`` in ``disable``; the rest
of the step is compiled and the answers are eager's.

Before: with the lr-scheduler and eager-rest fixes the update frames compiled, and
``torch._fused_adamw_(..., max_exp_avg_sqs=[], ...)`` reached the AOT layer, where functionalization
refuses an empty tensor list as "a non-functional tensor" (torch's own aot_eager fails alike): an
internal error, the frame eager with a warning (strict mode: the error).
"""
import pytest
import torch
import torch.nn as nn

from ember_test_helpers import assert_same, compile, reset

FUSED = [
    ("AdamW", dict(lr=0.01, fused=True)),
    ("Adam", dict(lr=0.01, fused=True, amsgrad=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, fused=True)),
    ("SGD", dict(lr=0.1, fused=True)),
    ("Adagrad", dict(lr=0.1, fused=True)),
]


def _train(name, kw, backend, with_scheduler):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = getattr(torch.optim, name)(model.parameters(), **kw)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.7) if with_scheduler else None

    def step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
        opt.zero_grad()
        return loss.detach()

    fn = compile(step, backend=backend) if backend else step
    losses = [fn(torch.randn(3, 4, generator=torch.Generator().manual_seed(i))) for i in range(4)]
    return losses, [p.detach().clone() for p in model.parameters()]


@pytest.mark.parametrize("with_scheduler", [False, True], ids=["plain", "scheduler"])
@pytest.mark.parametrize("name,kw", FUSED, ids=[f"{n}-{i}" for i, (n, _) in enumerate(FUSED)])
def test_fused_optimizer_step_matches_eager(name, kw, with_scheduler):
    reset()
    expected = _train(name, kw, None, with_scheduler)
    actual = _train(name, kw, "aot_eager", with_scheduler)  # (strict: an internal error would raise)
    assert_same(actual[0], expected[0], "losses")
    assert_same(actual[1], expected[1], "params")
