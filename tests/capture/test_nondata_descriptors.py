"""Non-data descriptors written in Python (``__get__`` only) on objects made in the frame:
``torch.distributions.utils.lazy_property`` computes ``probs`` / ``logits`` on first read and
stores it on the instance. torch.compile traces their ``__get__`` (one graph); ember used to
break at the read (EB0031)."""
import pytest
import torch

from ember_test_helpers import REFERENCE, check_same


class cached_once:
    """A lazy property: ``__get__`` computes, stores on the instance (so the next read finds the
    instance dict first) and counts how often it ran."""
    calls = 0

    def __init__(self, fn):
        self.fn = fn

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        type(self).calls += 1
        value = self.fn(obj)
        obj.__dict__[self.fn.__name__] = value
        return value


class Box:
    def __init__(self, x):
        self.x = x

    @cached_once
    def doubled(self):
        return self.x * 2


def read_twice(x):
    b = Box(x)
    first = b.doubled
    second = b.doubled  # from the instance dict now: __get__ does not run again
    return first + second, "doubled" in b.__dict__


def test_python_nondata_descriptor_on_object_made_in_frame():
    # (torch.compile recompiles on the second call: it guards the class counter __get__ bumped)
    check_same(read_twice, torch.randn(3), graphs=1, check_cache=not REFERENCE)


def test_descriptor_get_runs_once_per_object_like_eager():
    from ember_test_helpers import compile
    cached_once.calls = 0
    read_twice(torch.ones(2))
    eager_calls = cached_once.calls
    cached_once.calls = 0
    compile(read_twice, fullgraph=True)(torch.ones(2))
    assert eager_calls == 1
    # (the class-level counter is a side effect replayed after the graph, once per call)
    assert cached_once.calls == eager_calls


@pytest.fixture
def no_validation():
    before = torch.distributions.Distribution._validate_args
    torch.distributions.Distribution.set_default_validate_args(False)
    yield
    torch.distributions.Distribution.set_default_validate_args(before)


def bernoulli_from_logits(x):
    d = torch.distributions.Bernoulli(logits=x)
    return d.probs * 2, d.log_prob(torch.ones_like(x))


def categorical_entropy(x):
    return torch.distributions.Categorical(logits=x).entropy()


def categorical_from_probs(x):
    return torch.distributions.Categorical(probs=torch.softmax(x, -1)).logits + 1


@pytest.mark.parametrize("fn", [bernoulli_from_logits, categorical_entropy, categorical_from_probs])
def test_distribution_lazy_properties_one_graph(fn, no_validation):
    # torch.compile: 1 graph each (it turns validation off process-wide, as this fixture does)
    check_same(fn, torch.randn(2, 4), graphs=1)
