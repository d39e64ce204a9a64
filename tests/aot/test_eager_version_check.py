"""An input modified in place after an op saved it: eager's backward raises ("modified by an
inplace operation"); the compiled program must not return gradients eager never computes."""
import pytest
import torch

import ember


def saves_then_mutates(x):
    t = x * x  # saves x
    x.sub_(1)
    return t


@pytest.mark.parametrize("backend", ["aot_eager"])
def test_backward_raises_like_eager(backend):
    x = torch.randn(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        saves_then_mutates(x).sum().backward()
    ember.reset()
    x = torch.randn(3, requires_grad=True) * 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with ember.config.patch(strict=False):
            ember.compile(saves_then_mutates, backend=backend)(x).sum().backward()


def test_mutation_after_a_use_that_saves_nothing_still_compiles():
    def f(x):
        t = x + 1  # add saves nothing
        x.mul_(2)
        return t * 3
    x1 = torch.randn(3, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_()
    a, b = x1 * 1, x2 * 1
    f(a).sum().backward()
    ember.reset()
    ember.compile(f, backend="aot_eager")(b).sum().backward()
    torch.testing.assert_close(x2.grad, x1.grad)
    torch.testing.assert_close(b, a)
    assert ember.stats()["fallbacks"] == 0 and ember.stats()["graphs"] == 1


# ---- the input's final value is saved, and the program changes the input after the frame ----

def _run(fn, after, compiled, backend="aot_eager"):
    """(error message or None, leaf gradients, outputs) for fn, then ``after`` on its inputs."""
    torch.manual_seed(0)
    leaves = [torch.randn(3, requires_grad=True) for _ in range(2)]
    y, w = leaves[0] * 1, leaves[1] * 1
    f = ember.compile(fn, backend=backend) if compiled else fn
    outs = f(y, w)
    try:
        loss = after(y, w, outs)
        loss.backward()
    except RuntimeError as e:
        return str(e), None
    return None, [l.grad for l in leaves]


def _square_after_add(y, w):
    y.add_(1)
    return y * y, w * 2  # mul saves y at its final version


def _exp_after_add(y, w):
    y.add_(1)
    return y.exp(), w * 2  # exp saves its result, not y


def _scale_after_add(y, w):
    y.add_(1)
    return y * 3, w * w  # mul by a number saves nothing of y


def _relu_in_place(y, w):
    y.relu_()  # saves its result: y itself
    return y * 2, w


def _detach_times_after_add(y, w):
    y.add_(1)
    return y.detach() * y, w * 2  # mul saves y.detach(): no _base, y's storage and version counter


def _detached_view_times_after_add(y, w):
    y.add_(1)
    return y.detach()[1:] * y[1:], w * 2


def _mutated(y, w, outs):
    y.mul_(2)
    return outs[0].sum() + outs[1].sum()


def _mutated_other_output_only(y, w, outs):
    y.mul_(2)
    return outs[1].sum()  # no gradient reaches the op that saved y


def _untouched(y, w, outs):
    return outs[0].sum() + outs[1].sum()


CASES = [
    (_square_after_add, _mutated, True),
    (_square_after_add, _mutated_other_output_only, False),
    (_square_after_add, _untouched, False),
    (_exp_after_add, _mutated, False),
    (_scale_after_add, _mutated, False),
    (_relu_in_place, _mutated, True),
    (_relu_in_place, _untouched, False),
    (_detach_times_after_add, _mutated, True),
    (_detach_times_after_add, _untouched, False),
    (_detached_view_times_after_add, _mutated, True),
]


@pytest.mark.parametrize("fn,after,raises", CASES,
                         ids=[f"{f.__name__}-{a.__name__}" for f, a, _ in CASES])
def test_final_value_saved_then_changed_after_the_frame(fn, after, raises):
    err_eager, grads_eager = _run(fn, after, compiled=False)
    assert (err_eager is not None) == raises  # the case is what it says
    ember.reset()
    err, grads = _run(fn, after, compiled=True)
    if raises:
        assert err is not None and "modified by an inplace operation" in err
    else:
        assert err is None, err
        for a, b in zip(grads, grads_eager):
            torch.testing.assert_close(a, b)
    assert ember.stats()["fallbacks"] == 0


def test_final_value_check_across_a_graph_break():
    def f(y):
        y.clamp_(min=-1)
        z = y * y
        torch._dynamo.graph_break()
        y.add_(1)
        return z
    leaf = torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        f(leaf * 1).sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        ember.compile(f, backend="aot_eager")(leaf * 1).sum().backward()


def test_compiles_under_anomaly_detection():
    """Anomaly mode's NaN checks would read fake values while tracing: tracing runs without it; the
    compiled backward still reports a NaN as eager does (same error type)."""
    lin = torch.nn.Linear(3, 2)

    def loss_of(x):
        return lin(x).exp().sum()
    x = torch.randn(4, 3)
    ember.reset()
    with torch.autograd.detect_anomaly(check_nan=True):
        c = ember.compile(loss_of, backend="aot_eager")
        torch.testing.assert_close(c(x), loss_of(x))
        c(x).backward()
        x_nan = x.clone()
        x_nan[0, 0] = float("nan")
        with pytest.raises(RuntimeError, match="nan values"):
            c(x_nan).backward()
    assert ember.stats()["fallbacks"] == 0


# ---- the graph itself changes a tensor an op saved: the captured graph runs as it is ----

def _saved_intermediate_modified(x, w):
    t = x * 2
    t -= t.sin()  # sin saved t; t changes after
    return t * w, (w * 3).sum()


def _saved_input_modified(x, w):
    z = w.sin()  # saves w
    w.mul_(2)
    return z + x, x.cos().sum()


@pytest.mark.parametrize("fn", [_saved_intermediate_modified, _saved_input_modified])
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_graph_that_modifies_a_saved_tensor_compiles_as_captured(fn, backend, recwarn):
    """torch.compile's AOT layer fails on these (BackendCompilerFailed at the first call, where
    eager's forward runs); ember keeps the frame compiled (one graph, no warning, no fallback)
    by running the captured graph with eager autograd: same forward, same backward error, and the
    gradients of outputs whose backward eager can compute."""
    def run(f):
        torch.manual_seed(0)
        x, w0 = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
        results = []
        for _ in range(2):
            w = w0 * 1
            a, b = f(x, w)
            b.backward()  # needs nothing that changed
            try:
                a.sum().backward()
                err = None
            except RuntimeError as e:
                err = str(e).split(":")[0]
            results.append((a.detach(), b.detach(), w.detach(), err,
                            *[None if t.grad is None else t.grad.clone() for t in (x, w0)]))
        return results
    expected = run(fn)
    ember.reset()
    got = run(ember.compile(fn, backend=backend))
    for e, g in zip(expected, got):
        assert e[3] == g[3]
        for te, tg in zip(e[:3] + e[4:], g[:3] + g[4:]):
            assert (te is None) == (tg is None)
            if te is not None:
                torch.testing.assert_close(tg, te)
    assert any(e[3] for e in expected)  # eager does reject the backward
    stats = ember.stats()
    assert stats["graphs"] == 1 and stats["fallbacks"] == 0
    assert not [w for w in recwarn if "ember" in str(w.message)]


# ---- the same with inputs that alias each other (a synthetic base: aot/aliasing.py) ----------

def _writes_saves_and_reads_alias(y, v):
    y[2] = 4.0
    z = y.sin()  # saves y's final value
    return z, v * 1


@pytest.mark.parametrize("write_after", [True, False])
def test_aliased_inputs_final_value_saved_then_written(write_after):
    """``y`` and a view of it are both inputs: the graph takes their synthetic base. A write into
    ``y`` (through the view) after the graph, before the backward, makes eager's backward raise;
    the compiled one raised nothing and returned gradients (fuzz seed 1100194)."""
    results = []
    for compiled in (False, True):
        ember.reset()
        torch.manual_seed(0)
        leaf = torch.rand(4, dtype=torch.float64, requires_grad=True)
        y = leaf * 1
        v = y.unsqueeze(0)
        fn = ember.compile(_writes_saves_and_reads_alias, backend="aot_eager") if compiled \
            else _writes_saves_and_reads_alias
        z, r = fn(y, v)
        if write_after:
            v[:, 1] = 3.0
        try:
            (z.sum() + r.sum()).backward()
            results.append(leaf.grad)
        except RuntimeError as e:
            results.append(str(e).split(",")[0])
    if write_after:
        assert "modified by an inplace operation" in results[0]
    assert type(results[1]) is type(results[0])
    if isinstance(results[0], torch.Tensor):
        torch.testing.assert_close(results[1], results[0])
    else:
        assert results[1] == results[0]


@torch.compiler.disable
def _opaque(t):
    return t * 2 + 1


def test_aliased_inputs_written_through_a_view_in_a_later_graph():
    def f(y):
        v1 = y.unsqueeze(0)
        _opaque(y)
        y[2] = 4.0
        z = y.sin()
        t7 = v1 * 1  # (v1 and y: aliased inputs of this graph)
        t10 = _opaque(v1)
        v1[:, 2] = 3.0  # (a later graph)
        return t10, t7, z

    errors = []
    for compiled in (False, True):
        ember.reset()
        leaf = torch.rand(4, dtype=torch.float64, requires_grad=True)
        out = (ember.compile(f, backend="aot_eager") if compiled else f)(leaf * 1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as info:
            sum(o.sum() for o in out).backward()
        errors.append(str(info.value).split(",")[0])
    assert errors[1] == errors[0]
