"""torch.autograd.Function.apply traced into the graph (ember/capture/variables/autograd_function.py).

Every case is compared with eager: outputs, requires_grad, gradients. Backwards that are not the
true derivative of forward (``3 * g``) show that the graph differentiates with the user's backward.
"""
import pytest
import torch
from torch.autograd.function import once_differentiable

import ember
from ember_test_helpers import assert_same, check_same, clone_inputs, reset, stats

BACKENDS = ["eager", "aot_eager"]


class Odd(torch.autograd.Function):
    """x * x * k, with a backward that is deliberately not the derivative (3 * x * k * g)."""

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x * x * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x * ctx.k, None


class TwoOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        s = x + y
        ctx.save_for_backward(s)
        ctx.shape = x.shape
        return s.sin(), 7, s.cos()

    @staticmethod
    def backward(ctx, ga, gnone, gb):
        (s,) = ctx.saved_tensors
        assert gnone is None
        g = ga * s.cos() - gb * s.sin()
        return g, (g * 2).reshape(ctx.shape)


class ArgMaxed(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        idx = x.argmax(dim=-1)
        out = x.amax(dim=-1)
        ctx.mark_non_differentiable(idx)
        ctx.save_for_backward(x, idx)
        return out, idx

    @staticmethod
    def backward(ctx, g, _gidx):
        x, idx = ctx.saved_tensors
        grad = torch.zeros_like(x)
        return grad.scatter(-1, idx.unsqueeze(-1), g.unsqueeze(-1))


class NoMaterialize(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        out = torch.zeros(())
        if ga is not None:
            out = out + ga * 2
        if gb is not None:
            out = out + gb * 3
        return out


class Once(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.exp() * 5


class SetupStyle(torch.autograd.Function):
    @staticmethod
    def forward(x, scale):
        return x * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, scale = inputs
        ctx.scale = scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale * 10, None


class NeedsGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        gx = g * y if ctx.needs_input_grad[0] else None
        gy = g * x if ctx.needs_input_grad[1] else None
        return gx, gy


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 4


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [
    lambda x, y: Odd.apply(x.sin(), 2.0).cos(),
    lambda x, y: TwoOut.apply(x, y)[0] + TwoOut.apply(x, y)[2] * TwoOut.apply(x, y)[1],
    lambda x, y: ArgMaxed.apply(x.reshape(2, 2))[0] * 2,
    lambda x, y: NoMaterialize.apply(x)[0] + 1,
    lambda x, y: Once.apply(x) + y,
    lambda x, y: SetupStyle.apply(x, 0.5),
    lambda x, y: NeedsGrad.apply(x, y.detach()),
    lambda x, y: Identity.apply(x) * y,
    lambda x, y: [Odd.apply(t, i) for i, t in enumerate([x, y, x * y])][2],
], ids=["saved_and_attrs", "tuple_with_int", "non_differentiable", "no_materialize", "once_differentiable",
        "setup_context", "needs_input_grad", "identity", "in_a_loop"])
def test_matches_eager_in_one_graph(case, backend):
    def fn(x, y):
        return case(x, y)
    x = torch.randn(4, requires_grad=True)
    y = torch.randn(4, requires_grad=True)
    reset()
    _compare(fn, x, y, backend=backend)
    assert stats()["graph_breaks"] == 0
    assert stats()["graphs"] == 1


def _compare(fn, *args, backend):
    eager_args, comp_args = clone_inputs(args), clone_inputs(args)
    expected = fn(*eager_args)
    compiled = ember.compile(fn, backend=backend)
    actual = compiled(*comp_args)
    assert_same(actual, expected, "output")
    outs = [o for o in (expected if isinstance(expected, (tuple, list)) else [expected])]
    if any(o.requires_grad for o in outs):
        sum(o.sum() for o in outs).backward()
        acts = actual if isinstance(actual, (tuple, list)) else [actual]
        sum(o.sum() for o in acts).backward()
        assert_same([a.grad for a in comp_args], [a.grad for a in eager_args], "grads")
    again = compiled(*clone_inputs(args))
    assert_same(again, fn(*clone_inputs(args)), "second call")


def test_one_graph_with_counter():
    check_same(lambda x: Odd.apply(x.sin(), 3) * 2, torch.randn(3, requires_grad=True), graphs=1)


def test_under_no_grad_and_without_grad():
    def fn(x):
        return Odd.apply(x, 2.0)
    check_same(fn, torch.randn(3), graphs=1)
    with torch.no_grad():
        check_same(fn, torch.randn(3, requires_grad=True), graphs=1)


def test_inside_module():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return Odd.apply(self.lin(x), 1.5).sum(-1)
    m = M()
    x = torch.randn(2, 4, requires_grad=True)
    reset()
    expected = m(x)
    expected.sum().backward()
    g_eager = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    actual = ember.compile(m, backend="aot_eager")(x)
    assert_same(actual, expected)
    actual.sum().backward()
    assert_same([p.grad for p in m.parameters()], g_eager)
    assert stats()["graph_breaks"] == 0


SCALE = 2.0


class GlobalBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        return g * SCALE


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_reads_a_global_that_changes(backend):
    global SCALE
    compiled = ember.compile(lambda x: GlobalBackward.apply(x), backend=backend)
    for scale in (2.0, 5.0):
        SCALE = scale
        x = torch.randn(3, requires_grad=True)
        compiled(x).sum().backward()
        assert_same(x.grad, torch.full((3,), scale))
    SCALE = 2.0


class Printing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("forward")  # a side effect: the call runs eagerly (as before)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3


class Escapes(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, out):
        y = x * 2
        out.append(y)
        return y + 1

    @staticmethod
    def backward(ctx, g):
        return g * 5, None


class RaisesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        raise ValueError("no backward today")


class WrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g, g


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_untraceable_functions_still_match_eager(backend, capsys):
    def printing(x):
        return Printing.apply(x).sin()

    def escapes(x):
        lst = []
        r = Escapes.apply(x, lst)
        return r, lst[0]

    def dirty(x):
        return Dirty.apply(x.clone())
    for fn in (printing, escapes, dirty):
        _compare(fn, torch.randn(3, requires_grad=True), backend=backend)
    assert capsys.readouterr().out.count("forward") == 4  # eager twice, compiled twice


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_errors_surface_at_backward(backend):
    for fn_cls, exc in ((RaisesInBackward, ValueError), (WrongCount, RuntimeError)):
        x = torch.randn(3, requires_grad=True)
        out = ember.compile(lambda t: fn_cls.apply(t) + 1, backend=backend)(x)  # forward is fine
        with pytest.raises(exc):
            out.sum().backward()
        with pytest.raises(exc):
            (fn_cls.apply(x) + 1).sum().backward()


def test_inductor_backend():
    pytest.importorskip("torch._inductor")
    x = torch.randn(8, requires_grad=True)
    y = torch.randn(8, requires_grad=True)

    def fn(x, y):
        a, _, b = TwoOut.apply(x, y)
        return Odd.apply(a * b, 0.5)
    eager_args, comp_args = clone_inputs((x, y)), clone_inputs((x, y))
    expected = fn(*eager_args)
    actual = ember.compile(fn, backend="inductor")(*comp_args)
    assert_same(actual, expected, rtol=1e-4, atol=1e-5)
    expected.sum().backward()
    actual.sum().backward()
    assert_same([a.grad for a in comp_args], [a.grad for a in eager_args], rtol=1e-4, atol=1e-5)


# ---- cases a probe found (each was wrong, crashed, or fell back before the fix) -----------------

class ViewOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)

    @staticmethod
    def backward(ctx, g):
        return g.view(2, 2) * 4


class Counting(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.calls = 0
        ctx.scale = 2.0
        return x * 1

    @staticmethod
    def backward(ctx, g):
        ctx.calls += 1  # what backward writes on ctx is not part of what forward recorded
        scale = ctx.scale
        ctx.scale = None
        return g * (1 + ctx.calls) * scale


G = torch.randn(4)


class ReadsGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * G

    @staticmethod
    def backward(ctx, g):
        assert len(ctx.needs_input_grad) == 1
        return tuple(g * 2 if n else None for n in ctx.needs_input_grad)


class SavesOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * (1 - y * y) * 7


class Defaults(torch.autograd.Function):
    @staticmethod
    def forward(x, scale=2.0):
        return x * scale

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, ctx.scale = inputs

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale * 3, None


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [
    lambda x: (Identity.apply(x * 3), x * 3),
    lambda x: (lambda h: (Identity.apply(h), h))(x * 3),
    lambda x: (lambda h: (ViewOut.apply(h.reshape(2, 2)), h))(x * 3),
    lambda x: Counting.apply(x),
    lambda x: ReadsGlobal.apply(x),
    lambda x: SavesOutput.apply(x),
    lambda x: Defaults.apply(x),
], ids=["identity_of_intermediate", "output_aliases_returned_tensor", "view_output_aliases_returned_tensor",
        "backward_writes_ctx", "needs_input_grad_without_outside_tensors", "saves_output", "setup_context_defaults"])
def test_probe_findings(case, backend):
    reset()
    _compare(case, torch.randn(4, requires_grad=True), backend=backend)
    assert stats()["graph_breaks"] == 0 and stats()["fallbacks"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_patching_backward_recompiles(backend):
    class Patched(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * 2
    compiled = ember.compile(lambda x: Patched.apply(x), backend=backend)
    for factor in (2, -9):
        if factor == -9:
            Patched.backward = staticmethod(lambda ctx, g: g * -9)
        x = torch.randn(3, requires_grad=True)
        compiled(x).sum().backward()
        assert_same(x.grad, torch.full((3,), float(factor)))


S = torch.tensor(3.0)


class BackwardReadsGlobalTensor(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1

    @staticmethod
    def backward(ctx, g):
        return g * S


@pytest.mark.parametrize("backend", BACKENDS)
def test_backward_reading_an_outside_tensor_runs_eagerly(backend):
    reset()
    _compare(lambda x: BackwardReadsGlobalTensor.apply(x) + 1, torch.randn(3, requires_grad=True), backend=backend)
    assert stats()["fallbacks"] == 0
