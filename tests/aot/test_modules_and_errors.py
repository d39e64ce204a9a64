"""nn modules (parameters as inputs, buffer mutation), inductor, the factory, and bad input."""
import pytest
import torch
import torch.nn as nn

import ember
from ember.aot.errors import AOTCompileError, UnsupportedAliasedMutation
from ember.exc import BackendCompilerFailed
from helpers import VIAS, compare


def _modules():
    torch.manual_seed(0)
    return {
        "linear": (nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), (4, 8)),
        "conv": (nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 2, 3)), (2, 3, 8, 8)),
        "batchnorm_train": (nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6)).train(), (5, 6)),
        "batchnorm2d_train": (nn.Sequential(nn.Conv2d(3, 3, 1), nn.BatchNorm2d(3)).train(), (2, 3, 4, 4)),
        "batchnorm_eval": (nn.Sequential(nn.Linear(6, 6), nn.BatchNorm1d(6)).eval(), (5, 6)),
        "layernorm": (nn.Sequential(nn.Linear(6, 6), nn.LayerNorm(6), nn.GELU()), (3, 6)),
        "dropout_eval": (nn.Sequential(nn.Linear(6, 6), nn.Dropout(0.5)).eval(), (3, 6)),
    }


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("name", list(_modules()))
def test_module_aot_eager(name, via):
    module, shape = _modules()[name]
    compare(None, lambda: (torch.randn(*shape, requires_grad=True),), via=via, module=module,
            rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["linear", "batchnorm_train", "layernorm"])
def test_module_inductor(name):
    module, shape = _modules()[name]
    # (tolerance: what Inductor promises, see tests/inductor_tolerance.py)
    compare(None, lambda: (torch.randn(*shape, requires_grad=True),), backend="inductor",
            via="torch.compile", module=module)


def test_inductor_mutation_alias_and_inference():
    def f(x, y, b):
        b.add_(1)
        z = x * y + b
        return z.sin(), z.view(-1), x.t(), z[0]
    make = lambda: (torch.randn(3, 3, requires_grad=True), torch.randn(3, 3), torch.zeros(3))  # noqa: E731
    compare(f, make, backend="inductor", via="direct")
    compare(f, make, backend="inductor", via="direct", grad_enabled=False)


def test_inductor_keeps_inference_mutation_in_graph():
    def f(x, y):
        y.mul_(2)
        return x + y
    gm = torch.fx.symbolic_trace(f)
    x, y = torch.randn(4), torch.ones(4)
    compiled = ember.lookup_backend("inductor")(gm, [x, y])
    assert compiled.meta.input_info[1].mutated_in_graph
    assert any(n.target is torch.ops.aten.copy_.default for n in compiled.graphs["inference"].graph.nodes)
    out = compiled(x, y)
    torch.testing.assert_close(y, torch.full((4,), 2.0))
    torch.testing.assert_close(out, x + 2)


def test_aot_autograd_factory_calls_compilers_and_lazy_backward():
    from ember.backends import aot_autograd
    calls = []

    def fw(gm, inputs):
        calls.append(("fw", len(inputs)))
        return gm.forward

    def bw(gm, inputs):
        calls.append(("bw", len(inputs)))
        return gm.forward
    backend = aot_autograd(fw_compiler=fw, bw_compiler=bw)
    fn = torch.compile(lambda x, w: (x @ w).relu().sum(), backend=backend)
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    torch._dynamo.reset()
    out = fn(x, w)
    assert [c[0] for c in calls] == ["fw"]  # backward not compiled yet
    out.backward()
    assert [c[0] for c in calls] == ["fw", "bw"]
    torch.testing.assert_close(w.grad, torch.autograd.grad((x @ w).relu().sum(), w)[0])


def test_saved_values_are_only_what_backward_needs():
    def f(x, w):
        h = x @ w
        return (h.relu() * 2).sum()
    gm = torch.fx.symbolic_trace(f)
    x, w = torch.randn(3, 4), torch.randn(4, 5, requires_grad=True)
    compiled = ember.lookup_backend("aot_eager")(gm, [x, w])
    bw_inputs = [n for n in compiled.graphs["backward"].graph.nodes if n.op == "placeholder"]
    # saved: x (for the matmul grad) and one relu-derived tensor; plus one tangent
    assert len(bw_inputs) <= 3, [n.name for n in bw_inputs]
    assert not any(n.meta.get("ember_role") == "tangent" for n in compiled.graphs["forward"].graph.nodes)


def test_metrics_record_aot_and_backend_compile():
    from ember import metrics
    metrics.clear()
    gm = torch.fx.symbolic_trace(lambda x: x.sin() * 2)
    ember.lookup_backend("aot_eager")(gm, [torch.randn(3, requires_grad=True)])
    times = metrics.compile_times()
    assert times.get("aot", 0) > 0 and "backend_compile" in times


def test_dynamic_shapes_through_torch_compile():
    def f(x, w):
        return (x @ w).softmax(-1) * x.shape[0]
    fn = torch.compile(f, backend=ember.lookup_backend("aot_eager"), dynamic=True)
    torch._dynamo.reset()
    w = torch.randn(4, 4, requires_grad=True)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        out = fn(x, w)
        out.sum().backward()
        g = w.grad.clone()
        w.grad = None
        f(x, w).sum().backward()
        torch.testing.assert_close(g, w.grad)
        w.grad = None


# ---- bad input ------------------------------------------------------------

@torch.library.custom_op("ember_test::opaque_scale", mutates_args=())
def opaque_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 3  # no fake (meta) implementation: cannot be traced on fake tensors


def _untraceable(x):
    y = x * 2
    z = opaque_scale(y)
    return z + 1


def test_untraceable_graph_names_op_and_node():
    gm = torch.fx.symbolic_trace(_untraceable)
    with pytest.raises(BackendCompilerFailed) as info:
        ember.lookup_backend("aot_eager")(gm, [torch.randn(4)])
    assert isinstance(info.value, AOTCompileError)
    assert info.value.op is not None and "opaque_scale" in info.value.op
    assert "in node 'opaque_scale" in str(info.value)


def test_untraceable_graph_names_source_line():
    gm = torch.fx.symbolic_trace(_untraceable)
    node = next(n for n in gm.graph.nodes if "opaque_scale" in n.name)
    # what a capturing frontend (Dynamo, ember.capture) records on each node
    node.meta["stack_trace"] = '  File "model.py", line 7, in _untraceable\n    z = opaque_scale(y)\n'
    with pytest.raises(AOTCompileError) as info:
        ember.lookup_backend("aot_eager")(gm, [torch.randn(4)])
    assert 'File "model.py", line 7' in str(info.value)
    assert "z = opaque_scale(y)" in str(info.value)


def test_aliased_inputs_of_different_dtypes_run_the_graph_as_is():
    # ember cannot regenerate views across dtypes through a synthetic base: such calls run the
    # captured graph itself (eager's answer); inputs that do not alias still use the AOT graph.
    def f(a, b):
        a.add_(1)
        return a.sum() + b.float().sum()
    gm = torch.fx.symbolic_trace(f)
    base = torch.zeros(4, dtype=torch.int32)
    compiled = ember.lookup_backend("aot_eager")(gm, [base, base.view(torch.uint8)])
    for _ in range(2):
        e_base, c_base = torch.arange(4, dtype=torch.int32), torch.arange(4, dtype=torch.int32)
        expected = f(e_base, e_base.view(torch.uint8))
        torch.testing.assert_close(compiled(c_base, c_base.view(torch.uint8)), expected)
        torch.testing.assert_close(c_base, e_base)
    a, b = torch.arange(4, dtype=torch.int32), torch.arange(16, dtype=torch.uint8)
    expected = f(a.clone(), b.clone())
    torch.testing.assert_close(compiled(a, b), expected)
    torch.testing.assert_close(a, torch.arange(4, dtype=torch.int32) + 1)
