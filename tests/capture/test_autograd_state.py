"""Autograd and process state inside a compiled frame, against eager: ``.grad`` of tensors the
frame makes, saved-tensor hooks while tracing, the deterministic-algorithms flag (guarded, set in
the frame, checked by the compiled backward), grad-mode toggles, version counters of inputs a
compiled kernel writes, and a ``warnings.catch_warnings`` object that escapes the frame."""
import warnings

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile, count_ops, reset


@pytest.fixture(autouse=True)
def _fresh():
    reset()
    det, warn_only = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    yield
    torch.use_deterministic_algorithms(det, warn_only=warn_only)
    reset()


def grad_of_new_leaf(a):
    t = torch.ones(2, 2)
    c = a + t
    return c * 2, t.grad, (t * 3).detach().grad


def test_grad_of_a_tensor_made_in_the_frame_is_none():
    cnt = CompileCounter()
    a = torch.ones(2, 2, requires_grad=True)
    out, g, g2 = compile(grad_of_new_leaf, backend=cnt, fullgraph=True)(a)
    ref = grad_of_new_leaf(a)
    assert g is None and g2 is None and ref[1] is None and ref[2] is None
    assert torch.equal(out, ref[0])
    assert cnt.frame_count == 1


def mul(x, y):
    return x * y


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_saved_tensor_hooks_run_as_in_eager_not_while_tracing(backend):
    counts = {"pack": 0, "unpack": 0}

    def pack(t):
        counts["pack"] += 1
        return t

    def unpack(t):
        counts["unpack"] += 1
        return t

    x = torch.ones(4, requires_grad=True)
    y = torch.ones(4)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        ref = mul(x, y)
    eager_counts = dict(counts)
    ref.sum().backward()
    eager_after = dict(counts)
    ref_grad = x.grad.clone()
    x.grad = None
    counts.update(pack=0, unpack=0)
    fn = compile(mul, backend=backend)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        out = fn(x, y)
        assert counts == eager_counts  # the compile itself ran no hook
        out.sum().backward()
    assert counts == eager_after
    assert torch.equal(out, ref) and torch.equal(x.grad, ref_grad)


def add_one(x):
    return x + 1


def test_deterministic_flag_is_guarded():
    seen = []

    def backend(gm, example_inputs):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return gm.forward

    fn = compile(add_one, backend=backend)
    x = torch.randn(3)
    for mode in (False, True, False, True):
        torch.use_deterministic_algorithms(mode)
        assert torch.equal(fn(x), x + 1)
    assert seen == [False, True]  # one graph per setting, compiled under it, then reused


def sets_deterministic(x):
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False, warn_only=False)
    after = torch.are_deterministic_algorithms_enabled()
    return x + 1, before, after


def test_use_deterministic_algorithms_in_the_frame():
    cnt = CompileCounter()
    fn = compile(sets_deterministic, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    for _ in range(2):
        torch.use_deterministic_algorithms(True, warn_only=True)
        ref = sets_deterministic(x)
        ref_state = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
        torch.use_deterministic_algorithms(True, warn_only=True)
        out = fn(x)
        state = (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled())
        assert torch.equal(out[0], ref[0]) and out[1:] == ref[1:] == (True, False)
        assert state == ref_state == (False, False)
    assert cnt.frame_count == 1


def sets_deterministic_then_breaks(x):
    torch.use_deterministic_algorithms(True)
    y = x + 1
    print("", end="")  # a graph break: the rest runs under the new setting
    return y * 2, torch.are_deterministic_algorithms_enabled()


def test_use_deterministic_algorithms_before_a_break():
    torch.use_deterministic_algorithms(False)
    x = torch.randn(3)
    out = compile(sets_deterministic_then_breaks)(x)
    assert torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(False)
    ref = sets_deterministic_then_breaks(x)
    assert torch.equal(out[0], ref[0]) and out[1] is ref[1] is True


@pytest.mark.skipif(REFERENCE, reason="the message is ember's AOT runtime's (torch's reads the same)")
def test_backward_refuses_deterministic_mode_it_was_not_compiled_for():
    fn = compile(add_one, backend="aot_eager")
    torch.use_deterministic_algorithms(False)
    a = torch.randn(4, requires_grad=True)
    out = fn(a)
    torch.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match="use_deterministic_algorithms"):
        out.sum().backward()
    torch.use_deterministic_algorithms(False)
    out = fn(a)  # compiled deterministic, run the other way: allowed (as torch)
    out.sum().backward()
    assert torch.equal(a.grad, torch.ones(4))


def toggles_grad(param, y):
    prev = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(False)
        torch.set_grad_enabled(True)
        torch.set_grad_enabled(False)
        param.add_(y)
    finally:
        torch.set_grad_enabled(prev)


def test_consecutive_grad_toggles_are_one():
    cnt = CompileCounter()
    p = torch.nn.Parameter(torch.randn(4))
    p_ref = p.detach().clone()
    y = torch.randn(4)
    compile(toggles_grad, backend=cnt, fullgraph=True)(p, y)
    assert torch.is_grad_enabled()
    assert torch.equal(p.detach(), p_ref + y) and p.requires_grad and p.is_leaf
    assert cnt.frame_count == 1 and count_ops(cnt.graphs[0]) == 3  # no_grad, add_, restore


def mul_in_place(x):
    return x.mul_(2)


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_version_counter_of_an_input_written_in_the_graph(backend):
    x = torch.randn(4)
    ref = x.clone()
    v = x._version
    out = compile(mul_in_place, backend=backend)(x)
    eager = ref.clone()
    ev = eager._version
    mul_in_place(eager)
    assert out is x and torch.equal(x, eager)
    assert x._version > v
    if not REFERENCE:  # (torch's aot_eager bumps twice: the graph's copy_ and its runtime wrapper)
        assert x._version - v == eager._version - ev == 1


def returns_catch_warnings(x):
    return x.sin(), warnings.catch_warnings(record=True)


def test_catch_warnings_object_returned():
    cnt = CompileCounter()
    fn = compile(returns_catch_warnings, backend=cnt, fullgraph=True)
    x = torch.randn(8)
    _, a = fn(x)
    out, b = fn(x)
    assert isinstance(a, warnings.catch_warnings) and isinstance(b, warnings.catch_warnings) and a is not b
    assert torch.equal(out, x.sin())
    with b as caught:  # a working, unentered object
        warnings.warn("inside")
    assert len(caught) == 1
    assert cnt.frame_count == 1


def hooks_disabled_block(x):
    with torch.autograd.graph.disable_saved_tensors_hooks("not here"):
        y = x * 2
        inside = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
    return y + 1, inside, torch._C._autograd._saved_tensors_hooks_is_enabled()


@pytest.mark.skipif(REFERENCE, reason="torch.compile cannot trace the torch._C._autograd query in the frame")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("outer", [None, "outer message"])
def test_disable_saved_tensors_hooks_block(backend, outer):
    cnt = CompileCounter()
    fn = compile(hooks_disabled_block, backend=cnt if backend == "eager" else backend, fullgraph=True)
    x = torch.randn(3, requires_grad=True)

    def run(f):
        if outer is None:
            return f(x), torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()
        with torch.autograd.graph.disable_saved_tensors_hooks(outer):
            return f(x), torch._C._autograd._saved_tensors_hooks_get_disabled_error_message()

    (ref, ref_inside, ref_enabled), ref_after = run(hooks_disabled_block)
    for _ in range(2):
        (out, inside, enabled), after = run(fn)
        assert torch.equal(out, ref) and (inside, enabled, after) == (ref_inside, ref_enabled, ref_after)
        assert torch._C._autograd._saved_tensors_hooks_is_enabled()
    out.sum().backward()
    assert torch.equal(x.grad, torch.full((3,), 2.0))
    if backend == "eager":
        assert cnt.frame_count == 1


def disables_hooks(x):
    torch._C._autograd._saved_tensors_hooks_disable("left disabled")
    return x + 1


@pytest.mark.skipif(REFERENCE, reason="torch.compile cannot trace the bare torch._C._autograd call")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_saved_tensors_hooks_left_disabled_by_the_frame(backend):
    x = torch.randn(3)
    try:
        out = compile(disables_hooks, backend=backend, fullgraph=True)(x)
        assert torch.equal(out, x + 1)
        assert torch._C._autograd._saved_tensors_hooks_get_disabled_error_message() == "left disabled"
        with pytest.raises(RuntimeError, match="left disabled"):
            with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    finally:
        torch._C._autograd._saved_tensors_hooks_enable()


def detach_in_place(x):
    y = x * 2
    z = y * 3
    v = y[:2]
    y.detach_()
    return y + 1, z + y, v * 3, y.requires_grad, y.grad_fn is None, y.is_leaf


def detach_then_write(x):
    y = x * 2
    y.detach_()
    y.add_(1)
    return y * x


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("program", [detach_in_place, detach_then_write])
def test_detach_in_place_on_an_intermediate(backend, program):
    cnt = CompileCounter()
    x = torch.randn(3, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out = compile(program, backend=cnt if backend == "eager" else backend, fullgraph=True)(x)
    ref = program(x_ref)
    out = out if isinstance(out, tuple) else (out,)
    ref = ref if isinstance(ref, tuple) else (ref,)
    loss, ref_loss = 0, 0
    for o, r in zip(out, ref):
        if isinstance(r, torch.Tensor):
            assert torch.allclose(o, r) and o.requires_grad == r.requires_grad and o.is_leaf == r.is_leaf
            if r.requires_grad:
                loss, ref_loss = loss + o.sum(), ref_loss + r.sum()
        else:
            assert o == r
    loss.backward()
    ref_loss.backward()
    assert torch.allclose(x.grad, x_ref.grad)
    if backend == "eager":
        assert cnt.frame_count == 1
