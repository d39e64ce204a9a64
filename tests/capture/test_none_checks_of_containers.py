"""``container is None`` / ``is not None`` is answered from the container's type
(capture/variables/base.py: is_none; interpreter.py: _same_object). It read the container as a
constant, which pinned every number in it: a dict or tuple holding a float argument, tested
``is not None`` (or asked ``callable``), recompiled for every new value of the float (one graph per learning rate) where
torch.compile makes two graphs, then treats the float as dynamic."""
import pytest
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def _kwargs_dict(x, lr):
    opts = {"lr": lr, "name": "sgd"}
    if opts is not None:
        return x - opts["lr"] * x
    return x


def _tuple(x, lr):
    betas = (lr, 0.999)
    if betas is not None:
        return x * betas[0] + betas[1]
    return x


def _list_identity(x, lr):
    group = [lr, 2.0]
    flags = (group is None, None is group, group is not None)
    return x * group[0], flags


def _nested(x, lr):
    cfg = {"opt": (lr, {"wd": 0.1})}
    if cfg["opt"] is not None and cfg["opt"][1] is not None:
        return x * cfg["opt"][0] + cfg["opt"][1]["wd"]
    return x


def _callable_container(x, lr):
    opts = (lr, {"wd": 0.1})
    return x * opts[0], callable(opts), callable(opts[1])


@pytest.mark.parametrize("fn", [_kwargs_dict, _tuple, _list_identity, _nested, _callable_container])
@pytest.mark.parametrize("dynamic", [None, True])
def test_none_check_does_not_pin_floats(fn, dynamic):
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, dynamic=dynamic)
    for lr in (0.1, 0.05, 0.025, 0.0125, 0.00625):
        x = torch.randn(3)
        assert_same(compiled(x.clone(), lr), fn(x.clone(), lr))
    # static: the first float specialized, then dynamic; dynamic=True: one graph
    assert counter.frame_count == (1 if dynamic else 2)
