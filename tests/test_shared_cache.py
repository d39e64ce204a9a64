"""Compiled code is kept per function (and backend and settings), as torch keeps it on the code
object: compiling the function again, or another instance of the same module class, reuses the
entries; their guards keep instances with other constants or shapes apart."""
import torch

import ember


class CountingBackend:
    def __init__(self):
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return gm.forward


def foo(x):
    return x.sin() + x.cos()


def test_same_function_compiled_three_times_compiles_once():
    backend = CountingBackend()
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(ember.compile(foo, backend=backend)(x), foo(x))
    assert backend.graphs == 1
    other = CountingBackend()  # another backend compiles its own
    ember.compile(foo, backend=other)(x)
    assert other.graphs == 1


class Scale(torch.nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.k = k
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return self.lin(x) * self.k


def test_instances_of_one_class_share_entries_and_stay_correct():
    backend = CountingBackend()
    modules = [Scale(2, 4), Scale(2, 4), Scale(3, 4), Scale(2, 5)]
    compiled = [ember.compile(m, backend=backend) for m in modules]
    inputs = [torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 5)]
    for _ in range(2):
        for m, c, x in zip(modules, compiled, inputs):
            torch.testing.assert_close(c(x), m(x), rtol=0, atol=0)
    assert backend.graphs == 3  # k=2 n=4 (shared by two instances), k=3, n=5
