"""Values of the program die when eager lets them die.

ember keeps the reasons of breaks and fallbacks; an exception kept with its traceback
keeps every frame from the raise up to the program's own frames alive, with their
locals. A tensor made in the frame must be freed when the frame returns (weakref
callbacks fire then, memory is returned), exactly as in eager.
"""
import gc
import weakref

import pytest
import torch
import torch._dynamo

import ember

from ember_test_helpers import compile


def _fn_break(x, fired):
    y = x + 1
    ref = weakref.ref(y, lambda r: fired.append("y"))
    torch._dynamo.graph_break()
    return ref


def _fn_unsupported_everywhere(x, fired):
    y = x + 1
    ref = weakref.ref(y, lambda r: fired.append("y"))
    print("side effect")
    return ref


@pytest.mark.parametrize("fn", [_fn_break, _fn_unsupported_everywhere], ids=lambda f: f.__name__)
def test_local_tensor_freed_when_frame_returns(fn, capsys):
    fired = []
    ref = compile(fn)(torch.ones(3), fired)
    assert fired == ["y"] and ref() is None  # freed at return, without a gc pass


def test_input_not_kept_alive_by_the_cache():
    def fn(x, lst):
        y = x.sin()
        print("break")
        return y * len(lst)

    x = torch.randn(2, 3, requires_grad=True)
    item = torch.randn(2)
    f = compile(fn)
    f(x, [item]).sum().backward()
    rx, ri = weakref.ref(x), weakref.ref(item)
    del x, item
    gc.collect()
    assert rx() is None and ri() is None


def _add(x):
    return x + x


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * 2


def test_inputs_freed_without_a_gc_pass():
    """Nothing of a finished trace (its translator, output graph, source memo) stays in a
    reference cycle holding the inputs: they die when the caller drops them, as in eager."""
    gc.disable()
    try:
        x = torch.rand(4)
        rx = weakref.ref(x)
        assert torch.equal(compile(_add)(x), x + x)
        del x
        assert rx() is None
        m = _Scaled()
        rm, rw = weakref.ref(m), weakref.ref(m.lin.weight)
        compile(m)(torch.rand(2, 4))
        del m
        assert rm() is None and rw() is None
    finally:
        gc.enable()


def test_dropped_compiled_function_frees_its_caches_and_graphs():
    """Generated code holds the compiled resume functions it calls as constants, and code objects
    are invisible to the cycle collector: a back reference from a resume function's cache to its
    owner (or a resume function that calls itself, a break in a loop) must not keep a dropped
    compiled function's caches, graphs and captured constants alive for good."""
    from ember.capture import cache as frame_cache

    def make():
        big = torch.ones(1000)  # a constant the graphs capture

        def fn(x):
            for i in range(3):
                x = x + big[:3]
                print("break", i)  # a break inside a loop: resume functions calling each other
            if x.sum() > 0:
                x = x * 2
            torch._dynamo.graph_break()
            return x
        return fn, weakref.ref(big)

    def run():
        fn, rbig = make()
        before = {id(c) for c in frame_cache.live_caches()}
        compiled = compile(fn)
        x = torch.ones(3)
        assert torch.equal(compiled(x), fn(x))
        caches = [weakref.ref(c) for c in frame_cache.live_caches() if id(c) not in before]
        assert caches, "the trace made no caches to check"
        return caches, rbig

    caches, rbig = run()
    gc.collect()
    # the most recently compiled functions' caches are kept for reuse (as torch keeps compiled code
    # on the code object) until they age out or ember.reset()
    assert any(r() is not None for r in caches)
    ember.reset()
    gc.collect()
    assert all(r() is None for r in caches)
    assert rbig() is None


def test_compiling_the_same_function_again_reuses_its_code():
    """torch.compile(fn)(x) twice, the first wrapper dropped: one frame compiled (torch keeps the
    compiled code with the code object); so does ember (recently used caches are kept)."""
    from torch._dynamo.testing import CompileCounter

    def fn(x):
        return x.sin() + 1

    ember.reset()
    cnt = CompileCounter()
    x = torch.randn(3)
    assert torch.equal(compile(fn, backend=cnt)(x), fn(x))
    gc.collect()
    assert torch.equal(compile(fn, backend=cnt)(x), fn(x))
    assert cnt.frame_count == 1


def test_model_of_a_local_class_is_freed_with_its_class():
    # A class defined in a function (as in most tests): the compiled forward's guards hold the
    # class, and its __init__'s cell holds the parameter. Keeping the cache among the recently
    # used (for module-level functions) would keep both alive after the model is gone; torch's
    # guards do not.
    import gc
    import weakref

    def make():
        param = torch.nn.Parameter(torch.randn(8, 8))

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.param = param

            def forward(self, x):
                return self.param * x

        return Model()
    model = make()
    ref = weakref.ref(model.param)
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(8, 8)
    assert torch.equal(compiled(x), model(x))
    del model, compiled
    gc.collect()
    assert ref() is None


def test_local_function_compiled_again_reuses_its_code_while_it_lives():
    counter = []

    def backend(gm, example_inputs):
        counter.append(gm)
        return gm

    def f(x):
        return x.sin() + 1
    x = torch.randn(3)
    for _ in range(3):
        assert torch.equal(ember.compile(f, backend=backend)(x), f(x))  # wrapper dropped each time
    assert len(counter) == 1


def test_optimizer_state_and_grads_freed_without_a_gc_pass():
    """An optimizer step compiled inside a step function (upstream test_grad_references_cleared /
    test_optim_state_references_cleared): its trace wrapped the param groups, the grads and the
    state through lazy trackers that refer back to their translator; once the trace is over they
    hold nothing, so zero_grad(set_to_none=True) frees the grad and dropping the optimizer frees
    its state, with the garbage collector off."""
    gc.disable()
    try:
        model = torch.nn.Linear(64, 64, bias=False)
        opt = torch.optim.Adadelta(model.parameters(), lr=0.01)

        def opt_step():
            opt.step()
        step = compile(opt_step, backend="eager")
        for _ in range(2):
            opt.zero_grad(True)
            model(torch.ones(64)).sum().backward()
            step()
        grad = weakref.ref(model.weight.grad)
        state = weakref.ref(opt.state[model.weight]["square_avg"])
        opt.zero_grad(True)
        assert grad() is None
        del opt, step, opt_step
        assert state() is None
    finally:
        gc.enable()


def test_inputs_of_a_frame_with_a_graph_break_freed_without_a_gc_pass(capsys):
    def f(xs, m):
        y = m(xs[0]).relu()
        sums = [t.sum() for t in xs]
        print("break")
        return y + xs[1] * len(sums)
    gc.disable()
    try:
        m = _Scaled()
        xs = [torch.rand(2, 4), torch.rand(2, 4)]
        expected = f(xs, m)
        got = compile(f, backend="aot_eager")(xs, m)
        assert torch.allclose(got, expected)
        refs = [weakref.ref(t) for t in xs] + [weakref.ref(m), weakref.ref(m.lin.weight)]
        del xs, m, got, expected
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


_SEEN: list = []


def _caught_error_at_a_break(x, y):
    t = y * 1
    try:
        t = y.view(7, 5)  # raises (4 elements): a break, its residual catches it for the handler
    except RuntimeError as e:
        _SEEN.append(type(e).__name__)
        t = t + 1
    return t + x


def _raises_at_the_end(x, y, n):
    z = (x * y).sin()
    if n > 1:
        raise ValueError("n " + str(n))
    return z


def test_inputs_freed_without_a_gc_pass_when_exceptions_were_raised():
    """Exceptions raised while tracing and compiling (the program's own, caught or not; a failed
    first trace before a break) hold their frames in their tracebacks: none of them stays in a
    reference cycle with a frame that holds the call's arguments."""
    warm = compile(_add)
    warm(torch.rand(2))  # (the first compile's lazy imports)
    cases = [(_caught_error_at_a_break, lambda: (torch.rand(4), torch.rand(4))),
             (_raises_at_the_end, lambda: (torch.rand(3), torch.rand(3), 1)),
             (_raises_at_the_end, lambda: (torch.rand(3), torch.rand(3), 2))]
    for fn, make in cases:
        ember.reset()
        cfn = compile(fn, backend="aot_eager")
        gc.collect()
        gc.disable()
        try:
            for _ in range(2):
                args = make()
                refs = [weakref.ref(a) for a in args if isinstance(a, torch.Tensor)]
                try:
                    cfn(*args)
                except ValueError:
                    pass
                del args
                assert [r() for r in refs] == [None] * len(refs), fn.__name__
        finally:
            gc.enable()
