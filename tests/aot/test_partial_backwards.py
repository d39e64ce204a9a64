"""Several backwards through one compiled graph, each for some of its outputs.

A compiled graph is one autograd node for many eager ops. Eager frees a node's
saved tensors when that node runs backward (without retain_graph); a backward
for one output leaves the nodes only other outputs reach untouched, and a later
backward through those outputs still works. The GAN step is the common case:

    fake = G(z)
    d_loss = D(real) + D(fake.detach());  d_loss.backward()   # G's nodes do not run
    g_loss = D(fake);                     g_loss.backward()   # now they do

The compiled graph returns ``fake`` and ``d_loss``: the first backward must not
free what ``fake``'s gradient needs (it did: "backward through the graph a second
time", also under torch.compile), and a second backward through a node that did
run must still raise eager's error (see ember/aot/saved.py, ``use_masks``).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

import ember

TWICE = "second time"


def _compiled(fn, partitioner):
    compiled = ember.compile(fn, backend="aot_eager")

    def run(*args):
        with ember.config.patch(aot_eager_partitioner=partitioner):
            return compiled(*args)
    return run


def _gan():
    torch.manual_seed(0)
    return nn.Linear(2, 3), nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_gan_step_backwards_inside_the_compiled_function(partitioner):
    def run(compiled):
        G, D = _gan()

        def step(z, real):
            fake = G(z)
            d_loss = D(real).sum() + D(fake.detach()).sum()
            d_loss.backward()
            g_loss = D(fake).sum()
            g_loss.backward()
            return d_loss.detach(), g_loss.detach()

        fn = _compiled(step, partitioner) if compiled else step
        torch.manual_seed(1)
        outs = [fn(torch.randn(4, 2), torch.randn(4, 3)) for _ in range(2)]
        return outs, [p.grad.clone() for p in [*G.parameters(), *D.parameters()]]

    (want, want_grads), (got, got_grads) = run(False), run(True)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_grads, want_grads)


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_backward_for_each_output_in_turn(partitioner):
    # x is saved twice, by two eager nodes: one per output
    def f(x, w1, w2):
        return (x * w1).sin(), (x * w2).cos(), x.exp()

    def run(compiled):
        torch.manual_seed(0)
        x, w1, w2 = (torch.randn(3, requires_grad=True) for _ in range(3))
        a, b, c = (_compiled(f, partitioner) if compiled else f)(x, w1, w2)
        grads = []
        for loss in (a.sum(), b.sum(), c.sum()):
            loss.backward()
            grads.append([None if t.grad is None else t.grad.clone() for t in (x, w1, w2)])
        return grads

    torch.testing.assert_close(run(True), run(False))


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_second_backward_through_a_node_that_ran_raises_like_eager(partitioner):
    # both outputs come from h = x.exp(): the first backward runs exp's node and frees h
    def f(x):
        h = x.exp()
        return h * 2, h * 3

    for compiled in (False, True):
        x = torch.randn(3, requires_grad=True)
        a, b = (_compiled(f, partitioner) if compiled else f)(x)
        a.sum().backward()
        with pytest.raises(RuntimeError, match=TWICE):
            b.sum().backward()


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
def test_same_output_twice_raises_like_eager(partitioner):
    def f(x, w):
        return (x * w).sin(), (x * w).cos()

    for compiled in (False, True):
        x, w = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
        a, b = (_compiled(f, partitioner) if compiled else f)(x, w)
        b.sum().backward()
        a.sum().backward()
        with pytest.raises(RuntimeError, match=TWICE):
            a.sum().backward()


def test_retain_graph_keeps_everything():
    def f(x):
        h = x.exp()
        return h * 2, h * 3

    def run(compiled):
        x = torch.ones(3, requires_grad=True)
        a, b = (ember.compile(f, backend="aot_eager") if compiled else f)(x)
        a.sum().backward(retain_graph=True)
        b.sum().backward(retain_graph=True)
        (a.sum() + b.sum()).backward()
        return x.grad

    torch.testing.assert_close(run(True), run(False))
