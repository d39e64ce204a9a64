"""An optimizer's step inside a compiled function: the update is compiled, the answers are eager's.

``Optimizer.step`` breaks on purpose (``torch._dynamo.graph_break()`` in ``_use_grad``), so the
caller's graph ends at ``opt.step()``. torch.compile then compiles the step's own frames (torch/optim
is not in its skip list) and the parameter update is one graph; ember does the same: the frames
of torch/optim are compiled at a break, and the optimizers' ``addcdiv_(..., value=<0-d tensor>)``
/ ``add_(..., alpha=<0-d tensor>)`` (a number read from a tensor in eager) is traced as tensor
arithmetic instead of breaking inside the step's loop (which made the whole step eager).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset, stats

def _init_group_disabled() -> bool:
    """torch.compile's TorchPatcher, once torch.compile has run in the process, wraps every
    optimizer's ``_init_group`` in ``torch.compiler.disable``: a break inside the step's loop,
    so that frame runs as it is (still eager's answers)."""
    return hasattr(torch.optim.SGD._init_group, "_torchdynamo_disable")


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, foreach=False)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1, foreach=False)),
    ("AdamW", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True)),
    ("Adagrad", dict(lr=0.1)),
    ("Adamax", dict(lr=0.01)),
    ("NAdam", dict(lr=0.01)),
    ("RAdam", dict(lr=0.01)),  # (a data-dependent branch in its step: that frame runs eagerly)
]


def _train(name, kw, compiled: bool, scheduler: bool):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    opt = getattr(torch.optim, name)(model.parameters(), **kw)
    sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.9) if scheduler else None

    def step(x, y):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    fn = compile(step, backend="aot_eager") if compiled else step
    losses = []
    for i in range(4):
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(5, 4, generator=g), torch.randn(5, 1, generator=g)
        losses.append(fn(x, y))
        if sched is not None:
            sched.step()
    state = [{k: v for k, v in s.items()} for s in opt.state.values()]
    return losses, [p.detach().clone() for p in model.parameters()], state


@pytest.mark.parametrize("scheduler", [False, True], ids=["plain", "lr_scheduler"])
@pytest.mark.parametrize("name,kw", OPTIMIZERS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZERS)])
def test_train_step_with_optimizer_matches_eager(name, kw, scheduler):
    reset()
    expected = _train(name, kw, False, scheduler)
    actual = _train(name, kw, True, scheduler)
    assert_same(actual[0], expected[0], "losses")
    assert_same(actual[1], expected[1], "params")
    assert len(actual[2]) == len(expected[2])
    for a, e in zip(actual[2], expected[2]):
        assert sorted(a) == sorted(e)
        for k in e:
            assert type(a[k]) is type(e[k]), k
            assert_same(a[k], e[k], f"state[{k}]")
    # (Dynamo counts its skipped frames as fallbacks; RAdam's step loop branches on a tensor)
    if not REFERENCE and name != "RAdam" and not _init_group_disabled():
        assert stats()["fallbacks"] == 0


def test_optimizer_step_frames_are_compiled():
    reset()
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    cnt = CompileCounter()

    def step():
        opt.step()

    fn = compile(step, backend=cnt)
    expected_model = nn.Linear(3, 2)
    expected_model.load_state_dict(model.state_dict())
    expected_opt = torch.optim.SGD(expected_model.parameters(), lr=0.1, momentum=0.9)
    for i in range(3):
        x = torch.randn(4, 3)
        for m in (model, expected_model):
            m(x).pow(2).sum().backward()
        fn()
        expected_opt.step()
        for m in (model, expected_model):
            m.zero_grad()
    assert_same(list(model.parameters()), list(expected_model.parameters()))
    # the update is compiled (torch.compile: one graph for the first step, one more once the
    # momentum buffers exist), not run eagerly
    assert cnt.frame_count >= 1
    if not REFERENCE and not _init_group_disabled():
        assert stats()["fallbacks"] == 0


@pytest.mark.parametrize("method", ["addcdiv_", "addcmul_", "addcdiv", "addcmul"])
def test_tensor_value_keyword_does_not_break(method):
    reset()
    cnt = CompileCounter()

    def f(p, a, b, v):
        out = getattr(p, method)(a, b, value=-v * 2)
        return out, p

    torch.manual_seed(0)
    p, a, b = torch.randn(5), torch.randn(5), torch.rand(5) + 0.5
    v = torch.tensor(0.3)
    expected = f(p.clone(), a, b, v)
    actual = compile(f, backend=cnt, fullgraph=True)(p.clone(), a, b, v)
    assert_same(actual, expected)
    assert cnt.frame_count == 1


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises on Tensor.sub(alpha=<0-d tensor>) under "
                    "fullgraph (its rewrite covers add_ only)")
def test_tensor_alpha_keyword():
    reset()
    cnt = CompileCounter()

    def f(p, g, lr):
        q = p * 1.0
        q.add_(g, alpha=-lr)
        r = q.sub(g, alpha=lr)
        return q, r

    torch.manual_seed(0)
    p = torch.randn(4, requires_grad=True)
    g = torch.randn(4)
    lr = torch.tensor(0.5)
    expected = f(p, g, lr)
    (expected[0].sum() + expected[1].sum()).backward()
    p_grad = p.grad.clone()
    p.grad = None
    actual = compile(f, backend=cnt, fullgraph=True)(p, g, lr)
    assert_same(actual, expected)
    (actual[0].sum() + actual[1].sum()).backward()
    assert_same(p.grad, p_grad)
    assert cnt.frame_count == 1


def test_scalar_tensor_that_requires_grad_raises_as_eager():
    reset()

    def f(p, g, lr):
        return p.add(g, alpha=lr)

    args = (torch.randn(3), torch.randn(3), torch.tensor(0.5, requires_grad=True))
    with pytest.raises(TypeError) as expected:
        f(*args)
    with pytest.raises(TypeError) as actual:
        compile(f, backend="eager")(*args)
    assert str(actual.value) == str(expected.value)


def test_tensor_value_of_other_kinds_keeps_eager_semantics():
    reset()

    def f(p, a, b, v):
        return p.addcmul(a, b, value=v)

    p, a, b = torch.randn(3), torch.randn(3), torch.randn(3)
    v = torch.tensor(2)  # an integer 0-d tensor: eager's call as it is
    assert_same(compile(f, backend="eager")(p, a, b, v), f(p, a, b, v))
    v = torch.tensor([0.5])  # not 0-d: eager refuses it
    with pytest.raises(TypeError) as expected:
        f(p, a, b, v)
    with pytest.raises(TypeError) as actual:
        compile(f, backend="eager")(p, a, b, v)
    assert str(actual.value) == str(expected.value)


def test_step_called_from_a_frame_that_runs_as_it_is():
    """Gradient accumulation: `backward()` inside the loop makes the frame run as it is (as
    torch.compile skips it); the functions it calls are compiled, the optimizer's step too."""
    reset()
    cnt = CompileCounter()

    def make():
        torch.manual_seed(0)
        model = nn.Linear(3, 1)
        return model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def train(model, opt, xs, ys):
        opt.zero_grad()
        total = 0.0
        for x, y in zip(xs, ys):
            loss = F.mse_loss(model(x), y) / len(xs)
            loss.backward()
            total += loss.item()
        opt.step()
        return total

    xs = [torch.randn(2, 3) for _ in range(2)]
    ys = [torch.randn(2, 1) for _ in range(2)]
    m1, o1 = make()
    m2, o2 = make()
    fn = compile(train, backend=cnt)
    for _ in range(3):
        assert fn(m2, o2, xs, ys) == train(m1, o1, xs, ys)
    assert_same(list(m2.parameters()), list(m1.parameters()))
    assert cnt.frame_count >= 1  # the update (torch.compile: the same)
