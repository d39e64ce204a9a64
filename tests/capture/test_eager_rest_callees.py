"""The rest of a frame that runs eagerly after a break still compiles the functions it calls, as
torch.compile's frame hook compiles every frame a skipped one calls; and ``function.__get__``
(binding a function to an object: ``func.__get__(opt, type(opt))(*args)`` in every lr scheduler's
wrapper of ``Optimizer.step``) is a method, traced.

Before: after a break at an instruction the frame cannot resume from compiled (``with lock:``, a
method load ember could not read, such as ``f.__get__``), the rest ran as plain Python and every
function it called ran uncompiled (the optimizer's update inside an lr scheduler's wrapper).
"""
import threading

import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile, reset

LOCK = threading.Lock()


def inner(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.cos()


def after_lock(x):
    y = x * 2
    with LOCK:  # (a break where the rest of the frame runs eagerly)
        z = inner(y)
    return inner(z) + 1


def _targets(counter):
    return [{getattr(n.target, "__name__", str(n.target)) for n in g.graph.nodes if n.op.startswith("call")}
            for g in counter.graphs]


def test_callees_after_an_eager_rest_are_compiled():
    reset()
    counter = CompileCounter()
    fn = compile(after_lock, backend=counter)
    x = torch.randn(4)
    assert_same(fn(x), after_lock(x))
    assert_same(fn(x), after_lock(x))
    ops = _targets(counter)
    assert any("sin" in t for t in ops) and any("cos" in t for t in ops), ops  # inner's halves compiled


class Counter:
    def __init__(self):
        self.total = torch.zeros(3)

    def add(self, x):
        y = x.sin()
        self.total.add_(y)
        return y * 2


ADD = Counter.add


def bind_and_call(c, x):
    return ADD.__get__(c, type(c))(x * 3) + 1


def bind_none_and_call(c, x):
    return ADD.__get__(None, type(c))(c, x) - 1


@pytest.mark.parametrize("fn", [bind_and_call, bind_none_and_call])
def test_function_get_binds_a_method(fn):
    reset()
    c_eager, c_comp = Counter(), Counter()
    compiled = compile(fn, backend="eager", fullgraph=True)  # (one graph: no break at __get__)
    for _ in range(2):
        x = torch.randn(3)
        assert_same(compiled(c_comp, x), fn(c_eager, x))
        assert_same(c_comp.total, c_eager.total, "mutated attribute")


def test_function_get_of_none_none_raises_as_eager():
    def f(x):
        return ADD.__get__(None, None)(x)
    with pytest.raises(TypeError) as eager:
        f(torch.randn(3))
    with pytest.raises(TypeError) as got:
        compile(f, backend="eager")(torch.randn(3))
    assert str(got.value) == str(eager.value)


def patched_step_wrapper(opt):
    """What `LRScheduler.__init__` installs on `opt.step` (written here, so it is traced)."""
    func = type(opt).step

    def wrapper(*args, **kwargs):
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)
    return wrapper


def test_optimizer_step_through_a_get_wrapper_is_compiled():
    def run(compiled):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.AdamW(model.parameters(), lr=0.01)
        opt.step = patched_step_wrapper(opt)

        def step(x):
            loss = model(x).pow(2).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss.detach()
        counter = CompileCounter()
        fn = compile(step, backend=counter) if compiled else step
        losses = [fn(torch.randn(3, 4, generator=torch.Generator().manual_seed(i))) for i in range(3)]
        return losses, [p.detach().clone() for p in model.parameters()], counter

    reset()
    expected = run(False)
    actual = run(True)
    assert_same(actual[0], expected[0], "losses")
    assert_same(actual[1], expected[1], "params")
    assert any(any("lerp" in str(n.target) for n in g.graph.nodes) for g in actual[2].graphs)  # the update
