"""Compiled autograd (issue 12): grads, hooks, counts and aliasing against eager PyTorch.

Every test runs the same train step twice from identical copies: once with the eager autograd
engine, once inside ``ember.compiled_autograd.enable(backend)``, and compares gradients (and
hook side effects / call order where eager defines it).
"""
import contextlib
import copy
import warnings

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import REFERENCE

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's compiled autograd")

ca = ember.compiled_autograd


@pytest.fixture(autouse=True)
def _fresh():
    ca.reset()
    yield
    ca.disable()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))


def grads_of(model):
    return [p.grad for p in model.parameters()]


def assert_grads(a, b, atol=1e-6, rtol=1e-5):
    for ga, gb in zip(grads_of(a), grads_of(b)):
        if ga is None or gb is None:
            assert ga is None and gb is None
        else:
            torch.testing.assert_close(ga, gb, atol=atol, rtol=rtol)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("compiled_forward", [False, True])
def test_mlp_train_steps(backend, compiled_forward):
    ref = mlp()
    model = copy.deepcopy(ref)
    fwd = ember.compile(model, backend="aot_eager") if compiled_forward else model
    x = torch.randn(5, 8)
    for step in range(4):
        set_to_none = step != 2  # (step 2 accumulates into zeroed .grads: another structure)
        ref.zero_grad(set_to_none=set_to_none)
        model.zero_grad(set_to_none=set_to_none)
        ref(x + step).pow(2).mean().backward()
        with ca.enable(backend):
            fwd(x + step).pow(2).mean().backward()
        assert_grads(model, ref)
    c = ca.counters
    assert c.backwards == 4 and c.traced == 2 and c.cache_hits == 2 and c.fallbacks == 0
    assert (c.inlined_aot > 0) == compiled_forward


def test_accumulates_in_place_like_eager():
    ref = mlp()
    model = copy.deepcopy(ref)
    x = torch.randn(3, 8)
    for m in (ref, model):
        m(x).sum().backward()
    held = [p.grad for p in model.parameters()]
    ref(x).sum().backward()
    for _ in range(2):
        with ca.enable("aot_eager"):
            model(x).sum().backward()
        model.zero_grad(set_to_none=False)
        with ca.enable("aot_eager"):
            model(x).sum().backward()
        assert all(p.grad is h for p, h in zip(model.parameters(), held))  # same objects, as eager
    ref.zero_grad(set_to_none=False)
    ref(x).sum().backward()
    assert_grads(model, ref)


def test_graph_break_in_forward_gives_one_backward_graph():
    torch.manual_seed(0)
    w1, w2 = torch.randn(8, 8, requires_grad=True), torch.randn(8, 8, requires_grad=True)

    def f(x):
        y = (x @ w1).relu()
        print("", end="")  # graph break
        return (y @ w2).sin().sum()

    cf = ember.compile(f, backend="aot_eager")
    x = torch.randn(4, 8)
    f(x).backward()
    expected = (w1.grad.clone(), w2.grad.clone())
    for _ in range(3):
        w1.grad = w2.grad = None
        with ca.enable("eager"):
            cf(x).backward()
        torch.testing.assert_close(w1.grad, expected[0])
        torch.testing.assert_close(w2.grad, expected[1])
    assert ca.counters.traced == 1 and ca.counters.cache_hits == 2
    assert ca.counters.inlined_aot == 2  # both frames' AOT backwards in the one graph


class Scale(torch.autograd.Function):
    calls = 0

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        ctx.factor = float(w.sum())  # metadata of this call: must be read at run time
        return x * w

    @staticmethod
    def backward(ctx, g):
        Scale.calls += 1
        x, w = ctx.saved_tensors
        return g * w * ctx.factor, (g * x).sum(0)


@pytest.mark.parametrize("compiled_forward", [False, True])
def test_autograd_function_runs_user_backward_each_time(compiled_forward):
    torch.manual_seed(0)
    w = torch.randn(6, requires_grad=True)

    def f(x):
        return Scale.apply(x.sin(), w).sum()

    cf = ember.compile(f, backend="aot_eager") if compiled_forward else f
    Scale.calls = 0
    for step in range(3):
        x = torch.randn(4, 6, requires_grad=True)
        w.data.mul_(1.5)  # a different ctx.factor each step
        w.grad = None
        f(x).backward()
        eager_x, eager_w = x.grad, w.grad
        x.grad = w.grad = None
        with ca.enable("aot_eager"):
            cf(x).backward()
        torch.testing.assert_close(x.grad, eager_x)
        torch.testing.assert_close(w.grad, eager_w)
    assert Scale.calls == 6  # the user's backward ran in every compiled backward too
    assert ca.counters.traced == 1 and ca.counters.cache_hits == 2


class TwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        out = torch.zeros_like(ga) if ga is not None else None
        if ga is not None:
            out = out + 2 * ga
        if gb is not None:
            out = 3 * gb if out is None else out + 3 * gb
        return out


def test_function_without_materialized_grads():
    x = torch.randn(4, requires_grad=True)
    a, _ = TwoOut.apply(x)
    a.sum().backward()
    expected = x.grad
    x.grad = None
    with ca.enable("eager"):
        a, _ = TwoOut.apply(x)
        a.sum().backward()
    torch.testing.assert_close(x.grad, expected)
    assert ca.counters.fallbacks == 0


def _hooked_step(model, x, log):
    h = model[0](x)
    h.register_hook(lambda g: log.append(("h", g.sum().item())) or g * 2)
    h.retain_grad()
    y = model[2](model[1](h))
    y.register_hook(lambda g: log.append(("y", g.sum().item())))
    y.pow(2).sum().backward()
    return h


def test_tensor_hooks_retain_grad_and_post_accumulate_hooks():
    ref = mlp()
    model = copy.deepcopy(ref)
    x = torch.randn(3, 8)
    logs = {}
    for name, m in (("eager", ref), ("ca", model)):
        log = logs[name] = []
        m[0].weight.register_hook(lambda g, log=log: log.append(("w0", g.sum().item())) or g + 1)
        for i, p in enumerate(m.parameters()):
            p.register_post_accumulate_grad_hook(lambda p, i=i, log=log: log.append(("post", float(p.grad.sum()))))
    retained = {}
    for step in range(3):
        retained["eager"] = _hooked_step(ref, x, logs["eager"]).grad
        with ca.enable("aot_eager"):
            retained["ca"] = _hooked_step(model, x, logs["ca"]).grad
        assert_grads(model, ref, atol=1e-5)
        torch.testing.assert_close(retained["ca"], retained["eager"])
    # tensor hooks and post-accumulate hooks: the same calls, in eager's order, same gradients
    assert [k for k, _ in logs["ca"]] == [k for k, _ in logs["eager"]]
    assert sum(k == "post" for k, _ in logs["ca"]) == 3 * 4  # (the step uses 4 parameters)
    for (_, a), (_, b) in zip(logs["ca"], logs["eager"]):
        assert a == pytest.approx(b, rel=1e-4, abs=1e-4)
    assert ca.counters.traced == 2 and ca.counters.fallbacks == 0


def test_retain_graph_and_second_backward_error():
    torch.manual_seed(0)
    w = torch.randn(5, requires_grad=True)
    with ca.enable("eager"):
        loss = (w.exp() * 3).sum()
        loss.backward(retain_graph=True)
        loss.backward()
        torch.testing.assert_close(w.grad, 2 * 3 * w.exp())
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            loss.backward()
    loss = (w.exp() * 3).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()  # (eager's own error, for comparison)


def test_autograd_grad_leaf_and_nonleaf_inputs():
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    b = torch.randn(4, requires_grad=True)
    x = torch.randn(3, 4)

    def run():
        h = x @ w
        out = (h + b).tanh().sum()
        return torch.autograd.grad(out, [w, h, b])

    expected = run()
    for _ in range(2):
        with ca.enable("aot_eager"):
            got = run()
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)
    assert w.grad is None and b.grad is None  # grad() accumulates nothing
    assert ca.counters.traced == 1 and ca.counters.cache_hits == 1
    unused = torch.randn(2, requires_grad=True)
    with ca.enable("eager"):
        with pytest.raises(RuntimeError):
            torch.autograd.grad((x @ w).sum(), [w, unused])


def test_backward_inputs_accumulates_only_those():
    w1, w2 = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    with ca.enable("eager"):
        (w1 * w2).sum().backward(inputs=[w1])
    assert w2.grad is None
    torch.testing.assert_close(w1.grad, w2.detach())


def test_shared_parameters_between_modules():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 8)
    head = nn.Linear(8, 10, bias=False)
    head.weight = emb.weight  # tied
    ref = nn.ModuleDict({"emb": emb, "head": head})
    model = copy.deepcopy(ref)
    assert model["emb"].weight is model["head"].weight
    idx = torch.randint(0, 10, (4, 5))
    for step in range(2):
        ref.zero_grad()
        model.zero_grad()
        ref["head"](ref["emb"](idx)).logsumexp(-1).sum().backward()
        with ca.enable("aot_eager"):
            model["head"](model["emb"](idx)).logsumexp(-1).sum().backward()
        torch.testing.assert_close(model["emb"].weight.grad, ref["emb"].weight.grad)


def test_graph_that_clears_its_inputs_keeps_the_grad_targets():
    seen = []

    def clearing_backend(gm, example_inputs):
        def run(args):
            seen.append(len(args))
            out = gm(*args)
            args.clear()  # boxed convention: the callee frees its inputs
            return out
        run._boxed_call = True
        return run

    ref = mlp()
    model = copy.deepcopy(ref)
    x = torch.randn(2, 8)
    for step in range(3):
        ref(x).sum().backward()
        with ca.enable(clearing_backend):
            model(x).sum().backward()
        assert_grads(model, ref)
    assert seen and all(n > 0 for n in seen)


def test_grads_do_not_alias_inputs_or_each_other():
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    g = torch.randn(3)
    for _ in range(2):
        a.grad = b.grad = None
        with ca.enable("aot_eager"):
            (a + b).backward(g)
        assert a.grad is not b.grad and a.grad.data_ptr() != b.grad.data_ptr()
        assert a.grad.data_ptr() != g.data_ptr()
        torch.testing.assert_close(a.grad, g)
        torch.testing.assert_close(b.grad, g)
        a.grad = None
        with ca.enable("eager"):
            a.backward(g)  # a leaf root: eager copies the gradient it was given
        assert a.grad.data_ptr() != g.data_ptr()
        torch.testing.assert_close(a.grad, g)


def test_grad_layout_follows_the_parameter():
    w = torch.randn(4, 6).t().requires_grad_()  # a transposed leaf
    with ca.enable("eager"):
        (w * 2).sum().backward()
    assert w.grad.stride() == w.stride()
    torch.testing.assert_close(w.grad, torch.full_like(w, 2.0))


def test_new_structure_traces_new_graph():
    model = mlp()
    with ca.enable("eager"):
        for batch in (2, 2, 3, 3, 2):
            model.zero_grad(set_to_none=True)
            model(torch.randn(batch, 8)).sum().backward()
    assert ca.counters.traced == 2 and ca.counters.cache_hits == 3


def test_double_backward_runs_eagerly_with_a_warning():
    x = torch.randn(3, requires_grad=True)
    with ca.enable("eager"):
        with pytest.warns(UserWarning, match="create_graph"):
            (g,) = torch.autograd.grad(x.pow(3).sum(), x, create_graph=True)
        g.sum().backward()
    torch.testing.assert_close(x.grad, 6 * x.detach())
    assert ca.counters.fallbacks == 1


def test_module_backward_hooks_run_eagerly():
    model = mlp()
    calls = []
    model[0].register_full_backward_hook(lambda m, gi, go: calls.append(1))
    ref = copy.deepcopy(model)
    x = torch.randn(2, 8)
    with ca.enable("eager"):
        with pytest.warns(UserWarning, match="module backward hook"):
            model(x).sum().backward()
    ref(x).sum().backward()
    assert_grads(model, ref)
    assert calls == [1, 1]


def test_global_switch_and_disable():
    w = torch.randn(3, requires_grad=True)
    ca.enable("eager")
    (w * 2).sum().backward()
    ca.disable()
    (w * 2).sum().backward()
    assert ca.counters.backwards == 1
    torch.testing.assert_close(w.grad, torch.full((3,), 4.0))
    assert torch.autograd.backward.__module__.startswith("torch")


@pytest.mark.slow
def test_inductor_backend_with_compiled_forward():
    ref = mlp()
    model = copy.deepcopy(ref)
    fwd = ember.compile(model, backend="inductor")
    x = torch.randn(5, 8)
    for step in range(3):
        ref.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
        ref(x).pow(2).mean().backward()
        with ca.enable("inductor"):
            fwd(x).pow(2).mean().backward()
        assert_grads(model, ref, atol=1e-5, rtol=1e-4)
    assert ca.counters.traced == 1 and ca.counters.cache_hits == 2 and ca.counters.inlined_aot == 1


def _optimizer_in_backward(model):
    opts = {p: torch.optim.SGD([p], lr=0.1) for p in model.parameters()}

    def step(p):
        opts[p].step()
        opts[p].zero_grad(set_to_none=True)
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step)


def _some_backend(gm, example_inputs):
    _some_backend.compiled += 1
    return gm.forward


_some_backend.compiled = 0


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "callable"])
def test_optimizer_in_backward(backend):
    """A post-accumulate hook changes a parameter the rest of the backward may read: only a backend
    known to run the graph in order compiles it; another runs the graph as it is, with a warning."""
    _some_backend.compiled = 0
    if backend == "callable":
        backend = _some_backend
    ref = mlp()
    model = copy.deepcopy(ref)
    _optimizer_in_backward(ref)
    _optimizer_in_backward(model)
    x = torch.randn(4, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(4):
            ref(x).pow(2).mean().backward()
            with ca.enable(backend):
                model(x).pow(2).mean().backward()
            for p, q in zip(model.parameters(), ref.parameters()):
                torch.testing.assert_close(p, q)
                assert p.grad is None and q.grad is None
    assert ca.counters.traced == 1 and ca.counters.cache_hits == 3
    uncompiled = [w for w in caught if "runs uncompiled" in str(w.message)]
    assert len(uncompiled) == (1 if backend is _some_backend else 0)
    assert _some_backend.compiled == 0


class Broadcasting(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g.expand(3, *g.shape) * (2 / 3) if ctx.expand else g.new_ones(7)


@pytest.mark.parametrize("expand", [True, False])
def test_function_gradient_checked_like_the_engine(expand):
    def run():
        x = torch.randn(4, requires_grad=True)
        y = Broadcasting.apply(x)
        y.grad_fn.expand = expand
        y.sum().backward()
        return x.grad

    if expand:  # a gradient the input's shape expands to: summed back
        for _ in range(2):
            with ca.enable("aot_eager"):
                torch.testing.assert_close(run(), torch.full((4,), 2.0))
        torch.testing.assert_close(run(), torch.full((4,), 2.0))
    else:
        with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
            run()
        with ca.enable("aot_eager"):
            with pytest.raises(RuntimeError, match="invalid gradient at index 0"):
                run()


def test_user_exception_in_a_hook_propagates():
    w = torch.randn(3, requires_grad=True)
    calls = []

    def bad(g):
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("from the hook")

    for step in range(3):  # traced (no error), then the compiled graph raises
        w.grad = None
        with ca.enable("aot_eager"):
            h = w * 2
            h.register_hook(bad)
            if step == 0:
                h.sum().backward()
            else:
                with pytest.raises(ValueError, match="from the hook"):
                    h.sum().backward()
    assert ca.counters.traced == 1 and ca.counters.cache_hits == 2


def test_hooked_tensor_changed_in_place_runs_eagerly():
    def run(compiled):
        w = torch.ones(3, requires_grad=True)
        log = []
        h = w * 2
        h.register_hook(lambda g: log.append(("before", g.clone())))
        h.mul_(3)
        h.register_hook(lambda g: log.append(("after", g.clone())))
        with ca.enable("eager") if compiled else contextlib.nullcontext():
            h.sum().backward()
        return w.grad, log

    expected_grad, expected_log = run(False)
    with pytest.warns(UserWarning, match="changed in place"):
        grad, log = run(True)
    torch.testing.assert_close(grad, expected_grad)
    assert [k for k, _ in log] == [k for k, _ in expected_log]
    for (_, a), (_, b) in zip(log, expected_log):
        torch.testing.assert_close(a, b)


def test_distributed_runs_eagerly(tmp_path):
    import torch.distributed as dist
    if not dist.is_available():
        pytest.skip("torch.distributed is not available in this build")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        w = torch.randn(3, requires_grad=True)
        with ca.enable("eager"):
            with pytest.warns(UserWarning, match="torch.distributed"):
                (w * 2).sum().backward()
        torch.testing.assert_close(w.grad, torch.full((3,), 2.0))
        assert ca.counters.fallbacks == 1 and ca.counters.traced == 0
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("on", ["cpp_node", "function_node"])
def test_hooks_on_nodes_run_as_in_eager(on):
    """A hook registered on a Node (grad_fn.register_hook / register_prehook) cannot be listed
    from Python: while one is live, the backward runs eagerly — the hooks run, in eager's order."""
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    def run(compiled):
        torch.manual_seed(0)
        x = torch.randn(3, requires_grad=True)
        calls = []
        y = Square.apply(x) if on == "function_node" else x.sin()
        y.grad_fn.register_prehook(lambda go: calls.append("pre"))
        handle = y.grad_fn.register_hook(lambda gi, go: calls.append("post"))
        z = (y * 3).cos()
        if compiled:
            with ca.enable("eager"):
                with pytest.warns(UserWarning, match="hook registered on an autograd Node"):
                    z.sum().backward()
        else:
            z.sum().backward()
        handle.remove()
        return calls, x.grad

    got_calls, got_grad = run(True)
    want_calls, want_grad = run(False)
    assert got_calls == want_calls == ["pre", "post"]
    torch.testing.assert_close(got_grad, want_grad)


def test_a_removed_or_dead_node_hook_does_not_stop_compiling():
    w = torch.randn(3, requires_grad=True)
    y = w.sin()
    y.grad_fn.register_hook(lambda gi, go: None).remove()
    del y
    y = w.sin()
    y.grad_fn.register_prehook(lambda go: None)
    del y  # its Node (and the hook with it) is gone
    before = ca.counters.backwards
    with ca.enable("eager"):
        (w * 2).sum().backward()
    assert ca.counters.backwards == before + 1  # compiled, not run eagerly


def test_hooks_on_the_nodes_of_a_traced_graph_do_not_stop_compiling():
    # torch's AOTAutograd (a backend built with aot_autograd) registers stack-trace hooks on the
    # Nodes of its fake joint graph and keeps that graph: no real backward runs those Nodes, so
    # they must not make every later compiled backward run eagerly (all of tests/autograd did,
    # after a test using such a backend)
    from functorch.compile import nop
    from torch._dynamo.backends.common import aot_autograd
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            ctx.y = z * 2
            return ctx.y

        @staticmethod
        def backward(ctx, g):
            return g * 2

    f = ember.compile(lambda x: Twice.apply(x.sin()).sum(), backend=aot_autograd(fw_compiler=nop, bw_compiler=nop),
                      dynamic=True)
    for n in (3, 4):
        x = torch.randn(n, requires_grad=True)
        f(x).backward()
    w = torch.randn(3, requires_grad=True)
    before = ca.counters.backwards
    with ca.enable("eager"):
        (w * 2).sum().backward()
    assert ca.counters.backwards == before + 1 and ca.counters.fallbacks == 0
    assert torch.equal(w.grad, torch.full((3,), 2.0)) and torch.allclose(x.grad, 2 * x.detach().cos())
    del f
