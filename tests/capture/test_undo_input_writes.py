"""A graph that writes an input and then raises at run time, in a frame with deferred side effects
or a ``finally`` body (capture/write_snapshots.py): the entry puts the written inputs back and runs
the frame again eagerly, so the program sees eager's lists, attributes, globals and tensors."""
import pytest
import torch

import ember
from tests.helpers import CompileCounter

LOG = []


def append_then_write(x, idx, log, buf):
    log.append("called")
    buf.add_(1)
    return x.gather(0, idx)


def write_then_append_after_failure(x, idx, log, buf):
    buf.add_(1)
    y = x.gather(0, idx)
    log.append("after")
    return y


def finally_body(a, buf):
    buf.mul_(3)
    try:
        return torch.linalg.cholesky(a)
    finally:
        LOG.append("done")


def view_write(x, idx, log, buf):
    log.append(len(log))
    buf[0].add_(5)
    buf[1:].mul_(2)
    return x.gather(0, idx) + buf.sum()


class Counted(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(3)
        self.calls = 0

    def forward(self, x, idx):
        self.calls += 1
        h = self.bn(x)
        return h.gather(0, idx)


def _run(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001
        return None, e


def _fresh():
    return torch.ones(4), [], torch.zeros(3)


@pytest.mark.parametrize("fn", [append_then_write, write_then_append_after_failure, view_write])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_deferred_effects_match_eager_when_the_graph_raises(fn, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    for idx in (torch.tensor([0, 1]), torch.tensor([0, 9]), torch.tensor([2, 3])):
        x, log, buf = _fresh()
        want, want_err = _run(fn, x, idx, log, buf)
        x2, log2, buf2 = _fresh()
        got, got_err = _run(compiled, x2, idx, log2, buf2)
        assert type(got_err) is type(want_err)
        if want_err is None:
            torch.testing.assert_close(got, want)
        assert log2 == log
        torch.testing.assert_close(buf2, buf)


def test_finally_body_runs_when_the_graph_raises():
    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(finally_body, backend=counter)
    for a in (torch.eye(3) * 2, -torch.eye(3), torch.eye(3)):
        results = []
        for fn in (finally_body, compiled):
            LOG.clear()
            buf = torch.ones(2)
            out, err = _run(fn, a, buf)
            results.append((out, type(err), list(LOG), buf))
        (want, want_err, want_log, want_buf), (got, got_err, got_log, got_buf) = results
        assert got_err is want_err and got_log == want_log == ["done"]
        torch.testing.assert_close(got_buf, want_buf)
        if want_err is None:
            torch.testing.assert_close(got, want)
    assert counter.frame_count == 1  # (no graph break: the undo is at run time)


def test_module_counter_and_running_stats_match_eager():
    torch.manual_seed(0)
    eager_model = Counted().train()
    model = Counted().train()
    model.load_state_dict(eager_model.state_dict())
    compiled = ember.compile(model, backend="eager")
    x = torch.randn(4, 3)
    for idx in (torch.zeros(2, 3, dtype=torch.long), torch.full((2, 3), 7), torch.ones(2, 3, dtype=torch.long)):
        want, want_err = _run(eager_model, x, idx)
        got, got_err = _run(compiled, x, idx)
        assert type(got_err) is type(want_err)
        if want_err is None:
            torch.testing.assert_close(got, want)
        assert model.calls == eager_model.calls
        torch.testing.assert_close(model.bn.running_mean, eager_model.bn.running_mean)
        torch.testing.assert_close(model.bn.running_var, eager_model.bn.running_var)
        assert int(model.bn.num_batches_tracked) == int(eager_model.bn.num_batches_tracked)


def test_successful_calls_are_unchanged_and_compile_once():
    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(append_then_write, backend=counter)
    for _ in range(3):
        x, log, buf = _fresh()
        out = compiled(x, torch.tensor([1, 2]), log, buf)
        torch.testing.assert_close(out, torch.ones(2))
        assert log == ["called"]
        torch.testing.assert_close(buf, torch.ones(3))
    assert counter.frame_count == 1


def test_an_input_requiring_grad_is_not_undone_and_the_error_propagates():
    # a write to a non-leaf that requires grad rebases its autograd history: copying the values
    # back would not undo that, so the entry does not try (the error propagates as before)
    ember.reset()

    def f(x, idx, log):
        log.append(1)
        y = x * 1
        y.add_(1)
        return y.gather(0, idx)

    compiled = ember.compile(f, backend="eager")
    x = torch.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor([9]), [])
    out = compiled(x, torch.tensor([1]), [])
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([0.0, 1.0, 0.0, 0.0]))


def test_random_draws_are_not_undone_without_the_rng_state():
    # a rerun would draw other numbers than the graph's partial run did: no undo (the error
    # propagates as before, and a successful call is right)
    ember.reset()

    def f(x, idx, log, buf):
        log.append("called")
        buf.add_(torch.rand(3))
        return x.gather(0, idx)

    compiled = ember.compile(f, backend="eager")
    x, log, buf = _fresh()
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor([9]), log, buf)
    torch.manual_seed(3)
    x, log, buf = _fresh()
    out = compiled(x, torch.tensor([1]), log, buf)
    torch.manual_seed(3)
    x2, log2, buf2 = _fresh()
    want = f(x2, torch.tensor([1]), log2, buf2)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(buf, buf2)
    assert log == log2


# -- ops a try may catch, after input writes (capture/caught_ops.py): one graph, undone on failure


def write_then_try(a, buf):
    buf.add_(1)
    try:
        return torch.linalg.cholesky(a) * 2
    except RuntimeError:
        return a * 0


def try_then_write(a, buf):
    try:
        out = torch.linalg.cholesky(a)
    except RuntimeError:
        out = a
    buf.add_(1)
    return out * 2


def _compare_caught(fn, buf_size, backend="eager", fullgraph=False):
    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(fn, backend=counter, fullgraph=fullgraph)
    for a in (torch.eye(3) * 2, -torch.eye(3), torch.eye(3)):
        want_buf, got_buf = torch.zeros(buf_size), torch.zeros(buf_size)
        want, got = fn(a, want_buf), compiled(a, got_buf)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_buf, want_buf)
    return counter.frame_count


@pytest.mark.parametrize("fn", [write_then_try, try_then_write])
def test_ops_a_try_may_catch_stay_in_one_graph(fn):
    assert _compare_caught(fn, 4) == 1


def test_fullgraph_with_a_caught_op_after_a_write():
    assert _compare_caught(write_then_try, 4, fullgraph=True) == 1


@pytest.mark.parametrize("fn", [write_then_try, try_then_write])
def test_writes_too_large_to_copy_break_the_graph_instead(fn):
    # (above write_snapshots.MAX_BYTES: traced again with the break before the caught op)
    from ember.capture.write_snapshots import MAX_BYTES
    assert _compare_caught(fn, MAX_BYTES // 4 + 16) >= 2  # (values as eager; a break: more graphs)


def test_training_step_inside_try():
    torch.manual_seed(0)
    lin, bn = torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)
    lin2, bn2 = torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)
    lin2.load_state_dict(lin.state_dict())

    def step(lin, bn, x):
        try:
            return bn(lin(x)).relu().sum()
        except RuntimeError:
            return None

    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(step, backend=counter)
    for _ in range(3):
        x = torch.randn(4, 3)
        torch.testing.assert_close(compiled(lin2, bn2, x), step(lin, bn, x))
        torch.testing.assert_close(bn2.running_mean, bn.running_mean)
        torch.testing.assert_close(bn2.running_var, bn.running_var)
    assert counter.frame_count == 1  # (torch.compile: 1; the write used to end the graph: 3)


def test_write_after_an_assumed_data_dependent_check():
    # clip_grad_norm_(error_if_nonfinite=True): `if total_norm is not finite: raise` is assumed
    # false and tested after the graph (capture/assumptions.py); the clipping writes the grads.
    # The graph keeps both; a failed check puts the grads back and reruns eagerly (eager's error).
    def clip(params):
        n = torch.nn.utils.clip_grad_norm_(params, 0.5, error_if_nonfinite=True, foreach=True)
        return n, [p.grad.clone() for p in params]

    ember.reset()
    counter = CompileCounter()
    compiled = ember.compile(clip, backend=counter)
    for scale in (1.0, float("inf"), 3.0):
        params = []
        for fn in (clip, compiled):
            ps = [torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2))]
            for i, p in enumerate(ps):
                p.grad = torch.arange(p.numel(), dtype=torch.float32) * scale + i
            out, err = _run(fn, ps)
            params.append((out, type(err), [p.grad.clone() for p in ps]))
        (want, want_err, want_grads), (got, got_err, got_grads) = params
        assert got_err is want_err
        if want_err is None:
            torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_grads, want_grads, equal_nan=True)
    assert counter.frame_count == 1


def test_parameter_updated_under_no_grad_then_finally():
    # a leaf that requires grad, written under no_grad (an update), then an op that raises inside
    # try/finally: the write is undone and the frame rerun, so the finally body runs as in eager
    log = []

    def fn(p, a):
        try:
            with torch.no_grad():
                p.mul_(2)
            y = torch.linalg.cholesky(a)
        finally:
            log.append(p.sum().item())
        return y + p.sum()

    ember.reset()
    compiled = ember.compile(fn, backend="eager")
    for a in (torch.eye(3) * 2, -torch.eye(3)):
        results = []
        for f in (fn, compiled):
            log.clear()
            p = torch.ones(3, requires_grad=True)
            out, err = _run(f, p, a)
            results.append((out, type(err), list(log), p.detach().clone(), p.is_leaf))
        (want, want_err, want_log, want_p, want_leaf), (got, got_err, got_log, got_p, got_leaf) = results
        assert got_err is want_err and got_log == want_log and got_leaf == want_leaf
        torch.testing.assert_close(got_p, want_p)
        if want_err is None:
            torch.testing.assert_close(got, want)
