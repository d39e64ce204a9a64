"""Compilation is thread-safe: threads making first calls at once get eager's answers, no fallback.

Tracing uses process-wide torch state (make_fx's patcher, fake-tensor memos), so
ember compiles under one lock (ember/locking.py); a thread that waited for it
uses the entry another thread compiled meanwhile instead of compiling a duplicate.
"""
import threading
import warnings

import pytest
import torch

import ember

N_THREADS = 8


def _hammer(work, n=N_THREADS):
    """Run ``work(i)`` in ``n`` threads released at once; re-raise the first failure."""
    barrier = threading.Barrier(n)
    errors, caught = [], []

    def run(i):
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                barrier.wait()
                work(i)
            caught.extend(str(x.message) for x in w if "ember" in str(x.message))
        except BaseException as e:  # noqa: BLE001 — reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    assert not caught, caught


def _programs():
    def pointwise(x, y):
        return (x * y + 1).sin().relu().sum(0) + y.t().sum()

    def with_break(x, y):
        z = x.cos() @ y
        print("", end="")  # graph break: a resume function compiled on first call too
        return z.tanh() * 2

    def mutates(x, y):
        y.add_(1)
        return x * y

    def views(x, y):
        x.t_()
        return x[0], (x + y).reshape(-1)

    return [pointwise, with_break, mutates, views]


def _inputs(i, name):
    g = torch.Generator().manual_seed(i)
    x = torch.randn(4, 4, generator=g, requires_grad=(i % 2 == 0 and name != "views"))
    y = torch.randn(4, 4, generator=g)
    return x, y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_first_calls_from_many_threads(backend):
    for _round in range(3):
        ember.reset()
        programs = _programs()
        compiled = [ember.compile(p, backend=backend) for p in programs]

        def work(i):
            k = i % len(programs)
            name = programs[k].__name__
            for _ in range(3):
                xe, ye = _inputs(i, name)
                xc, yc = _inputs(i, name)
                expected = programs[k](xe, ye)
                got = compiled[k](xc, yc)
                for e, c in zip(torch.utils._pytree.tree_leaves(expected), torch.utils._pytree.tree_leaves(got)):
                    torch.testing.assert_close(c, e)
                    assert c.requires_grad == e.requires_grad
                for e, c in ((xe, xc), (ye, yc)):
                    torch.testing.assert_close(c, e)
                    assert c.stride() == e.stride()
                if xe.requires_grad:
                    sum(o.sum() for o in torch.utils._pytree.tree_leaves(expected)).backward()
                    sum(o.sum() for o in torch.utils._pytree.tree_leaves(got)).backward()
                    torch.testing.assert_close(xc.grad, xe.grad)

        _hammer(work)
        stats = ember.stats()
        assert stats["fallbacks"] == 0, stats
        # no duplicate entries: per program, one entry per requires_grad flavour of x (+ the
        # resume function of with_break), however many threads raced for the first call
        assert stats["recompiles"] <= 4, stats
        assert stats["frames"] <= 2 * len(programs) + 2, stats


def test_many_threads_one_function_compile_once():
    def f(x):
        return (x * 2).sin() + 1

    for _round in range(3):
        ember.reset()
        g = ember.compile(f, backend="aot_eager")

        def work(i):
            x = torch.randn(3, 5)
            torch.testing.assert_close(g(x), f(x))

        _hammer(work, n=12)  # more threads than the recompile limit: none may give up
        assert ember.stats()["frames"] == 1
        assert ember.stats()["recompiles"] == 0


def test_first_backward_from_many_threads():
    """The backward graph is compiled at the first backward(): several threads at once."""
    def f(x, w):
        return (x @ w).tanh().sum()

    ember.reset()
    g = ember.compile(f, backend="aot_eager")
    w0 = torch.randn(5, 3)
    g(torch.randn(4, 5), w0.clone().requires_grad_())  # compile the forward; backward not yet
    outs = []
    for i in range(N_THREADS):
        w = w0.clone().requires_grad_()
        x = torch.randn(4, 5)
        outs.append((x, w, g(x, w)))

    def work(i):
        x, w, out = outs[i]
        out.backward()
        w_ref = w0.clone().requires_grad_()
        f(x, w_ref).backward()
        torch.testing.assert_close(w.grad, w_ref.grad)

    _hammer(work)


def test_alias_variants_compiled_at_call_from_many_threads():
    """A graph that mutates an input compiles a variant per aliasing layout at call time."""
    def f(a, b):
        a.mul_(2)
        return a + b

    ember.reset()
    g = ember.compile(f, backend="aot_eager")
    g(torch.randn(6), torch.randn(6))  # the plain layout

    def work(i):
        base = torch.randn(6)
        ref = base.clone()
        expected = f(ref, ref)
        got = g(base, base)  # both arguments the same tensor: a new layout
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(base, ref)

    _hammer(work)
