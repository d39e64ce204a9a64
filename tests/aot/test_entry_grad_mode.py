"""A graph compiled for grad mode off at entry that turns it on inside itself (an ``enable_grad``
region, or a resume function leaving a ``no_grad`` block) is traced for training: the ops before
grad mode turns on must stay outside autograd, as in eager (the joint trace used to run the whole
program with grad mode on, so their inputs got gradients eager does not give)."""
import pytest
import torch
import torch._dynamo

import ember


@torch.compiler.disable
def _opaque():
    pass


def callee_break_in_no_grad(x):
    with torch.no_grad():
        _opaque()          # a graph break: the resume function starts with grad mode off
        y = x * 2
    return y + x


def calls_callee(x):
    return callee_break_in_no_grad(x) * 3


def no_grad_then_enable(x):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = y * x + x * 7
    return z, y


def set_grad_enabled_calls(x):
    torch.set_grad_enabled(False)
    y = x * 2
    torch.set_grad_enabled(True)
    return y * x


def break_in_enable_grad(x):
    with torch.no_grad():
        y = x * 2
        with torch.enable_grad():
            z = x * 7
            _opaque()
            q = y * x
        w = x * 5
    return z + y + w + q


# The resume function after a break inside ``no_grad`` is called with grad mode off and turns it on
# inside: what its epilogue makes of the graph's returns (views regenerated from an input or from an
# intermediate, writes into an input) must keep their autograd history, as eager's ops do.
def view_of_input_after_break_in_no_grad(x):
    t = x * 2
    with torch.no_grad():
        _opaque()
    return t[1]


def views_of_intermediate_after_break_in_no_grad(x):
    t = x * 2
    with torch.no_grad():
        _opaque()
    u = t * 3
    return u[0], u[1:]


def input_written_after_break_in_no_grad(x):
    t = x * 2
    with torch.no_grad():
        _opaque()
    t.mul_(x)
    return t


def input_view_written_after_break_in_no_grad(x):
    t = x * 2
    with torch.no_grad():
        _opaque()
    v = t[1:]
    v.add_(x[:1] * 5)
    return v, t


PROGRAMS = [callee_break_in_no_grad, calls_callee, no_grad_then_enable, set_grad_enabled_calls,
            break_in_enable_grad, view_of_input_after_break_in_no_grad,
            views_of_intermediate_after_break_in_no_grad, input_written_after_break_in_no_grad,
            input_view_written_after_break_in_no_grad]


def _run(fn, outer_grad):
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    with torch.set_grad_enabled(outer_grad):
        out = fn(x)
    outs = out if isinstance(out, tuple) else (out,)
    diff = [o for o in outs if o.requires_grad]
    if diff:
        sum(o.sum() for o in diff).backward()
    return [(o.detach(), o.requires_grad) for o in outs], x.grad


@pytest.mark.parametrize("outer_grad", [True, False])
@pytest.mark.parametrize("via", ["ember", "torch.compile"])
@pytest.mark.parametrize("fn", PROGRAMS, ids=lambda f: f.__name__)
def test_entry_grad_mode_matches_eager(fn, via, outer_grad):
    ember.reset()
    if via == "ember":
        compiled = ember.compile(fn, backend="aot_eager")
    else:
        torch._dynamo.reset()
        compiled = torch.compile(fn, backend=ember.lookup_backend("aot_eager"))
    expected, expected_grad = _run(fn, outer_grad)
    for _ in range(2):
        got, got_grad = _run(compiled, outer_grad)
        assert torch.is_grad_enabled()
        assert len(got) == len(expected)
        for (g, g_rg), (e, e_rg) in zip(got, expected):
            torch.testing.assert_close(g, e)
            assert g_rg == e_rg
        if expected_grad is None:
            assert got_grad is None
        else:
            torch.testing.assert_close(got_grad, expected_grad)


@pytest.mark.parametrize("param_grad", [True, False])
def test_a_compiled_inference_mode_function_returns_inference_tensors(param_grad):
    # @torch.inference_mode() def generate(...): eager's results are inference tensors (writing one
    # in place outside the mode, or saving it for backward, raises). The AOT graph has no
    # inference-mode region: its results were normal tensors, and those programs ran on.
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2).requires_grad_(param_grad)

    @torch.inference_mode()
    def generate(x):
        y = net(x) * 2
        return y, y.is_inference()

    compiled = ember.compile(generate, backend="aot_eager")
    for fn in (generate, compiled):
        y, flag = fn(torch.randn(2, 4))
        assert flag and y.is_inference() and not y.requires_grad
        with pytest.raises(RuntimeError, match="[Ii]nference"):
            y.add_(1)


@pytest.mark.parametrize("decorated", [True, False])
def test_an_input_written_inside_inference_mode_compiles(decorated):
    # A decode step writing its KV cache (a normal tensor) inside inference_mode: functionalizing
    # the write in real inference mode failed ("Cannot set version_counter for inference tensor"),
    # and the frame ran eagerly with a warning (strict: the error).
    def make():
        torch.manual_seed(0)
        net = torch.nn.Linear(4, 3)
        cache = torch.zeros(2, 5, 3)

        def body(x, pos):
            y = net(x)
            cache[:, pos] = y
            return cache[:, :pos + 1].mean(1)

        if decorated:
            return torch.inference_mode()(body), cache

        def step(x, pos):
            with torch.inference_mode():
                out = body(x, pos)
            return out * 2
        return step, cache

    def run(compiled):
        fn, cache = make()
        fn = ember.compile(fn, backend="aot_eager") if compiled else fn
        torch.manual_seed(1)
        outs = [fn(torch.randn(2, 4), pos) for pos in range(3)]
        return outs, [o.is_inference() for o in outs], cache.clone(), cache.is_inference()

    want, got = run(False), run(True)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:2] == want[1:2] and got[3] == want[3]
    torch.testing.assert_close(got[2], want[2])


def test_results_made_inside_an_inference_mode_region_are_inference_tensors():
    # torch.compile returns normal tensors here (so did ember): an in-place write to `pred`
    # outside the mode ran on where eager raises, and `pred.is_inference()` read False
    def make():
        torch.manual_seed(0)
        net = torch.nn.Linear(4, 1)

        def f(x):
            with torch.inference_mode():
                pred = net(x)      # (of a 3-d x: a view of the matmul's result)
                both = pred * 2
                with torch.inference_mode(False):
                    normal = both + 1
            loss = (net(x) - pred.clone()).pow(2).sum()
            return loss, pred, both, normal, x.view(-1)
        return f

    torch.manual_seed(1)
    x = torch.randn(2, 3, 4)
    want = make()(x)
    got = ember.compile(make(), backend="aot_eager")(x)
    for w, g in zip(want, got):
        torch.testing.assert_close(g, w)
        assert (g.is_inference(), g.requires_grad) == (w.is_inference(), w.requires_grad)
    with pytest.raises(RuntimeError, match="[Ii]nference"):
        got[1].add_(1)
    got[0].backward()
