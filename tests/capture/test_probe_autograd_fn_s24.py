"""Probe findings: torch.autograd.Function traced into the graph, and autograd inside compiled code.

Each case is compared with eager (outputs, inputs after the call, gradients) with a counting eager
backend and with ``aot_eager`` behind a counter; graph counts are those torch.compile makes.
"""
import enum

import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, check_same, clone_inputs, reset, stats


class _AotCounter(CompileCounter):
    def __call__(self, gm, example_inputs):
        super().__call__(gm, example_inputs)
        return ember.lookup_backend("aot_eager")(gm, example_inputs)


def _grads(args):
    return [a.grad for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def check(fn, *args, graphs=1, fullgraph=True, breaks=0):
    """check_same with the eager counting backend, then the same through aot_eager.

    (Where an ``apply`` breaks the graph, its forward is compiled as a frame of its own, as
    torch.compile does: its graphs and breaks count too.)"""
    reset()
    check_same(fn, *args, graphs=graphs, fullgraph=fullgraph)
    assert stats()["graph_breaks"] == breaks
    reset()
    counter = _AotCounter()
    compiled = ember.compile(fn, backend=counter, fullgraph=fullgraph)
    for _ in range(2):
        eager_args, comp_args = clone_inputs(args), clone_inputs(args)
        expected, actual = fn(*eager_args), compiled(*comp_args)
        assert_same(actual, expected, "output")
        outs = [o for o in (expected if isinstance(expected, (tuple, list)) else [expected])
                if isinstance(o, torch.Tensor) and o.requires_grad]
        if outs:
            sum(o.sum() for o in outs).backward()
            acts = [o for o in (actual if isinstance(actual, (tuple, list)) else [actual])
                    if isinstance(o, torch.Tensor) and o.requires_grad]
            sum(o.sum() for o in acts).backward()
            assert_same(_grads(comp_args), _grads(eager_args), "grads", check_requires_grad=False)
    assert counter.frame_count == graphs
    assert stats()["fallbacks"] == 0


def x34():
    return torch.randn(3, 4, requires_grad=True)


# --- ctx attributes of any Python type -----------------------------------------------------------

class KeepsModule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mod):
        ctx.mod = mod
        return mod(x) * 2

    @staticmethod
    def backward(ctx, g):
        return g * ctx.mod.weight.shape[0], None


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class KeepsEnum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, color):
        ctx.color = color
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * (3 if ctx.color is Color.RED else 5), None


def test_ctx_holds_module_and_enum():
    lin = torch.nn.Linear(4, 4)
    check(lambda x: KeepsModule.apply(x, lin), x34())
    check(lambda x: KeepsEnum.apply(x, Color.BLUE), x34())


class KeepsList(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lst):
        ctx.lst = lst
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * len(ctx.lst), None


def test_ctx_list_changed_after_forward_matches_eager():
    """Eager's ctx holds the program's own list: a change after apply shows in backward. The graph
    cannot follow it, so the apply runs eagerly (a graph break) -- never the stale length."""
    def fn(x):
        lst = [1, 2]
        y = KeepsList.apply(x.sin(), lst)
        lst.append(3)
        return y + 1
    check(fn, x34(), graphs=3, fullgraph=False, breaks=1)


def test_ctx_list_not_changed_stays_in_graph():
    def fn(x):
        dims = [1, 2]
        return KeepsList.apply(x, dims) + len(dims)
    check(fn, x34())


class AppendsInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.seen = []
        return x * 2

    @staticmethod
    def backward(ctx, g):
        ctx.seen.append(1)
        return g * len(ctx.seen)


def test_ctx_list_changed_by_backward_is_fresh_each_call():
    # (backward changing ctx state is a side effect: the call runs eagerly)
    check(lambda x: AppendsInBackward.apply(x.sin()) + 1, x34(), graphs=3, fullgraph=False, breaks=1)


# --- apply arguments ------------------------------------------------------------------------------

class WithDefault(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale * 3, None  # (one more gradient than inputs when scale is not passed: eager drops it)


def test_apply_keyword_and_default_arguments():
    check(lambda x: WithDefault.apply(x, scale=3.0), x34())
    check(lambda x: WithDefault.apply(x), x34())


def test_apply_leaving_a_position_out_raises_as_eager():
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, a=1.0, b=2.0):
            return x * a * b

        @staticmethod
        def backward(ctx, g):
            return g, None, None
    x = x34()
    with pytest.raises(TypeError):
        Two.apply(x, b=3.0)
    with pytest.raises(TypeError):
        ember.compile(lambda t: Two.apply(t, b=3.0))(x)


# --- symbolic numbers (an int argument that changed, dynamic sizes) -------------------------------

class ScaleBy(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.k = k
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k * 2, None


class KeepsShape(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.n = x.shape[0]
        ctx.shape = x.shape
        return x.sum(0) * ctx.n

    @staticmethod
    def backward(ctx, g):
        return g.expand(ctx.shape) * ctx.n


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_symbolic_int_argument_and_sizes_stay_in_graph(backend):
    """An int argument that changed between calls is a symbol on the recompile; it (and symbolic sizes)
    reach forward, ctx and backward as the call's numbers -- no graph break."""
    reset()
    counter = _AotCounter() if backend == "aot_eager" else CompileCounter()
    f = ember.compile(lambda x, k: ScaleBy.apply(x, k), backend=counter)
    for k in (2, 3, 4, 5):
        x, xe = x34(), None
        xe = x.detach().clone().requires_grad_()
        out, expected = f(x, k), ScaleBy.apply(xe, k)
        assert_same(out, expected)
        out.sum().backward()
        expected.sum().backward()
        assert_same(x.grad, xe.grad)
    assert stats()["graph_breaks"] == 0 and counter.frame_count == 2
    reset()
    counter = _AotCounter() if backend == "aot_eager" else CompileCounter()
    g = ember.compile(lambda x: KeepsShape.apply(x), backend=counter, dynamic=True)
    for n in (2, 3, 5):
        x = torch.randn(n, 4, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        out, expected = g(x), KeepsShape.apply(xe)
        assert_same(out, expected)
        out.sum().backward()
        expected.sum().backward()
        assert_same(x.grad, xe.grad)
    assert stats()["graph_breaks"] == 0 and counter.frame_count == 1


# --- outputs that are not tensors ------------------------------------------------------------------

class ListOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return [x * 2, x * 3]

    @staticmethod
    def backward(ctx, g):
        return g


class TupleWithList(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, [x * 3], 7

    @staticmethod
    def backward(ctx, g, gl, gi):
        return g * 5


def test_outputs_that_are_not_tensors_pass_through():
    """As eager: only a tensor or a tuple's tensors get the Function's gradient; a list (or a list in the
    tuple) comes back as forward made it, its tensors not requiring grad."""
    check(lambda x: ListOut.apply(x), x34())
    check(lambda x: TupleWithList.apply(x), x34())
    check(lambda x: (lambda r: (r[0] * r[2], r[1][0], r[1][0].requires_grad))(TupleWithList.apply(x)), x34())


class OnlyFirstGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, g1, g2):
        return g1  # None when only the second output is used


def test_outputs_require_grad_when_backward_gives_none():
    """aot_eager detaches inputs the backward graph gives no gradient; with none left the outputs
    stopped requiring grad (eager's do: they come from the Function)."""
    def fn(x):
        a, b = OnlyFirstGrad.apply(x)
        return b.sin()
    x = x34()
    out = ember.compile(fn, backend="aot_eager")(x)
    assert out.requires_grad and fn(x).requires_grad
    out.sum().backward()
    assert x.grad is None


# --- ctx reads, apply kept as a value, materialize_grads(False) with extra gradients ---------------

class CtxHasattr(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.a = 1
        return x * (2 if hasattr(ctx, "a") else 3) * (5 if hasattr(ctx, "b") else 7)

    @staticmethod
    def backward(ctx, g):
        return g * (getattr(ctx, "a", 0) + getattr(ctx, "b", 10))


class Doubles(torch.autograd.Function):
    @staticmethod
    def forward(ctx, foo):
        return torch.add(foo, foo)

    @staticmethod
    def backward(ctx, g):
        return g * 3


DOUBLES = Doubles.apply


class KeepsApply(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.f = Doubles.apply

    def forward(self, x):
        return self.f(x) + DOUBLES(x)


class TwoGradsOneInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x.clone(), x.clone()

    @staticmethod
    def backward(ctx, g1, g2):
        return g1, g2  # (g2 is None when the second output is unused: eager drops it)


class Holder:
    def __init__(self, k):
        self.k = k


class KeepsNewObject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.holder = Holder(2.0)
        ctx.holder.t = x.sin()
        return x * ctx.holder.k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.holder.k * 3 + ctx.holder.t


def test_ctx_missing_attribute_apply_as_value_and_new_object():
    check(lambda x: CtxHasattr.apply(x), x34())
    check(KeepsApply(), x34())
    check(lambda x: TwoGradsOneInput.apply(x)[0], x34())
    check(lambda x: KeepsNewObject.apply(x), x34())


# --- ctx.mark_dirty: forward changes an input in place --------------------------------------------

class Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 3


class AddsInto(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w):
        x.add_(w)
        ctx.mark_dirty(x)
        return x, w * 2

    @staticmethod
    def backward(ctx, g, gw):
        return g, g * 5 + gw * 2


class ExpSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.exp_()
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


def test_mark_dirty_stays_in_graph():
    def fn(x):
        z = x * 1
        y = Doubled.apply(z)
        return z * 2, y is z, y.requires_grad
    check(fn, x34())

    def loop(x):
        z = x * 1
        for _ in range(2):
            z = Doubled.apply(z)
        return ExpSaved.apply(z)
    check(loop, x34())


def test_mark_dirty_that_cannot_be_traced_runs_eagerly():
    def leaf(x):  # eager raises (a leaf that requires grad changed in place)
        return Doubled.apply(x)
    x = x34()
    with pytest.raises(RuntimeError):
        leaf(x)
    with pytest.raises(RuntimeError):
        ember.compile(leaf)(x)

    def view(x):
        z = x * 1
        return Doubled.apply(z[0]), z
    check(view, x34(), graphs=2, fullgraph=False, breaks=1)  # (its forward's ctx.mark_dirty: no break)

    def graph_input(x, w):
        # x does not require grad and gains the Function's history: an AOT backend (torch's) would
        # see a mutation under no_grad and leave x without it
        a, b = AddsInto.apply(x, w)
        return a * 2 + b, x.requires_grad
    check(graph_input, torch.randn(3, 4), x34(), graphs=2, fullgraph=False, breaks=1)


# --- autograd state read inside the graph ----------------------------------------------------------

def test_grad_fn_of_a_tensor_the_graph_computes():
    """``y.grad_fn`` was a method tracker: ``type(y.grad_fn).__name__`` said 'getset_descriptor'."""
    def fn(x):
        y = x * 2
        with torch.no_grad():
            z = x * 3
        return y, type(y.grad_fn).__name__, y.grad_fn.name(), y.grad_fn is None, z.grad_fn is None, \
            x.grad_fn is None
    check(fn, x34())

    def custom(x):
        y = KeepsEnum.apply(x, Color.RED)
        return y, y.grad_fn is not None, y.grad_fn.name()
    check(custom, x34())


class KeepsHolder(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, holder):
        ctx.holder = holder
        return x * holder.k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.holder.k * 2 + len(ctx.holder.items), None


def test_ctx_object_made_in_the_frame():
    def unchanged(x):
        h = Holder(3.0)
        h.items = [1, 2]
        return KeepsHolder.apply(x, h), h.k
    check(unchanged, x34())

    def changed_after(x):  # eager's backward sees k == 5 and three items
        h = Holder(3.0)
        h.items = [1, 2]
        y = KeepsHolder.apply(x.sin(), h)
        h.k = 5.0
        return y * 2
    check(changed_after, x34(), graphs=3, fullgraph=False, breaks=1)

    def items_changed_after(x):
        h = Holder(3.0)
        h.items = [1, 2]
        y = KeepsHolder.apply(x.sin(), h)
        h.items.append(3)
        return y * 2
    check(items_changed_after, x34(), graphs=3, fullgraph=False, breaks=1)


# --- an apply that breaks the graph: its forward is compiled as a frame (as torch.compile does) ---

class PrintsInForward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        print("forward")
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 5


class BranchesInBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 2

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2 if x.sum() > 0 else g * 3


def test_forward_of_an_apply_that_breaks_gets_its_own_graphs(capsys):
    # graphs: x.sin(); forward's `x * 2` (after its print); .cos() -- torch.compile's three
    check(lambda x: PrintsInForward.apply(x.sin()).cos(), x34(), graphs=3, fullgraph=False, breaks=2)
    assert capsys.readouterr().out.count("forward") == 8  # once per call (4 eager, 4 compiled), none when tracing
    # (its forward's ctx.save_for_backward is replayed after the forward's graph: one break, as torch's)
    check(lambda x: BranchesInBackward.apply(x.sin()).cos(), x34(), graphs=3, fullgraph=False, breaks=1)


class PrintsSetupStyle(torch.autograd.Function):
    @staticmethod
    def forward(x, k=3.0):
        print("forward")
        return x * k

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]  # (apply binds forward's defaults: the compiled forward keeps its signature)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k * 2, None


def test_setup_context_function_that_breaks():
    check(lambda x: PrintsSetupStyle.apply(x.sin()) + 1, x34(), graphs=3, fullgraph=False, breaks=2)


class BadGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kind):
        ctx.kind = kind
        return x * 2

    @staticmethod
    def backward(ctx, g):
        if ctx.kind == "shape":
            return g.sum(), None
        if ctx.kind == "scalar":
            return 2.0, None
        return g, g  # a gradient for the non-tensor argument


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("kind", ["shape", "scalar", "nontensor"])
def test_backward_returning_gradients_autograd_rejects(backend, kind):
    """Eager raises at backward time; an AOT backend met the error while compiling (the frame fell
    back): the call runs eagerly at a graph break instead, and backward raises as in eager."""
    reset()
    x = x34()
    out = ember.compile(lambda t: BadGradient.apply(t.sin(), kind) + 1, backend=backend)(x)
    with pytest.raises(RuntimeError):
        out.sum().backward()
    assert stats()["fallbacks"] == 0 and stats()["graph_breaks"] == 1


class SavesInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g


class SavesOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_saved_tensor_changed_in_place_later(backend):
    """Eager's backward raises ("modified by an inplace operation"); aot_eager failed to compile the frame
    (a whole-frame fallback). The apply now runs eagerly at a break, and backward raises as in eager."""
    def changes_input(x):
        z = x * 1
        y = SavesInput.apply(z)
        z.add_(1)
        return y

    def changes_output(x):
        y = SavesOutput.apply(x * 1)
        y.add_(1)
        return y
    for fn in (changes_input, changes_output):
        reset()
        out = ember.compile(fn, backend=backend)(x34())
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.sum().backward()
        assert stats()["fallbacks"] == 0
