"""operator.or_ / and_ / xor between tensors write nothing, although their names end in "_":
a graph with `m.expand(...) | other` (an expanded, self-overlapping operand) or
`c[:, :, None] | c[:, None]` (operands sharing memory) compiles and matches eager,
while a real in-place write into an expanded tensor is still refused.
"""
import operator

import pytest
import torch

import ember
from ember.aot.errors import UnsupportedAliasedMutation
from helpers import VIAS, compare


def mask_product(ids):
    c = ids == 0
    pair = c[:, :, None] | c[:, None]           # both operands views of c
    wide = c.unsqueeze(0).expand(3, 2, 8) & c    # an expanded (self-overlapping) operand
    return pair, wide ^ c, operator.not_(False)


def _ids():
    return [torch.randint(0, 3, (2, 8), generator=torch.Generator().manual_seed(0))]


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_boolean_operators_on_overlapping_views(backend, via):
    compare(mask_product, _ids, backend, via)


def test_in_place_or_into_expanded_still_refused():
    from ember.aot.overlap import check_self_overlapping_writes

    def f(a, b):
        e = a.expand(2, 4)
        e.__ior__(b)
        return e
    gm = torch.fx.symbolic_trace(f)
    a, b = torch.zeros(4, dtype=torch.bool), torch.ones(2, 4, dtype=torch.bool)
    with torch._subclasses.FakeTensorMode() as mode:
        fa = mode.from_tensor(a)
        for node in gm.graph.nodes:
            if node.op == "call_method" and node.target == "expand":
                node.meta["example_value"] = fa.expand(2, 4)
    for node in gm.graph.nodes:
        if node.op == "call_method" and node.target == "__ior__":
            node.target = "bitwise_or_"  # the in-place method form a capture records
    with pytest.raises(UnsupportedAliasedMutation):
        check_self_overlapping_writes(gm)
