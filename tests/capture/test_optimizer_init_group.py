"""An optimizer's ``_init_group`` runs for real while its step is traced (capture/variables/
optimizer_init.py), as torch.compile does: the lazily made state exists before the graph, so the
first graph serves every step. ``opt.step()`` compiled alone: Adam 1 graph and no recompile (was 2
graphs, 1 recompile); SGD with momentum makes its buffer in the update itself: 2 graphs, 1
recompile, as torch.compile 2.13. (No torch.compile here: once it runs, its TorchPatcher wraps
every ``_init_group`` in ``disable`` for the rest of the process.)"""
import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same

# (optimizer, kwargs, graphs, recompiles over 4 steps: torch.compile 2.13's)
CASES = [
    ("Adam", dict(lr=0.01), 1, 0),
    ("Adam", dict(lr=0.01, amsgrad=True, foreach=False), 1, 0),
    ("AdamW", dict(lr=0.01, weight_decay=0.1), 1, 0),
    ("RMSprop", dict(lr=0.01), 1, 0),
    ("Adagrad", dict(lr=0.1), 1, 0),
    ("SGD", dict(lr=0.1), 1, 0),
    ("SGD", dict(lr=0.1, momentum=0.9), 2, 1),
]


def _train(name, kw, backend=None, frozen_until=None, steps=4):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    opt = getattr(torch.optim, name)(model.parameters(), **kw)

    def step():
        opt.step()
    fn = ember.compile(step, backend=backend) if backend is not None else step
    for i in range(steps):
        g = torch.Generator().manual_seed(i)
        opt.zero_grad()
        frozen = frozen_until is not None and i < frozen_until
        model[0].weight.requires_grad_(not frozen)
        model(torch.randn(5, 4, generator=g)).pow(2).sum().backward()
        fn()
    state = [{k: v for k, v in opt.state[p].items()} for p in model.parameters()]
    return [p.detach().clone() for p in model.parameters()], state


@pytest.mark.parametrize("name,kw,graphs,recompiles", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_step_compiled_alone(name, kw, graphs, recompiles):
    expected, state_e = _train(name, kw)
    cnt = CompileCounter()
    actual, state_c = _train(name, kw, backend=cnt)
    assert_same(actual, expected, rtol=1e-5, atol=1e-5)
    assert_same(state_c, state_e, rtol=1e-5, atol=1e-5)
    assert cnt.frame_count == graphs
    assert ember.stats()["recompiles"] == recompiles


@pytest.mark.parametrize("name", ["Adam", "SGD"])
def test_a_parameter_that_gets_its_grad_later(name):
    # the first steps leave one parameter without a grad (not in the lists, no state): when it gets
    # one, the guard on its .grad recompiles rather than skipping it
    kw = dict(lr=0.1, momentum=0.9) if name == "SGD" else dict(lr=0.01)
    expected, state_e = _train(name, kw, frozen_until=2)
    actual, state_c = _train(name, kw, backend="eager", frozen_until=2)
    assert_same(actual, expected, rtol=1e-5, atol=1e-5)
    assert_same(state_c, state_e, rtol=1e-5, atol=1e-5)


def test_training_step_with_backward_inside():
    def run(compiled):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.Adam(model.parameters(), lr=0.05)

        def step(x):
            opt.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            return loss.detach()
        fn = ember.compile(step, backend="aot_eager") if compiled else step
        losses = [fn(torch.randn(3, 4, generator=torch.Generator().manual_seed(i))) for i in range(4)]
        return losses, [p.detach().clone() for p in model.parameters()]
    assert_same(run(True), run(False), rtol=1e-5, atol=1e-5)
    assert ember.stats()["recompiles"] == 0
