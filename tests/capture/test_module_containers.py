"""Indexing and slicing container modules inside compiled code.

``seq[:k]`` on an ``nn.Sequential`` is a new Sequential of the same submodules
(callable); ``ModuleList`` / ``ParameterList`` slices iterate, index, slice and
measure like the container. All compile into one graph with the parameters as
graph inputs, and match eager (outputs and gradients).
"""
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, check_module_same, compile


class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
        self.scales = nn.ParameterList([nn.Parameter(torch.randn(4)) for _ in range(3)])

    def forward(self, x):
        y = self.seq[:2](x)                 # a Sequential slice is callable
        y = self.seq[2:][0](y)              # index into a slice
        y = self.seq[1:][1:][1:](y)         # slices of slices
        for layer in self.layers[::-1]:     # reversed ModuleList slice
            y = layer(y)
        for p in self.scales[1:]:
            y = y * p
        y = y + self.scales[-1] + len(self.layers[1:]) + len(self.seq[:-1])
        return self.heads["a"](y) + self.heads["b"](y)


def test_container_slices_compile():
    counter = check_module_same(Containers, torch.randn(2, 4, requires_grad=True), graphs=1,
                                check_cache=True)
    assert counter.frame_count == 1


def test_sequential_slice_escaping_is_a_real_sequential():
    m = Containers()

    def fn(x):
        return m.seq[1:3], x + 1
    out, _ = compile(fn, backend=CompileCounter(), fullgraph=True)(torch.randn(2))
    eager, _ = fn(torch.randn(2))
    assert type(out) is nn.Sequential and list(out._modules) == list(eager._modules)
    assert all(a is b for a, b in zip(out, eager))


def test_slice_index_out_of_range_raises_like_eager():
    m = Containers()

    def fn(x):
        try:
            return m.layers[1:][5](x)
        except IndexError:
            return x - 1
    x = torch.randn(2, 4)
    torch.testing.assert_close(compile(fn, backend=CompileCounter(), fullgraph=True)(x), fn(x))
