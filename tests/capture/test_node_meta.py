"""Graph nodes carry the user's names and stack, as torch.compile's do (capture/node_meta.py).

A tensor's node is named after the first local it is stored to; ``node.meta["stack_trace"]`` is
the user's stack in traceback's format (callers first), so ``print_readable`` groups the nodes by
source line. Outputs are compared with eager as well.
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile

pytestmark = pytest.mark.skipif(REFERENCE, reason="inspects the graphs ember hands to its backend")


class Recorder:
    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward


def _graph(fn, *args):
    rec = Recorder()
    out = compile(fn, backend=rec, fullgraph=True)(*args)
    assert_same(out, fn(*args))
    assert len(rec.graphs) == 1
    return rec.graphs[0]


def _names(gm):
    return [n.name for n in gm.graph.nodes if n.op == "call_function" or n.op == "call_method"]


def test_node_named_after_first_local():
    def fn(x):
        hidden = x.sin()
        alias = hidden  # a second store does not rename
        scaled = alias * 2
        return scaled + 1

    assert _names(_graph(fn, torch.randn(3))) == ["hidden", "scaled", "add"]


def test_names_from_inlined_frames_and_clashes():
    def helper(t):
        inner = t.cos()
        return inner

    def fn(x):
        sum = helper(x)  # noqa: A001 (a builtin's name: fx makes it unique)
        torch_ = sum + 1
        return torch_, sum

    gm = _graph(fn, torch.randn(3))
    names = _names(gm)
    assert names[0] == "inner" and names[1] == "torch_", names
    gm.recompile()  # the generated code is valid Python


def test_unpacked_locals_name_their_nodes():
    def fn(x):
        a, b = x.sin(), x.cos()
        return a + b

    assert _names(_graph(fn, torch.randn(3))) == ["a", "b", "add"]


def test_stack_trace_in_traceback_format():
    def helper(t):
        return t.cos() * 3

    def fn(x):
        y = x.sin()
        return helper(y)

    gm = _graph(fn, torch.randn(3))
    nodes = [n for n in gm.graph.nodes if n.op == "call_method"]
    sin_trace = nodes[0].meta["stack_trace"]
    assert f'File "{__file__}"' in sin_trace and "in fn" in sin_trace and "y = x.sin()" in sin_trace
    cos_trace = nodes[1].meta["stack_trace"]
    lines = cos_trace.strip().splitlines()
    assert "in fn" in lines[0] and "return helper(y)" in lines[1]  # the caller first
    assert "in helper" in lines[2] and "return t.cos() * 3" in lines[3]
    text = gm.print_readable(print_output=False)
    assert "# File:" in text and "y = x.sin()" in text
