"""A graph that raises at run time: the state eager leaves behind (appends, attributes, in-place
updates of inputs and buffers before the failing op) and eager's exception (ember/capture/rerun.py)."""
import pytest
import torch

import ember


def list_append_then_error(x, idx, log):
    log.append("called")
    return x.gather(0, idx)


class Counter:
    steps = 0


def attr_then_error(x, idx, obj):
    obj.steps += 1
    return x.index_select(0, idx)


def mutate_input_then_error(x, idx, buf):
    buf.add_(1)
    return x.gather(0, idx) + buf.sum()


def _state(arg):
    return list(arg) if isinstance(arg, list) else (arg.steps if isinstance(arg, Counter) else arg.clone())


@pytest.mark.parametrize("fn,make", [(list_append_then_error, list), (attr_then_error, Counter),
                                     (mutate_input_then_error, lambda: torch.zeros(2))],
                         ids=["list", "attr", "inplace_input"])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_state_before_the_failing_op_is_eagers(fn, make, backend):
    ember.reset()
    compiled = ember.compile(fn, backend=backend)
    ok_idx, bad_idx = torch.tensor([0, 1]), torch.tensor([0, 7])
    expected_state, got_state = make(), make()
    torch.testing.assert_close(compiled(torch.ones(4), ok_idx, got_state), fn(torch.ones(4), ok_idx, expected_state))
    for f, state in ((fn, expected_state), (compiled, got_state)):
        with pytest.raises((RuntimeError, IndexError)) as info:
            f(torch.ones(4), bad_idx, state)
        if f is fn:
            eager_error = (type(info.value), str(info.value))
        else:
            assert (type(info.value), str(info.value)) == eager_error
    # (the eager backend runs the graph's in-place ops as it goes, as eager does: no rerun there,
    # which would add twice)
    assert _state(got_state) == _state(expected_state) if not isinstance(got_state, torch.Tensor) \
        else torch.equal(got_state, expected_state)
    assert ember.stats()["recompiles"] == 0


def test_the_frames_own_handler_catches_an_error_raised_in_the_graph():
    def f(x, idx):
        try:
            y = x.gather(0, idx)
        except RuntimeError:
            y = torch.zeros(2)
        return y + 1
    ember.reset()
    compiled = ember.compile(f)
    for idx in (torch.tensor([0, 1]), torch.tensor([0, 9]), torch.tensor([1, 2])):
        torch.testing.assert_close(compiled(torch.ones(4), idx), f(torch.ones(4), idx))
    assert ember.stats()["recompiles"] == 0 and ember.stats()["fallbacks"] == 0


# ---- a graph that changed grad mode / autocast and raises half-way restores them ----

def _no_grad_gather(x, idx):
    with torch.no_grad():
        return x.gather(0, idx) * 2


def _no_grad_gather_mutating(x, idx, acc):
    with torch.no_grad():
        acc.add_(1)  # (an input mutation: no eager rerun)
        return x.gather(0, idx) * 2


def _autocast_gather(x, idx):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return (x @ x.T).gather(0, idx.view(1, -1)) * 2


@pytest.mark.parametrize("fn", [_no_grad_gather, _no_grad_gather_mutating, _autocast_gather])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_state_restored_when_the_graph_raises(fn, backend):
    import ember
    ember.reset()
    f = ember.compile(fn, backend=backend)
    x = torch.randn(4, 4) if fn is _autocast_gather else torch.randn(4)
    extra = (torch.zeros(2),) if fn is _no_grad_gather_mutating else ()
    f(x, torch.tensor([0, 1]), *extra)
    with pytest.raises(RuntimeError, match="out of bounds"):
        f(x, torch.tensor([0, 9]), *extra)
    assert torch.is_grad_enabled()
    assert not torch.is_autocast_enabled("cpu")


# ---- graphs whose partial run changed state are not rerun (random draws, running stats) ----

def _gumbel_then_bad_target(logits, target):
    z = torch.nn.functional.gumbel_softmax(logits, tau=0.5, hard=True)
    return torch.nn.functional.cross_entropy(z, target)


def _rrelu_then_bad_target(logits, target):
    return torch.nn.functional.cross_entropy(torch.nn.functional.rrelu(logits, training=True), target)


@pytest.mark.parametrize("fn", [_gumbel_then_bad_target, _rrelu_then_bad_target])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_random_draws_before_the_error_are_not_repeated(fn, backend):
    import ember

    def run(f):
        torch.manual_seed(0)
        x = torch.randn(4, 3)
        f(x, torch.tensor([0, 1, 2, 0]))
        with pytest.raises((IndexError, RuntimeError)):
            f(x, torch.tensor([0, 1, 7, 0]))
        return torch.rand(3)
    expected = run(fn)
    ember.reset()
    torch.testing.assert_close(run(ember.compile(fn, backend=backend)), expected)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_running_stats_updated_before_the_error_are_not_repeated(backend):
    import ember
    import torch.nn as nn

    def run(compile):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv1d(2, 3, 1), nn.InstanceNorm1d(3, track_running_stats=True), nn.Flatten(),
                          nn.Linear(12, 3))

        def step(x, y):
            return torch.nn.functional.cross_entropy(m(x), y)
        f = compile(step)
        x = torch.randn(2, 2, 4)
        f(x, torch.tensor([0, 1]))
        with pytest.raises((IndexError, RuntimeError)):
            f(x, torch.tensor([0, 9]))
        return m[1].running_mean
    expected = run(lambda f: f)
    ember.reset()
    torch.testing.assert_close(run(lambda f: ember.compile(f, backend=backend)), expected)
