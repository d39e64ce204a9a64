"""A program tuned for torch.compile through ``torch._dynamo.config`` (recompile_limit, its alias
cache_size_limit, automatic_dynamic_shapes, assume_static_by_default, specialize_int,
specialize_float, fail_on_recompile_limit_hit, force_parameter_static_shapes, force_nn_module_property_static_shapes)
recompiles under ember as those settings say (ember/torch_config.py); ember
ignored them (8 entries, automatic dynamic shapes, symbolic ints and floats whatever was set).
The expected counts are torch.compile's (EMBER_TEST_REFERENCE=torch checks them)."""
import warnings

import pytest
import torch
import torch._dynamo.config as dynamo_config

import ember
from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]


def double(x):
    return x * 2


def scale(x, n):
    return x * n


def _count(fn, calls, **compile_kwargs):
    reset()
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt, **compile_kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the recompile-limit warning)
        for args in calls:
            assert_same(compiled(*args), fn(*args))
    return cnt.frame_count


@pytest.mark.parametrize("name", ["recompile_limit", "cache_size_limit"])
def test_recompile_limit_from_torch_config(name):
    calls = [(torch.ones(3, dtype=d),) for d in DTYPES] * 2
    with dynamo_config.patch(**{name: 2}):
        assert _count(double, calls) == 2  # then eagerly, with the right answers
    assert _count(double, calls) == len(DTYPES)


@pytest.mark.skipif(REFERENCE, reason="ember's own setting")
def test_embers_own_limit_wins():
    calls = [(torch.ones(3, dtype=d),) for d in DTYPES]
    with dynamo_config.patch(recompile_limit=2), ember.config.patch(recompile_limit=3):
        assert _count(double, calls) == 3


def test_automatic_dynamic_shapes_off():
    sizes = [(torch.ones(n),) for n in range(2, 7)]
    ints = [(torch.ones(3), n) for n in range(2, 7)]
    with dynamo_config.patch(automatic_dynamic_shapes=False):
        assert _count(double, sizes) == 5
        assert _count(scale, ints) == 5
    assert _count(double, sizes) == 2
    assert _count(scale, ints) == 2


def test_assume_static_by_default_off():
    sizes = [(torch.ones(n),) for n in range(2, 7)]
    with dynamo_config.patch(assume_static_by_default=False):
        assert _count(double, sizes) == 1


def test_specialize_int_and_float():
    ints = [(torch.ones(3), n) for n in range(2, 7)]
    floats = [(torch.ones(3), n + 0.5) for n in range(2, 7)]
    with dynamo_config.patch(specialize_int=True):
        assert _count(scale, ints) == 5
    with dynamo_config.patch(specialize_float=True):
        assert _count(scale, floats) == 5
    assert _count(scale, floats) == 2


def test_fail_on_recompile_limit_hit_from_torch_config():
    reset()
    cnt = CompileCounter()
    compiled = compile(double, backend=cnt)
    with dynamo_config.patch(recompile_limit=1, fail_on_recompile_limit_hit=True):
        compiled(torch.ones(2))
        with pytest.raises(Exception) as info:
            compiled(torch.ones(2, dtype=torch.float64))
    assert "recompile" in type(info.value).__name__.lower() or "limit" in str(info.value).lower()
    assert cnt.frame_count == 1


def item_in_arithmetic(x):
    return x * (x.sum().item() + 1)


def mask_select(x):
    return x[x > 0].sum() * 2


@pytest.mark.parametrize("fn, name, without", [(item_in_arithmetic, "capture_scalar_outputs", 3),
                                               (mask_select, "capture_dynamic_output_shape_ops", 2)])
def test_data_dependent_capture_from_torch_config(fn, name, without):
    x = torch.randn(5)
    with dynamo_config.patch(**{name: True}):
        assert _count(fn, [(x,), (x * 2,)]) == 1
    assert _count(fn, [(x,), (x * 2,)]) == without  # a graph break (and the value baked in after it)


def add_sub_add(x):
    y = torch.add(x, 1)
    y = torch.sub(y, 3)
    return torch.mul(torch.ops.aten.cos(y), 2)


@pytest.mark.parametrize("marked", [torch.sub, torch.ops.aten.cos])
def test_disallow_in_graph_breaks_there(marked):
    """``torch._dynamo.disallow_in_graph(fn)``: a call of fn is a graph break under ember too (it
    was put in the graph); the mark lifted, one graph again."""
    import torch._dynamo
    x = torch.randn(4)
    torch._dynamo.disallow_in_graph(marked)
    try:
        assert _count(add_sub_add, [(x,)]) == 2
        cnt = CompileCounter()
        reset()
        with pytest.raises(ember.Unsupported if not REFERENCE else Exception):
            compile(add_sub_add, backend=cnt, fullgraph=True)(x)
    finally:
        torch._dynamo.allow_in_graph(marked)
    assert _count(add_sub_add, [(x,)]) == 1


class _Scaler:
    """A callable object a program allows in the graph (named, as torch.compile needs)."""

    __name__ = "scaler"

    def __call__(self, x):
        torch._dynamo.graph_break()  # (never traced: the object is one node)
        return x * 3


class _Holder:
    @staticmethod
    def inner(x):
        return torch.mul(x, 2)

    @staticmethod
    @torch._dynamo.allow_in_graph
    def fused(x):
        torch._dynamo.graph_break()  # (never traced: the function is one node)
        return _Holder.inner(x).sin()


_scaler = torch._dynamo.allow_in_graph(_Scaler())


def uses_allowed(x):
    return _Holder.fused(x + 1) + _scaler(x)


def test_allow_in_graph_is_one_node():
    """``torch.compiler.allow_in_graph(fn)``: fn (a function read off a class, or a callable
    object) is one call_function node, run on fake tensors while tracing; ember traced its body
    and broke at the graph_break() in it (fullgraph=True raised)."""
    x = torch.randn(4)
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    reset()
    out = compile(uses_allowed, backend=backend, fullgraph=True)(x)
    assert_same(out, uses_allowed(x))
    assert len(graphs) == 1
    targets = [n.target for n in graphs[0].graph.nodes if n.op == "call_function"]
    assert _Holder.fused in targets and _scaler in targets
    assert torch.sin not in targets  # (the body stays inside the one call)


import dataclasses  # noqa: E402


@dataclasses.dataclass(frozen=True)
class _Pair:
    x: torch.Tensor
    y: torch.Tensor
    k: int = 5


@torch._dynamo.allow_in_graph
def _pair_sum(p):
    return p.x + p.y + p.k


def pair_through_allowed(x, y):
    return _pair_sum(_Pair(x, y)) * 2


def test_allow_in_graph_with_an_argument_no_node_takes():
    """A dataclass object argument: no graph node can take it, so the function is traced as
    Python (the same values); ember raised EB0030 under fullgraph=True."""
    reset()
    x, y = torch.randn(3), torch.randn(3)
    assert_same(compile(pair_through_allowed, fullgraph=True)(x, y), pair_through_allowed(x, y))


def marks_then_calls(x):
    @torch._dynamo.allow_in_graph
    def local(t):
        return t.sin() * 2
    return local(x) + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_allow_in_graph_applied_in_the_frame(backend):
    """The mark made inside the compiled frame (a break there): the resume's call of the local
    function stays right; the callee a break's residual code binds is ember's, never a node (it
    was one, an internal error, and under inductor the process crashed)."""
    reset()
    x = torch.randn(3)
    for _ in range(2):
        assert_same(compile(marks_then_calls, backend=backend)(x), marks_then_calls(x))


class _Scaled(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(n))
        self.register_buffer("b", torch.ones(n))

    def forward(self, x):
        return (x * self.w + self.b).sum()


def _through(m, x):
    return m(x)


def test_force_parameter_static_shapes_off():
    # (parameters as arguments, and a program module's parameters and buffers: dynamic after the
    # second size, as other tensors; torch.nn's own modules keep static sizes unless
    # force_nn_module_property_static_shapes is off too)
    params = [(torch.nn.Parameter(torch.randn(n)),) for n in range(2, 6)]
    modules = [(_Scaled(n), torch.randn(n)) for n in range(2, 6)]
    linears = [(torch.nn.Linear(n, 2), torch.randn(3, n)) for n in range(2, 6)]
    assert _count(double, params) == 4
    assert _count(_through, modules) == 4
    with dynamo_config.patch(force_parameter_static_shapes=False):
        assert _count(double, params) == 2
        assert _count(_through, modules) == 2
        assert _count(_through, linears) == 4
        with dynamo_config.patch(force_nn_module_property_static_shapes=False):
            assert _count(_through, linears) == 2
