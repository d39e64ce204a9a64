"""Data-dependent checks whose failing side raises (capture/assumptions.py).

``if not valid.all(): raise ValueError(...)`` (torch.distributions' validation), ``assert
(y > 0).all()``: the graph assumes the check passes, the entry tests it after the graph, and a
failing check runs the frame again eagerly (eager's exception, side effects once). torch.compile
2.13 breaks the graph at the validation here (0 to 2 graphs for the programs below; run alone it
sometimes leaves the validation out), and turns a tensor ``assert`` into a RuntimeError: those
counts and errors are ember's own.
"""
import builtins

import pytest
import torch
import torch.distributions as D

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


@pytest.fixture
def validation():
    before = D.Distribution._validate_args
    D.Distribution.set_default_validate_args(True)
    yield
    D.Distribution.set_default_validate_args(before)


PROGRAMS = {
    "normal_log_prob": lambda x: D.Normal(x, 1.0).log_prob(x),
    "normal_entropy": lambda x: D.Normal(x, torch.ones(4)).entropy(),
    "normal_cdf": lambda x: D.Normal(x, 1.0).cdf(x),
    "categorical": lambda x: (D.Categorical(logits=x).log_prob(torch.tensor(1)), D.Categorical(logits=x).entropy()),
    "bernoulli": lambda x: (D.Bernoulli(logits=x).log_prob(torch.ones(4)), D.Bernoulli(logits=x).entropy()),
    "independent": lambda x: D.Independent(D.Normal(x, 1.0), 1).log_prob(x),
    "beta": lambda x: D.Beta(x.exp(), 2.0).log_prob(torch.full((4,), 0.3)),
    "lognormal": lambda x: D.LogNormal(x, 1.0).log_prob(x.exp()),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_distributions_with_validation_make_one_graph(name, validation):
    if REFERENCE:
        pytest.skip("torch.compile 2.13 breaks at the validation (0 to 2 graphs)")
    cnt = CompileCounter()
    compiled = compile(PROGRAMS[name], backend=cnt)
    for _ in range(2):
        x = torch.randn(4)
        assert_same(compiled(x), PROGRAMS[name](x))
    assert cnt.frame_count == 1


def _same_outcome(compiled, fn, *args):
    try:
        ref = fn(*args)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e)) as info:
            compiled(*args)
        assert str(info.value) == str(e)
        return
    assert_same(compiled(*args), ref)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 drops distribution validation (no ValueError)")
def test_invalid_distribution_argument_raises_as_eager(validation):
    def f(x, scale):
        return D.Normal(x, scale).log_prob(x)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for scale in (torch.ones(3), -torch.ones(3), torch.full((3,), 2.0)):
        _same_outcome(compiled, f, torch.randn(3), scale)
    assert cnt.frame_count == 1


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 drops distribution validation (no ValueError)")
def test_sample_outside_the_support_raises_as_eager(validation):
    def f(p, value):
        return D.Bernoulli(probs=p).log_prob(value)
    compiled = compile(f, backend=CompileCounter())
    _same_outcome(compiled, f, torch.full((3,), 0.3), torch.ones(3))
    _same_outcome(compiled, f, torch.full((3,), 0.3), torch.full((3,), 0.5))


# (compiled from text: pytest rewrites the assert statements of test modules)
_ASSERTS = {}
exec(builtins.compile("def f(x):\n    y = x * 2\n    assert (y > 0).all(), 'positive'\n    return y + 1\n",
             "<asserting program>", "exec"), _ASSERTS)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 raises RuntimeError for a failing tensor assert")
def test_assert_on_a_tensor():
    f = _ASSERTS["f"]
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for x in (torch.ones(3), -torch.ones(3), torch.full((3,), 2.0)):
        _same_outcome(compiled, f, x)
    assert cnt.frame_count == 1


def test_failed_check_does_side_effects_once():
    log = []

    def f(x):
        log.append(len(log))
        y = x.sin()
        if torch.isnan(y).any():
            raise RuntimeError("nan!")
        return y
    compiled = compile(f, backend=CompileCounter())
    compiled(torch.ones(2))
    with pytest.raises(RuntimeError, match="nan!"):
        compiled(torch.tensor([float("nan"), 1.0]))
    assert log == [0, 1]


def test_caught_check_takes_the_handler():
    def f(x):
        try:
            if not (x > 0).all():
                raise ValueError("bad")
            return x + 1
        except ValueError:
            return x - 1
    compiled = compile(f, backend=CompileCounter())
    for x in (torch.ones(3), -torch.ones(3)):
        assert_same(compiled(x), f(x))


def test_write_before_the_check_keeps_the_break():
    def f(x):
        x.add_(1)
        if not (x > 0).all():
            raise ValueError("bad")
        return x * 2
    compiled = compile(f, backend=CompileCounter())
    for v in (1.0, -5.0):
        a, b = torch.full((3,), v), torch.full((3,), v)
        try:
            ref = f(b)
        except ValueError:
            with pytest.raises(ValueError, match="bad"):
                compiled(a)
        else:
            assert_same(compiled(a), ref)
        assert_same(a, b)  # written once, as eager


def test_write_after_the_check_ends_the_graph():
    def f(x):
        if not (x > 0).all():
            raise ValueError("bad")
        y = x.clone()
        y.add_(1)
        return y * 2
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for x in (torch.ones(3), -torch.ones(3) * 5, torch.full((3,), 3.0)):
        _same_outcome(compiled, f, x)


def test_branch_without_a_raise_still_breaks():
    def f(x):
        if (x > 0).all():
            return x + 1
        return x - 1
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for x in (torch.ones(3), -torch.ones(3)):
        assert_same(compiled(x), f(x))


@pytest.mark.parametrize("name", ["normal", "categorical", "bernoulli"])
def test_sampling_after_validation_makes_one_graph(name, validation):
    programs = {
        "normal": lambda x: D.Normal(x, 1.0).sample(),
        "categorical": lambda x: D.Categorical(logits=x).sample(),
        "bernoulli": lambda x: D.Bernoulli(logits=x).sample(),
    }
    fn = programs[name]
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    for seed in range(2):
        x = torch.randn(4)
        torch.manual_seed(seed)
        out = compiled(x)
        torch.manual_seed(seed)
        assert_same(out, fn(x))
    if not REFERENCE:
        assert cnt.frame_count == 1


def _same_as_eager_from_seed(f, compiled, *args):
    """From the same seed: compiled(*args) returns or raises (ValueError) as f(*args), and leaves
    torch's RNG where eager leaves it."""
    torch.manual_seed(0)
    try:
        ref = f(*args)
    except ValueError:
        ref = None
    after_eager = torch.random.get_rng_state()
    torch.manual_seed(0)
    if ref is None:
        with pytest.raises(ValueError):
            compiled(*args)
    else:
        assert_same(compiled(*args), ref)
    assert torch.equal(torch.random.get_rng_state(), after_eager)


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 drops distribution validation (no ValueError)")
def test_failed_check_after_a_draw_leaves_the_rng_as_eager(validation):
    def f(p, value):
        d = D.Bernoulli(probs=p)
        s = d.sample()
        return s, d.log_prob(value)
    compiled = compile(f, backend=CompileCounter())
    p = torch.full((3,), 0.4)
    for value in (torch.ones(3), torch.full((3,), 0.5)):
        _same_as_eager_from_seed(f, compiled, p, value)


def test_check_on_an_input_with_no_graph():
    # nothing computed: no graph to test the check after, so the frame runs as it is
    def f(x, flag):
        if not flag:
            raise ValueError("no")
        return x
    compiled = compile(f, backend=CompileCounter())
    assert_same(compiled(torch.ones(2), torch.tensor([True])), torch.ones(2))
    with pytest.raises(ValueError, match="no"):
        compiled(torch.ones(2), torch.tensor([False]))


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 drops distribution validation (no ValueError)")
def test_rsample_after_validation_one_graph_and_rng_as_eager(validation):
    # rsample writes normal_() into a tensor it made (torch.empty): no state a rerun sees but the RNG
    def f(mu, value):
        d = D.Normal(mu, torch.ones(3))
        return d.rsample(), d.log_prob(value), d.cdf(value)
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    mu = torch.zeros(3)
    for value in (torch.ones(3), torch.tensor([0.5, float("nan"), 1.0]), torch.full((3,), 2.0)):
        _same_as_eager_from_seed(f, compiled, mu, value)
    assert cnt.frame_count == 1


def test_writes_into_tensors_the_graph_made_after_the_check():
    def f(x):
        y = torch.zeros(3)
        if not (x > 0).all():
            raise ValueError("bad")
        y.add_(x)
        y[0] = 7.0
        return y * 2
    cnt = CompileCounter()
    compiled = compile(f, backend=cnt)
    for x in (torch.ones(3), -torch.ones(3), torch.full((3,), 3.0)):
        _same_outcome(compiled, f, x)
    if not REFERENCE:
        assert cnt.frame_count == 1


def test_write_into_a_view_of_an_input_after_the_check_keeps_eagers_state():
    def f(x, log):
        log.append(1)
        if not (x > 0).all():
            raise ValueError("bad")
        v = x[:2]
        v.mul_(3)
        return x + 1
    compiled = compile(f, backend=CompileCounter())
    for val in (1.0, -1.0, 2.0):
        a, b = torch.full((3,), val), torch.full((3,), val)
        la, lb = [], []
        try:
            ref = f(b, lb)
        except ValueError:
            with pytest.raises(ValueError, match="bad"):
                compiled(a, la)
        else:
            assert_same(compiled(a, la), ref)
        assert_same(a, b)  # written once, as eager
        assert la == lb


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 drops distribution validation (no ValueError)")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gamma_rsample_then_failed_check_leaves_the_rng_as_eager(validation, backend):
    # torch._standard_gamma draws (under a name without "rand"): the entry puts the RNG state back
    # before the rerun, so the rerun draws what eager drew
    def f(c, value):
        d = D.Gamma(c, torch.ones(3))
        return d.rsample(), d.log_prob(value)
    compiled = compile(f, backend=backend)
    for value in (torch.ones(3), -torch.ones(3)):
        _same_as_eager_from_seed(f, compiled, torch.ones(3), value)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("first_fails", [True, False])
@pytest.mark.parametrize("with_log", [False, True])
def test_input_write_after_the_check_undone_on_aot_backends(backend, first_fails, with_log):
    # ember's AOT backends write inputs after the graph (the epilogue): a graph that raises half-way
    # wrote nothing, but an assumed check is tested after the whole graph ran, epilogue included.
    # Without a side effect of the frame (which copied the written inputs anyway), the written
    # input was left halved when the check then failed (found by fuzz seeds 3960068/3960080)
    def f(x, y, log):
        if not (y > 0).all():  # (an `assert` here would be rewritten by pytest)
            raise ValueError("not positive")
        y.view(2, 2).transpose(0, 1).mul_(0.5)
        if with_log:
            log.append(len(log))
        return x * 2 + y
    compiled = compile(f, backend=backend)
    values = [torch.tensor([0.9, 0.4, -0.9, -0.6]), torch.tensor([1.0, 2.0, 3.0, 4.0])]
    if not first_fails:
        values.reverse()
    for v in values + values:
        x = torch.arange(4.0)
        ya, yb, la, lb = v.clone(), v.clone(), [], []
        try:
            ref = f(x, yb, lb)
        except ValueError:
            with pytest.raises(ValueError, match="not positive"):
                compiled(x, ya, la)
        else:
            assert_same(compiled(x, ya, la), ref)
        assert_same(ya, yb)  # written once, or not at all, as eager
        assert la == lb
