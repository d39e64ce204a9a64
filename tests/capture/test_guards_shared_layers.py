"""Modules of one class share compiled code: guarded by type and by what the trace reads through
them (parameters and buffers are graph inputs read from the module passed in), not by identity.

A graph break inside a layer's forward compiles that forward (and its resume function) once for
all layers of the class; the loop over the layers resumes with shared code too. Identity is
guarded only where the program observes it (``is``, ``id()``, a dict key).
"""
import pytest
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, clone_inputs, compile, stats


class Layer(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = scale

    def forward(self, x):
        x = self.lin(x).relu()
        print("", end="")  # a graph break inside every layer
        return x * self.scale + 1


class Stack(nn.Module):
    def __init__(self, n, scales=None):
        super().__init__()
        scales = scales or [0.5] * n
        self.layers = nn.ModuleList(Layer(s) for s in scales)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _run(model, calls=3, grad=False):
    counter = CompileCounter()
    compiled = compile(model, backend=counter)
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(0)).requires_grad_(grad)
    for _ in range(calls):
        assert_same(compiled(x), model(x))
    return counter


@pytest.mark.parametrize("n", [2, 6, 12])
def test_identical_layers_share_compiled_code(n):
    torch.manual_seed(0)
    counter = _run(Stack(n))
    s = stats()
    # Stack.forward breaks inside its loop: it is skipped (as torch.compile does) and each layer
    # it calls is compiled through one cache of Layer.forward
    assert s["fallbacks"] == 1
    # Independent of the number of layers (12 > the recompile limit would otherwise go eager).
    assert s["recompiles"] <= 3, s
    assert counter.frame_count <= 4, counter


def test_layer_attributes_still_guarded():
    """Sharing code across layers keeps per-layer attribute values right (read through the source)."""
    torch.manual_seed(0)
    model = Stack(4, scales=[0.5, 2.0, 0.5, 3.0])
    _run(model)  # asserts equal to eager on every call
    model.layers[2].scale = 5.0
    _run(model, calls=1)


def test_layers_with_grad_and_training_loop():
    torch.manual_seed(0)
    model = Stack(5)
    eager = Stack(5)
    eager.load_state_dict(model.state_dict())
    compiled = compile(model, backend=CompileCounter())
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        compiled(x).sum().backward()
        eager(x).sum().backward()
    assert_same([p.grad for p in model.parameters()], [p.grad for p in eager.parameters()],
                check_requires_grad=False)
    assert stats()["recompiles"] <= 3


def test_module_list_length_is_guarded():
    """Guarded by type, a container module still pins its members when the trace iterates it."""
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x * len(self.layers)

    torch.manual_seed(0)
    net = Net()
    compiled = compile(net, backend=CompileCounter())
    x = torch.randn(2, 4)
    assert_same(compiled(x), net(x))
    net.layers.append(nn.Linear(4, 4))
    assert_same(compiled(x), net(x))
    del net.layers[0]
    assert_same(compiled(x), net(x))


def test_two_instances_passed_as_argument():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)

    def f(m, x):
        return m(x).relu()

    counter = CompileCounter()
    compiled = compile(f, backend=counter)
    x = torch.randn(2, 4)
    for m in (a, b, a, b):
        assert_same(compiled(m, x), f(m, x))
    assert counter.frame_count == 1 and stats()["recompiles"] == 0


def test_identity_observed_is_guarded():
    torch.manual_seed(0)
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    weights = {a: 1.0, b: 3.0}

    def is_a(m, x):
        return m(x) * (1.0 if m is a else 2.0)

    def by_key(m, x):
        return m(x) * weights[m]

    def by_id(m, x):
        return m(x) + (id(m) == id(a))

    x = torch.randn(2, 4)
    for fn in (is_a, by_key, by_id):
        compiled = compile(fn, backend=CompileCounter())
        for m in (a, b, a):
            assert_same(compiled(m, x), fn(m, x))


def test_objects_identity_observed_is_guarded():
    class O:
        pass
    special, other = O(), O()

    def f(x, o):
        return x + 1 if o is special else x - 1

    def g(x, y):
        return x + 1 if x is y else x - 1

    x, y = torch.randn(2), torch.randn(2)
    cf, cg = compile(f, backend=CompileCounter()), compile(g, backend=CompileCounter())
    for o in (special, other, special):
        assert_same(cf(x, o), f(x, o))
    for a, b in ((x, y), (x, x), (x, y)):
        assert_same(cg(*clone_inputs((a, b))) if a is not b else cg(a, a), g(a, b))


def test_instance_with_backward_hook_does_not_share_code():
    """Another instance of the class with a backward hook (not traced) must not run code compiled
    for one without: the hook fires as in eager."""
    torch.manual_seed(0)
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    fired = []
    b.register_full_backward_hook(lambda m, gi, go: fired.append("b"))

    def f(m, x):
        return m(x).sum()

    compiled = compile(f, backend=CompileCounter())
    x = torch.randn(2, 3, requires_grad=True)
    compiled(a, x).backward()
    compiled(b, x).backward()
    assert fired == ["b"]
