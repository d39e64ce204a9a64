"""Instance attributes on an OrderedDict / defaultdict made in the frame: ``Module.state_dict()``
sets ``destination._metadata = OrderedDict()`` and reads it back through ``hasattr``. torch.compile
captures ``state_dict()`` in forward in one graph; ember broke four times (EB0031/EB0032)."""
import collections

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, check_same, compile


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3))


def test_state_dict_in_forward_one_graph():
    mod = _model()

    def f(x):
        sd = mod.state_dict()
        return x + sd["0.weight"].sum() + sd["1.running_mean"].sum()

    check_same(f, torch.randn(4, 2), graphs=1)  # torch.compile: 1 graph


def test_escaping_state_dict_keeps_its_metadata():
    mod = _model()

    def f(x):
        sd = mod.state_dict(keep_vars=True)
        return x + 1, sd

    counter = CompileCounter()
    out, sd = compile(f, backend=counter, fullgraph=True)(torch.ones(4, 2))
    _, expected = f(torch.ones(4, 2))
    assert counter.frame_count == 1
    assert type(sd) is collections.OrderedDict
    assert list(sd) == list(expected)
    assert all(sd[k] is expected[k] for k in expected)  # keep_vars: the parameters themselves
    assert sd._metadata == expected._metadata
    assert type(sd._metadata) is collections.OrderedDict


def attrs_on_new_dicts(x):
    d = collections.OrderedDict()
    had = hasattr(d, "tag")
    d.tag = 3
    c = collections.Counter("abca")
    c.scale = x * 2
    c["k"] += 1
    return x + d.tag, had, hasattr(d, "tag"), c.scale + c["k"]


def test_attributes_on_dicts_made_in_frame():
    check_same(attrs_on_new_dicts, torch.randn(3), graphs=1)


def test_escaping_dict_attributes_rebuilt():
    def f(x):
        d = collections.OrderedDict(a=x + 1)
        d.note = [x * 2, "n"]
        return d

    out = compile(f, fullgraph=True)(torch.ones(2))
    expected = f(torch.ones(2))
    assert_same(dict(out), dict(expected))
    assert_same(out.note, expected.note)
    assert type(out) is collections.OrderedDict


@pytest.mark.skipif(REFERENCE, reason="torch.compile 2.13 words the message 'OrderedDict', eager 'collections.OrderedDict'")
def test_missing_attribute_raises_like_eager():
    def f(x):
        out = [x + 1]
        for d in (collections.OrderedDict(), collections.Counter()):
            try:
                out.append(d.missing)
            except AttributeError as e:
                out.append(str(e))
        return out

    check_same(f, torch.randn(2), graphs=1)


def test_plain_dict_attribute_still_raises():
    def f(x):
        d = {}
        try:
            d.tag = 1
        except AttributeError as e:
            return x + 1, str(e)
        return x

    check_same(f, torch.randn(2), graphs=None, fullgraph=False)
