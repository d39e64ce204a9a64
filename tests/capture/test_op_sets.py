"""A set (or frozenset) of torch ops passed in, as a selective-checkpoint policy or a
decomposition filter keeps them (``{torch.ops.aten.mm.default}``): ops compare by identity and
hash their C handle, so the set is an input guarded by its items, like a set of functions. ember
refused it (EB0035, "a set of non-constant values") and ran the frame eagerly."""
import torch

from ember_test_helpers import CompileCounter, assert_same, compile, reset


def pick(x, ops):
    y = x.sin()
    if torch.ops.aten.mm.default in ops:
        y = y * 2
    if torch.ops.aten.cos in ops:  # (a packet, not an overload)
        y = y + 1
    return y, len(ops)


def test_set_of_ops_is_an_input():
    reset()
    cnt = CompileCounter()
    compiled = compile(pick, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    calls = [{torch.ops.aten.mm.default}, frozenset({torch.ops.aten.cos, torch.ops.aten.mm.default}),
             {torch.ops.aten.mm.default}, set()]
    for ops in calls:
        assert_same(compiled(x, ops), pick(x, ops))
    assert cnt.frame_count == 3  # (the same items again: no recompile)


def lookup(x, table):
    f = table.get(torch.ops.aten.mm.default)
    y = x.sin() if f is None else f(x)
    names = [str(op) for op in table]  # (iterating the keys)
    return y, names, torch.ops.aten.cos in table


def test_dict_keyed_by_ops_is_an_input():
    """A decomposition-style table ``{op: fn}`` passed in: its keys are ops (EB0035 before)."""
    reset()
    cnt = CompileCounter()
    compiled = compile(lookup, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    calls = [{torch.ops.aten.mm.default: torch.cos}, {torch.ops.aten.cos: torch.sin},
             {torch.ops.aten.mm.default: torch.cos}]
    for table in calls:
        assert_same(compiled(x, table), lookup(x, table))
    assert cnt.frame_count == 2
