"""AOT autograd, the hard cases (issue 5), each compared with eager PyTorch.

1. mutated inputs that alias other inputs (synthetic bases, dedup, per-call layouts)
2. one input mutated in the forward and again in the backward
3. metadata mutations (t_, transpose_, squeeze_, unsqueeze_, as_strided_, resize_)
4. mutations under no_grad, of views, of module buffers
5. backward_pass_autocast
6. the min-cut partitioner
"""
import pytest
import torch
import torch.nn as nn

import ember
from alias_helpers import run_and_compare
from helpers import compare
from inductor_tolerance import assert_close_inductor

VIAS = ["direct", "torch.compile"]


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


# ---- 1. mutated inputs that alias other inputs --------------------------------

def mul_first_read_second(a, b):
    a.mul_(2)
    return a * 3, b + 1


def add_second_read_both(a, b):
    b.add_(1)
    return (a * b.sum()).sin()


ALIAS_CASES = {
    "x, x.view(-1)": lambda r: (r.view(3, 4), r.view(3, 4).view(-1)),
    "a, a[0]": lambda r: (r.view(3, 4), r.view(3, 4)[0]),
    "a[0], a": lambda r: (r.view(3, 4)[0], r.view(3, 4)),
    "overlapping slices": lambda r: (r.view(-1)[0:8], r.view(-1)[4:12]),
    "transposed": lambda r: (r.view(3, 4), r.view(3, 4).t()),
}


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", list(ALIAS_CASES))
@pytest.mark.parametrize("fn", [mul_first_read_second, add_second_read_both])
def test_mutated_aliased_inputs(fn, case, grad, via):
    def make():
        root = torch.randn(12, requires_grad=grad)
        base = root * 1.0 if grad else root  # a non-leaf base: in-place ops on its views are allowed
        return [root], list(ALIAS_CASES[case](base))
    run_and_compare(fn, make, via=via)


@pytest.mark.parametrize("via", VIAS)
def test_same_tensor_twice_mutated(via):
    def f(a, b):
        a.add_(1)
        return a * b
    run_and_compare(f, lambda: (lambda x: ([x], [x, x]))(torch.randn(4)), via=via)


def test_same_tensor_twice_metadata_mutated():
    def f(a, b):
        a.t_()
        b.mul_(2)
        return a + 1, b.shape[0]
    run_and_compare(f, lambda: (lambda x: ([x], [x, x]))(torch.randn(2, 3)), via="direct", backward=False)


def test_unmutated_duplicates_are_deduplicated():
    def f(a, b, c):
        c.add_(1)
        return a * b + c
    x, c = torch.randn(4), torch.randn(4)
    compiled = ember.lookup_backend("aot_eager")(torch.fx.symbolic_trace(f), [x, x, c])
    out = compiled(x, x, c)
    torch.testing.assert_close(out, x * x + c)
    (key,) = compiled.variants
    assert key[0] == ((1, 0),) and key[1] == ()  # a dedup, no synthetic base
    assert len([n for n in compiled.graphs["forward" if "forward" in compiled.graphs else "inference"].graph.nodes
                if n.op == "placeholder"]) == 2


def test_aliasing_is_checked_per_call():
    def f(a, b):
        a.add_(1)
        return a + b
    compiled = None
    plain = lambda: (lambda x, y: ([x, y], [x, y]))(torch.randn(4), torch.randn(4))  # noqa: E731
    aliased = lambda: (lambda x: ([x], [x, x.view(4)]))(torch.randn(4))  # noqa: E731
    for make in (plain, aliased, plain, aliased):
        compiled = run_and_compare(f, make, compiled=compiled, backward=False)
    assert len(compiled.variants) == 2  # cached by aliasing pattern


def test_aliasing_per_call_with_grad():
    def f(a, b):
        a.mul_(2)
        return (a * b).sum()
    compiled = None
    plain = lambda: (lambda r: ([r], [r * 1.0, torch.randn(2, 3)]))(leaf(2, 3))  # noqa: E731
    aliased = lambda: (lambda r: ([r], [r * 1.0, None]))(leaf(2, 3))  # noqa: E731

    def aliased():  # noqa: F811
        r = leaf(2, 3)
        base = r * 1.0
        return [r], [base, base.view(2, 3)]
    for make in (plain, aliased, aliased, plain):
        compiled = run_and_compare(f, make, compiled=compiled)


def test_returning_an_aliased_input_gives_the_same_object():
    def f(a, b):
        a.mul_(2)
        return b
    x = torch.randn(3, 4)
    compiled = ember.lookup_backend("aot_eager")(torch.fx.symbolic_trace(f), [x, x[1]])
    b = x[1]
    assert compiled(x, b) is b


def test_aliased_inputs_without_common_base_requiring_grad_run_the_graph_as_is():
    # No synthetic base can express these inputs (shared storage, different autograd histories):
    # the call runs the captured graph itself, which is eager's answer.
    def f(a, b):
        a.mul_(2)
        return a + b

    def make():
        r = leaf(4)
        a = r * 1.0
        return [r], [a, a.detach().requires_grad_()]  # shares storage, different autograd history
    run_and_compare(f, make, calls=2)


def test_ember_compile_aliased_mutation():
    def f(a, b):
        a.add_(b.sum())
        return b * 2
    run_and_compare(f, lambda: (lambda r: ([r], [r, r[1:3]]))(torch.randn(5)), via="ember.compile", backward=False)


# ---- 2. the same input mutated in forward and backward -------------------------

class MutatesSavedInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, buf):
        ctx.save_for_backward(buf)
        return x * buf

    @staticmethod
    def backward(ctx, g):
        (buf,) = ctx.saved_tensors
        grad = g * buf
        buf.add_(1)  # the backward mutates the saved input in place
        return grad, None


def fw_and_bw_mutation(x, buf):
    buf.add_(1)  # forward mutation
    return MutatesSavedInBackward.apply(x, buf).sin()


@pytest.mark.parametrize("backend,partitioner", [("aot_eager", "default"), ("aot_eager", "min_cut"),
                                                 ("inductor", None)])
def test_input_mutated_in_forward_and_backward(backend, partitioner):
    def run(fn):
        torch.manual_seed(0)
        x = leaf(5)
        buf = torch.zeros(5)
        out = fn(x, buf)
        after_fw = buf.clone()
        out.sum().backward()
        return out.detach(), after_fw, buf, x.grad
    eager = run(fw_and_bw_mutation)
    with ember.config.patch(aot_eager_partitioner=partitioner or "default"):
        torch._dynamo.reset()
        compiled = torch.compile(fw_and_bw_mutation, backend=ember.lookup_backend(backend), fullgraph=True)
        got = run(compiled)
    for what, a, b in zip(["output", "buf after forward", "buf after backward", "grad"], eager, got):
        if backend == "inductor":
            assert_close_inductor(b, a, what=what)
        else:
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def test_forward_and_backward_mutations_are_tagged():
    captured = {}

    def backend(gm, example_inputs):
        from ember.backends import aot_autograd
        compiled = aot_autograd(keep_inference_input_mutations=True)(gm, example_inputs)
        captured["c"] = compiled
        return compiled
    torch._dynamo.reset()
    fn = torch.compile(fw_and_bw_mutation, backend=backend, fullgraph=True)
    x, buf = leaf(5), torch.zeros(5)
    fn(x, buf).sum().backward()
    torch.testing.assert_close(buf, torch.full((5,), 2.0))
    graphs = captured["c"].graphs
    tags = {n.meta.get("partitioner_tag") for n in graphs["joint"].graph.nodes
            if n.target is torch.ops.aten.copy_.default}
    assert tags == {"must_be_in_forward", "must_be_in_backward"}
    fw_copies = [n for n in graphs["forward"].graph.nodes if n.target is torch.ops.aten.copy_.default]
    bw_copies = [n for n in graphs["backward"].graph.nodes if n.target is torch.ops.aten.copy_.default]
    assert len(fw_copies) == 1 and len(bw_copies) == 1
    # the forward's new value is saved for the backward, never recomputed from the (mutated) input
    must_save = [n for n in graphs["joint"].graph.nodes if n.meta.get("ember_must_save")]
    assert must_save


def test_input_mutated_only_in_backward():
    class Bump(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, counter):
            ctx.save_for_backward(counter)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (counter,) = ctx.saved_tensors
            counter.add_(1)
            return g * 2, None

    def f(x, counter):
        return Bump.apply(x, counter).sum()
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=ember.lookup_backend("aot_eager"), fullgraph=True)
    x, counter = leaf(3), torch.zeros(())
    out = compiled(x, counter)
    assert counter.item() == 0
    out.backward()
    assert counter.item() == 1
    torch.testing.assert_close(x.grad, torch.full((3,), 2.0))


# ---- 3. metadata mutations -----------------------------------------------------

def t_(x, y):
    x.t_()
    return x * y


def transpose_(x, y):
    x.transpose_(0, 1)
    return x @ y


def squeeze_(x, y):
    x.squeeze_()
    return x + y[0]


def unsqueeze_(x, y):
    x.unsqueeze_(1)
    return x.sum(1) * y.sum()


def as_strided_(x, y):
    x.as_strided_((2, 2), (1, 3), 1)
    return x * y[:2, :2]


def resize_shrink(x, y):
    x.resize_(2, 2)
    return x * y[:2, :2]


def resize_grow(x, y):
    x.resize_(4, 4)
    x.fill_(1.5)
    return x.sum() * y


def t_then_mul_(x, y):
    x.t_()
    x.mul_(2)
    return x + y


@pytest.mark.parametrize("fn", [t_, transpose_, squeeze_, unsqueeze_, as_strided_, resize_shrink, t_then_mul_])
def test_metadata_mutations(fn):
    shapes = {squeeze_: (3, 1, 3), unsqueeze_: (3, 3)}
    shape = shapes.get(fn, (3, 3))

    def make():
        x = torch.randn(*shape)
        y = leaf(3, 3)
        return [x, y], [x, y]
    # called twice with fresh inputs: the second call must not reuse stale strides
    compiled = run_and_compare(fn, make)
    run_and_compare(fn, make, compiled=compiled)


def test_resize_growing_an_input_in_training_raises_clearly():
    from ember.exc import BackendCompilerFailed
    with pytest.raises(BackendCompilerFailed, match="resize"):
        run_and_compare(resize_grow, lambda: (lambda x, y: ([x, y], [x, y]))(torch.randn(3, 3), leaf(3, 3)))


def test_resize_growing_an_input_in_inference():
    def make():
        x, y = torch.randn(3, 3), torch.randn(3, 3)
        return [x, y], [x, y]
    compiled = run_and_compare(resize_grow, make, backward=False)
    run_and_compare(resize_grow, make, backward=False, compiled=compiled)


# ---- 4. no_grad mutation of parameters, views, module buffers ------------------

@pytest.mark.parametrize("via", ["torch.compile"])  # symbolic_trace drops the no_grad region
def test_optimizer_style_update_under_no_grad(via):
    def sgd_step(w, b, x, lr):
        loss = ((x @ w + b) ** 2).mean()
        with torch.no_grad():
            w.sub_(w * lr)
            b.mul_(0.5)
        return loss
    compare(sgd_step, lambda: (leaf(4, 3), leaf(3), torch.randn(5, 4), 0.1), via=via)


@pytest.mark.parametrize("via", VIAS)
def test_mutation_of_an_input_that_is_a_view(via):
    def f(v, y):
        v.mul_(y)
        return v.sum(), y.cos()

    def make():
        root = leaf(4, 4)
        return [root], [(root * 1.0)[1:3], leaf(2, 4)]
    run_and_compare(f, make, via=via)


@pytest.mark.parametrize("partitioner", ["default", "min_cut"])
@pytest.mark.parametrize("via", VIAS)
def test_batchnorm_running_stats(via, partitioner):
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU()).train()
    with ember.config.patch(aot_eager_partitioner=partitioner):
        compare(None, lambda: (torch.randn(2, 3, 6, 6, requires_grad=True),), via=via, module=module,
                rtol=1e-4, atol=1e-5)


# ---- 5. backward autocast -------------------------------------------------------

class FloatMatmulInBackward(torch.autograd.Function):
    """Pointwise forward (autocast leaves it alone); its backward does an fp32 matmul,
    which runs in bf16 exactly when the backward is under autocast."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w.sum()

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        gw = (x.t() @ g).float().sum() * torch.ones_like(w)
        return g * w.sum(), gw


def _autocast_fn(x, w):
    return FloatMatmulInBackward.apply(x, w).sin()


@pytest.mark.parametrize("setting,bw_autocast", [
    ("same_as_forward", True),
    ("off", False),
    ("device_type=cpu,dtype=bfloat16", True),
    ({"device_type": "cpu", "dtype": torch.bfloat16}, True),
])
def test_backward_pass_autocast(setting, bw_autocast):
    captured = {}

    def backend(gm, example_inputs):
        captured["c"] = ember.lookup_backend("aot_eager")(gm, example_inputs)
        return captured["c"]
    x, w = torch.randn(4, 4), leaf(4, 4)
    torch._dynamo.reset()
    fn = torch.compile(_autocast_fn, backend=backend, fullgraph=True)
    with ember.config.patch(backward_pass_autocast=setting), torch.autocast("cpu", dtype=torch.bfloat16):
        out = fn(x, w)  # compiled (and the backward traced) under an ambient bf16 autocast
    bw = captured["c"].graphs["backward"]
    dtypes = {n.meta["val"].dtype for n in bw.graph.nodes if n.target is torch.ops.aten.mm.default}
    assert dtypes == ({torch.bfloat16} if bw_autocast else {torch.float32}), dtypes
    out.sum().backward()
    # eager: the backward runs under autocast exactly when .backward() is called inside it
    w2 = w.detach().clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = _autocast_fn(x, w2)
        if bw_autocast:
            ref.sum().backward()
    if not bw_autocast:
        ref.sum().backward()
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w.grad, w2.grad)


def _matmul_chain(x, w):
    return (x @ w).relu() @ w.t()


def test_backward_pass_autocast_bad_value():
    from ember.exc import BackendCompilerFailed
    gm = torch.fx.symbolic_trace(_matmul_chain)
    with ember.config.patch(backward_pass_autocast="bf16 please"), pytest.raises(BackendCompilerFailed):
        ember.lookup_backend("aot_eager")(gm, [torch.randn(2, 2), leaf(2, 2)])


def autocast_region(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        h = x @ w
    return h.float().relu() * 2


@pytest.mark.parametrize("setting", ["same_as_forward", "off", "device_type=cpu,dtype=bfloat16"])
@pytest.mark.parametrize("via", ["torch.compile", "ember.compile"])
def test_in_graph_autocast_region(via, setting):
    def make():
        x, w = torch.randn(6, 8), leaf(8, 4)
        return [w], [x, w]
    with ember.config.patch(backward_pass_autocast=setting):
        run_and_compare(autocast_region, make, via=via, rtol=1e-2, atol=1e-2)


# ---- 6. min-cut partitioner -----------------------------------------------------

def _mlp(x, w1, w2):
    h = (x @ w1).relu()
    h = h.sin() * 2 + h.cos() * h
    return (h @ w2).tanh().sum()


def _compile_with(partitioner, fn, inputs):
    with ember.config.patch(aot_eager_partitioner=partitioner):
        return ember.lookup_backend("aot_eager")(torch.fx.symbolic_trace(fn), inputs)


def test_min_cut_saves_less_and_matches_eager():
    inputs = [torch.randn(8, 16), leaf(16, 32), leaf(32, 4)]
    default = _compile_with("default", _mlp, inputs).primary.compiled.partition
    mincut_c = _compile_with("min_cut", _mlp, inputs)
    mincut = mincut_c.primary.compiled.partition
    assert mincut.num_saved_tensors < default.num_saved_tensors
    assert mincut.recomputed > 0
    compare(_mlp, lambda: (torch.randn(8, 16), leaf(16, 32), leaf(32, 4)))
    with ember.config.patch(aot_eager_partitioner="min_cut"):
        compare(_mlp, lambda: (torch.randn(8, 16), leaf(16, 32), leaf(32, 4)), via="torch.compile")


def test_min_cut_never_recomputes_random_ops():
    def f(x, w):
        h = torch.nn.functional.dropout(x @ w, 0.5, training=True)
        return (h.sin() * h).sum()
    c = _compile_with("min_cut", f, [torch.randn(4, 4), leaf(4, 4)])
    bw_targets = {str(n.target) for n in c.graphs["backward"].graph.nodes if n.op == "call_function"}
    assert not any("bernoulli" in t or "rand" in t or t == "aten.native_dropout.default" for t in bw_targets), bw_targets


def test_min_cut_bad_partitioner_name():
    from ember.exc import BackendCompilerFailed
    with pytest.raises(BackendCompilerFailed):
        _compile_with("nope", _mlp, [torch.randn(8, 16), leaf(16, 32), leaf(32, 4)])


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("name", ["linear", "layernorm", "gelu_mlp"])
def test_min_cut_modules(name, via):
    torch.manual_seed(0)
    module = {
        "linear": nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)),
        "layernorm": nn.Sequential(nn.Linear(6, 6), nn.LayerNorm(6), nn.GELU(), nn.Linear(6, 2)),
        "gelu_mlp": nn.Sequential(nn.Linear(6, 24), nn.GELU(), nn.Dropout(0.0), nn.Linear(24, 6), nn.Tanh()),
    }[name]
    shape = (4, 8) if name == "linear" else (3, 6)
    with ember.config.patch(aot_eager_partitioner="min_cut"):
        compare(None, lambda: (torch.randn(*shape, requires_grad=True),), via=via, module=module,
                rtol=1e-4, atol=1e-5)


def test_min_cut_with_mutated_input_saves_mutation_source():
    def f(x, buf, w):
        buf.mul_(2)
        return ((x @ w) * buf).sin().sum()
    with ember.config.patch(aot_eager_partitioner="min_cut"):
        compare(f, lambda: (torch.randn(3, 4), torch.randn(3, 5), leaf(4, 5)))
        compare(f, lambda: (torch.randn(3, 4), torch.randn(3, 5), leaf(4, 5)), via="torch.compile")


def test_inductor_uses_min_cut():
    def f(x, w):
        return ((x @ w).relu().sin() * 3).sum()
    compare(f, lambda: (torch.randn(4, 8), leaf(8, 8)), backend="inductor", via="torch.compile")


def data_and_metadata_mutated_aliases(x, v):
    v.add_(1)
    x.t_()
    v.mul_(2)
    return x.sum(0)


@pytest.mark.parametrize("via", ["direct", "ember.compile"])  # (Dynamo refuses t_ on an input)
def test_alias_with_data_and_metadata_mutations_runs_the_graph_as_is(via):
    # x has its metadata mutated (t_) and v, a view of x, its data: no synthetic base expresses
    # that, so such calls run the captured graph itself (was: a compile error / frame fallback)
    def make():
        r = torch.arange(6.).reshape(2, 3)
        return [r], [r, r[:, 0]]
    run_and_compare(data_and_metadata_mutated_aliases, make, via=via, backward=False, calls=2)


def test_resume_function_with_aliased_inputs_mutated_does_not_fall_back():
    # the same aliasing reached through a graph break (the resume function gets x and its view)
    @torch.compiler.disable
    def opaque():
        pass

    def f(x):
        v = x[:, 0]
        v.add_(1)
        opaque()
        x.t_()
        v.mul_(2)
        return x.sum(0)
    ember.reset()
    compiled = ember.compile(f, backend="aot_eager")
    for _ in range(2):
        a, b = torch.arange(6.).reshape(2, 3), torch.arange(6.).reshape(2, 3)
        expected = f(a)
        torch.testing.assert_close(compiled(b), expected)
        assert b.shape == a.shape and b.stride() == a.stride()
        torch.testing.assert_close(b, a)
    assert ember.stats()["fallbacks"] == 0, ember.stats()
