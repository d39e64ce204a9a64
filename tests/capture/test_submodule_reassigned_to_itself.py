"""``self.classifier = self.classifier.to(self.dtype)`` (HF switch_transformers' router): Module.to
returns the module itself, and assigning a submodule the object it already holds changes nothing,
so the frame stays one graph (it broke the graph at every router: 25 breaks in the model). Another
module assigned still breaks the graph and matches eager."""
import torch
import torch.nn as nn

import ember
from ember_test_helpers import REFERENCE, stats


class Router(nn.Module):
    def __init__(self, swap=False):
        super().__init__()
        self.classifier = nn.Linear(4, 3)
        self.other = nn.Linear(4, 3)
        self.swap = swap

    def forward(self, x):
        self.classifier = self.classifier.to(torch.float32)
        if self.swap:
            self.classifier = self.other
        return self.classifier(x).softmax(-1)


def _run(model, backend, calls=None):
    compiled = ember.compile(model, backend=backend)
    ref_model = Router(model.swap)
    ref_model.load_state_dict(model.state_dict())
    for _ in range(2):
        x = torch.randn(2, 4, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        before = len(calls) if calls is not None else 0
        out = compiled(x)
        if calls is not None:
            assert calls[before:] == ["classifier"]  # the hook ran, once, as in eager
        ref = ref_model(x_ref)
        torch.testing.assert_close(out, ref)
        out.sum().backward()
        ref.sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad)
    return compiled


def test_same_submodule_assigned_back_is_one_graph():
    model = Router()
    before = model.classifier
    _run(model, "aot_eager")
    assert model.classifier is before
    if not REFERENCE:
        # (Module.to reads each parameter's .grad: the second call, after a backward, compiles again)
        assert stats()["graph_breaks"] == 0 and stats()["graphs"] == 2


def test_another_submodule_assigned_still_matches_eager():
    model = Router(swap=True)
    _run(model, "eager")
    assert model.classifier is model.other


def test_with_a_module_registration_hook_the_assignment_runs_it():
    calls = []
    handle = torch.nn.modules.module.register_module_module_registration_hook(
        lambda mod, name, sub: calls.append(name))
    try:
        model = Router()
        _run(model, "eager", calls)
    finally:
        handle.remove()
