"""torch.compiler.config's dynamic_sources / unbacked_sources / dynamic_values, torch's
mark_unbacked, forbidden callables (mark_dynamic inside the compiled region), torch.fx's
no_data_dependent_graph_break, .item() of a computed tensor under fullgraph=True, and a graph break
whose result goes into a dead local (a local class statement). Every case compares with eager and
counts the graphs the backend received, as torch.compile does (the reference switch
EMBER_TEST_REFERENCE=torch runs the same checks under torch.compile)."""
from __future__ import annotations

import pytest
import torch
import torch.fx.experimental._config as fx_config

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


def _calls(fn, arg_lists, **kw):
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, **kw)
    for args in arg_lists:
        assert_same(compiled(*args), fn(*args))
    return counter


# -- torch.compiler.config.dynamic_sources ---------------------------------------------------------

@pytest.mark.parametrize("dynamic", [None, False])
def test_dynamic_source_tensor_compiles_once(dynamic):
    with torch.compiler.config.patch(dynamic_sources="L['x']"):
        counter = _calls(lambda x: x * x + x.shape[0], [(torch.randn(n),) for n in (2, 3, 4, 7)],
                         dynamic=dynamic)
    assert counter.frame_count == 1


@pytest.mark.parametrize("dynamic", [None, False])
def test_dynamic_source_int_compiles_once_zero_and_one_included(dynamic):
    torch.manual_seed(0)
    t = torch.randn(5)
    with torch.compiler.config.patch(dynamic_sources="L['n']"):
        counter = _calls(lambda n: t * n + n, [(1,), (2,), (0,), (3,)], dynamic=dynamic)
    assert counter.frame_count == 1


def test_dynamic_source_regex_and_dim_suffix():
    def fn(x1, y1):
        return x1 * y1.sum(1)
    # y1's dim 1 changes too, but only dim 0 is named: a recompile for each new width
    with torch.compiler.config.patch(dynamic_sources=r"L\['x.*'\], L\['y.*'\]:0"):
        counter = _calls(fn, [(torch.randn(n), torch.randn(n, 3)) for n in (2, 3, 4)], dynamic=False)
        assert counter.frame_count == 1
        counter = _calls(fn, [(torch.randn(2), torch.randn(2, w)) for w in (2, 3, 4)], dynamic=False)
        assert counter.frame_count == 3


def test_dynamic_source_module_attribute_int_by_torch_name():
    class Model(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.inner = torch.nn.Linear(3, 3)
            self.inner.k = k

        def forward(self, a):
            return self.inner(a) * self.inner.k

    counter = CompileCounter()
    with torch.compiler.config.patch(dynamic_sources="L['self']._modules['inner'].k"):
        for k in (5, 6, 7):
            m = Model(k)
            a = torch.randn(2, 3)
            assert_same(compile(m, backend=counter)(a), m(a))
    assert counter.frame_count == 1


def test_dynamic_source_across_a_graph_break():
    def fn(x):
        x = x * x  # (still L['x'] in the function that resumes after the break)
        torch._dynamo.graph_break()
        return x + x.shape[0]
    with torch.compiler.config.patch(dynamic_sources="L['x']"):
        counter = _calls(fn, [(torch.randn(n),) for n in (2, 3, 4)])
    assert counter.frame_count == 2  # one graph each side of the break, no recompiles


# -- unbacked sources and mark_unbacked ------------------------------------------------------------

def test_unbacked_source_tensor_serves_sizes_zero_and_one():
    with torch.compiler.config.patch(unbacked_sources="L['x']"):
        counter = _calls(lambda x: x * x, [(torch.randn(n),) for n in (0, 1, 2, 5)])
    assert counter.frame_count == 1


def test_unbacked_source_scalar():
    with torch.compiler.config.patch(unbacked_sources="L['x']"):
        counter = _calls(lambda x: x * x, [(0,), (1,), (2,)])
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_unbacked_input_views_and_gradients_match_eager(backend):
    """An unbacked input size through views, slices and the AOT backward (the AOT layer must keep
    the input's unbacked size, not specialise the graph to the first call's size)."""
    def fn(x):
        return x.view(-1, 2).sum(0) + x[:2].sum()

    compiled = compile(fn, backend=backend)
    with torch.compiler.config.patch(unbacked_sources="L['x']"):
        for n in (2, 4, 6):
            x1 = torch.randn(n, requires_grad=True)
            x2 = x1.detach().clone().requires_grad_()
            out, expected = compiled(x1), fn(x2)
            assert_same(out, expected)
            out.sum().backward()
            expected.sum().backward()
            assert_same(x1.grad, x2.grad)
        with pytest.raises(RuntimeError):
            compiled(torch.randn(3))  # eager's view error, not a wrong shape


@pytest.mark.skipif(REFERENCE, reason="torch.compile raises its own UserError type")
def test_branch_on_unbacked_size_raises_under_no_data_dependent_graph_break():
    def fn(x, y):
        if x.shape[0] == 5:
            return torch.zeros(5)
        return x * y

    compiled = compile(fn, backend="eager")
    x = torch.ones(5, 5)
    torch._dynamo.decorators.mark_unbacked(x, 0)
    with fx_config.patch(no_data_dependent_graph_break=True):
        with pytest.raises(RuntimeError, match="Could not guard on data-dependent expression"):
            compiled(x, torch.randn(5, 5))
    # without the flag: a graph break, eager's answer
    assert_same(compile(fn, backend="eager")(x, torch.ones(5, 5)), fn(x, torch.ones(5, 5)))


def test_strict_mark_unbacked_serves_other_sizes_and_refuses_a_specialising_program():
    """mark_unbacked(strict=True): torch 2.13 traces the dimension as a symbol that must stay one
    (like mark_dynamic): one graph for every size; a branch on the size is a constraint error."""
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    def scale(x):
        return x * 2

    x = torch.randn(4, 3)
    torch._dynamo.decorators.mark_unbacked(x, 0, strict=True)
    counter = _calls(scale, [(x,), (torch.randn(5, 3),), (torch.randn(7, 3),)])
    assert counter.frame_count == 1

    def branch(x):
        if x.size(0) == 4:
            return x + 1
        return x - 1

    y = torch.randn(4, 3)
    torch._dynamo.decorators.mark_unbacked(y, 0, strict=True)
    with pytest.raises(ConstraintViolationError, match="Constraints violated"):
        compile(branch, backend="eager")(y)


# -- forbidden callables ---------------------------------------------------------------------------

def test_mark_dynamic_inside_the_compiled_region_raises():
    def fn(x):
        torch._dynamo.mark_dynamic(x, 0)
        return x * x
    with pytest.raises(AssertionError, match="Attempt to trace forbidden callable"):
        compile(fn, backend="eager")(torch.randn(3, 3))


def test_forbidden_callable_not_reached_is_fine():
    def fn(x):
        if x.shape[0] == 3:
            return x + 1
        torch._dynamo.mark_dynamic(x, 0)
        return x * x
    x = torch.randn(3, 3)
    assert_same(compile(fn, backend="eager")(x), fn(x))


def test_forbid_in_graph_user_function():
    @torch._dynamo.forbid_in_graph
    def helper(x):
        return x + 1

    def fn(x):
        return helper(x) * 2
    with pytest.raises(AssertionError, match="forbidden callable"):
        compile(fn, backend="eager")(torch.randn(2))


# -- .item() under fullgraph=True ------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_item_of_computed_tensor_under_fullgraph(backend):
    def fn(x):
        s = (x * 2).sum().item()
        return x + s, torch.zeros(int((x > 0).sum().item())) + 1

    counter = CompileCounter() if backend == "eager" else backend
    compiled = compile(fn, backend=counter, fullgraph=True)
    for _ in range(3):
        x = torch.randn(5)
        assert_same(compiled(x), fn(x))
    if backend == "eager":
        assert counter.frame_count == 1


@pytest.mark.parametrize("make", [lambda: torch.randint(3, (1,)), lambda: torch.randn(1),
                                  lambda: torch.randn(1) > 0], ids=["int", "float", "bool"])
def test_bool_of_item_under_fullgraph_is_a_symbolic_bool(make):
    def fn(x):
        return bool(x.item()), bool((x * 2).sum())

    compiled = compile(fn, backend="eager", fullgraph=True)
    for _ in range(4):
        x = make()
        assert_same(compiled(x), fn(x))


def test_bool_of_tensor_under_fullgraph():
    def fn(x):
        return bool(x), bool((x == 0).all())

    compiled = compile(fn, backend="eager", fullgraph=True)
    for v in (42, 0, 3.14, 0.0):
        x = torch.tensor(v)
        assert_same(compiled(x), fn(x))
    with pytest.raises(RuntimeError):
        compiled(torch.tensor([1, 2, 3]))


@pytest.mark.skipif(REFERENCE, reason="torch.compile raises its own UserError type")
def test_branch_on_item_under_fullgraph_is_an_error():
    import ember

    def fn(x):
        if (x * 2).sum().item() > 0:
            return x + 1
        return x - 1
    with pytest.raises(ember.Unsupported, match="EB0018"):
        compile(fn, backend="eager", fullgraph=True)(torch.randn(4))


# -- a break whose result is stored in a dead local --------------------------------------------------

def test_local_class_statement_compiles_the_rest():
    def fn(x):
        x += 1

        class C:
            pass
        return x.sin()

    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for _ in range(4):
        x = torch.randn(3)
        x_eager = x.clone()
        assert_same(compiled(x), fn(x_eager))
        assert_same(x, x_eager)
    assert counter.frame_count == 2  # one graph each side, no recompile per new class


def test_dead_result_of_a_breaking_call_is_not_guarded():
    made = []

    def fresh(x):
        made.append(object())
        return made[-1]

    def fn(x):
        y = x * 2
        unused = torch.compiler.disable(fresh)(y)  # noqa: F841 — a new object every call, never read
        return y + 1

    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for _ in range(4):
        x = torch.randn(3)
        assert_same(compiled(x), fn(x))
    assert counter.frame_count == 2


def test_dead_store_still_deleted_raises_like_eager():
    def fn(x):
        y = x * 2
        c = torch.compiler.disable(lambda t: t.sum())(y)
        del c
        return y + 1
    x = torch.randn(3)
    assert_same(compile(fn, backend="eager")(x), fn(x))


# -- round(symbolic float, ndigits) ----------------------------------------------------------------

def test_round_of_a_changing_float_stays_symbolic():
    def fn(x, p):
        return x * (1 - p), round(p, 3)

    counter = _calls(fn, [(torch.ones(3), 0.1 * n) for n in (2, 3, 4, 5, 6)])
    assert counter.frame_count == 2  # static, then one graph for every later value
