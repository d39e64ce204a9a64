"""A chain of nested graph breaks (capture/nested_breaks.py) passes the cells of decorated
wrappers on as cell objects; when a later compile of the chain breaks again (a new size: dynamic
shapes, and an op that reads data there), the chain's closures hand those cell objects to the
resume functions the new break made. They are cells there too (read and written through their
source), not opaque objects: each resume function used to break again at its first call of the
next one ("resume function argument 'extra' is not a cell")."""
import functools
import sys

import pytest
import torch
from torch import nn

import ember
from tests.helpers import CompileCounter


def deco(fn):
    extra = "x"

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        msg = None
        if msg is not None and extra is not None:
            msg = msg + extra
        return fn(*args, **kwargs)
    return wrapped


class Layer(nn.Module):
    def forward(self, h):
        # with a symbolic width, torch.div of sizes is a tensor and view() reads it: a break
        return h.view(h.size(0), torch.div(h.size(1), 2, rounding_mode="trunc"), 2).flatten(1) + 1


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer()])

    @deco
    def forward(self, x):
        flag = (x > 0).any().item()
        h = x * 2 if flag else x * 3
        for layer in self.layers:
            h = layer(h)
        return h


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Enc()

    @deco
    def forward(self, x):
        return self.enc(x) + 1


class Top(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Model()

    @deco
    def forward(self, x):
        return self.model(x) * 3


def test_cells_passed_on_by_a_chain_stay_cells(caplog):
    import logging
    ember.reset()
    m = Top()
    counter = CompileCounter()
    compiled = ember.compile(m, backend=counter)
    torch.manual_seed(0)
    with caplog.at_level(logging.DEBUG, logger="ember"):
        for n in (4, 6, 8, 8, 10):
            x = torch.randn(2, n)
            torch.testing.assert_close(compiled(x), m(x))
            torch.testing.assert_close(compiled(-x.abs()), m(-x.abs()))
    assert not [r for r in caplog.records if "is not a cell" in r.getMessage()]
    if sys.version_info < (3, 13):  # (nested breaks are off on 3.13)
        assert counter.frame_count <= 12  # (torch.compile: 12)
