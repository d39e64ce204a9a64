"""Minimised failures found by the differential fuzzer (tests/fuzz), one test per class.

Each compares ember against eager. Open bugs are xfail(strict=False) with the
class name; when a fix lands, drop the mark (the test then guards the fix).
"""
from __future__ import annotations

import io
import logging
import warnings

import pytest
import torch

import ember

from .gen import generate
from .harness import check_program, compare, run_program


def _dict_keys_after_break(x, d):
    n = 0
    for i in range(2):
        if x.sum() > 0:          # graph break inside the loop
            d["z"] = 2           # the frame adds a key ...
        for k, v in d.items():   # ... and then iterates the dict
            n += v
    return x + n


def test_dict_keys_guard_after_frame_mutation():
    # ember (strict) raised: AssertionError: ember internal error: fresh entry for
    # f:resume_at_N fails its own guards: list(L['d'].keys()) == ['a', 'b', 'z'] (now: {'a': 1, 'b': 2})
    for d in ({"a": 1, "b": 2}, {"a": 3, "b": 2, "c": 1}):
        de, dc = dict(d), dict(d)
        ref = _dict_keys_after_break(torch.ones(3), de)
        got = ember.compile(_dict_keys_after_break)(torch.ones(3), dc)
        assert torch.equal(ref, got)
        assert de == dc


def test_fuzz_seed9_nonstrict_falls_back():
    # Non-strict, the AssertionError above (raised in capture/cache.py _miss for a resume
    # function entered from another resume function) reached the caller on the 2nd call.
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    src = generate(9, helpers=False)
    ref = run_program(src, "seed9", backend=None, grad=False)
    got = run_program(src, "seed9", backend="eager", grad=False, strict=False)
    assert compare(ref, got) == []


def _saved_output_mutated(x):
    t = x * 2
    m = float(t.max())   # graph break; t.max() in the first graph saves t for backward
    t.sub_(1)            # the resume graph mutates t in place
    return t


def test_aot_backward_saved_output_mutated_after_break():
    # eager and torch.compile(backend="aot_eager"): grads [2, 2, 2];
    # ember: RuntimeError: one of the variables needed for gradient computation has been
    # modified by an inplace operation: ... output 1 of CompiledFunction, is at version 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        leaf = torch.tensor([1.0, 3.0, 2.0], requires_grad=True)
        ref = _saved_output_mutated(leaf * 1)
        ref.sum().backward()
        ref_grad = leaf.grad
        leaf2 = torch.tensor([1.0, 3.0, 2.0], requires_grad=True)
        got = ember.compile(_saved_output_mutated, backend="aot_eager")(leaf2 * 1)
        got.sum().backward()
    assert torch.equal(ref, got)
    assert torch.equal(ref_grad, leaf2.grad)


class _Obj:
    def __init__(self, a):
        self.a = a

    def __eq__(self, other):
        return vars(self) == vars(other)


def _c_dict_del(x, c):
    n = 0
    for i in range(2):
        if x.sum() > 0 and "a" in c:
            del c["a"]
        for k in c:
            n += c[k]
    return x + n


def _c_dict_update(x, c):
    n = 0
    for i in range(2):
        if x.sum() > 0:
            c.update({"q": i, "a": 7})
        n += sum(v * (j + 1) for j, v in enumerate(c.values()))
    return x + n


def _c_list(x, c):
    n = 0
    for i in range(2):
        if x.sum() > 0:
            c.insert(0, 9)
            c.pop()
            c.append(i)
        n += len(c) * 10 + sum(v * (j + 1) for j, v in enumerate(c))
    return x + n


def _c_set(x, c):
    n = 0
    for i in range(2):
        if x.sum() > 0:
            c.discard(2)
            c.add(i + 7)
        n += len(c) * 10 + sum(c)
    return x + n


def _c_attr(x, c):
    n = 0
    for i in range(2):
        if x.sum() > 0:
            c.a = c.a + 1
            c.b = i
        n += c.a + getattr(c, "b", 100)
    return x + n


def _c_nested(x, c):
    n = 0
    for i in range(2):
        if x.sum() > 0:
            c["s"].append(3)
        n += len(c["s"])
    return x + n


CONTAINER_CASES = {
    "dict_keys": (_dict_keys_after_break, [{"a": 1, "b": 2}, {"a": 3, "b": 2, "c": 1}]),
    "dict_del": (_c_dict_del, [{"a": 1, "b": 2}, {"b": 2}]),
    "dict_update": (_c_dict_update, [{"a": 1, "b": 2}, {"b": 1, "a": 2}]),
    "list": (_c_list, [[1], [1, 2], []]),
    "set": (_c_set, [{1, 2}, {2, 3}]),
    "attr": (_c_attr, [_Obj(1), _Obj(2)]),
    "nested": (_c_nested, [{"s": [1]}, {"s": []}]),
}


@pytest.mark.parametrize("case", list(CONTAINER_CASES))
def test_container_guards_from_the_state_at_frame_entry(case):
    # F2's class: the frame changes a container from outside (dict keys, list length, set
    # contents, attributes) in a tensor branch, then reads it; the guards of the frame and of
    # its resume functions describe the container as each frame received it.
    import copy
    fn, inputs = CONTAINER_CASES[case]
    compiled = ember.compile(fn)
    for sign in (1, -1, 1):
        for c in inputs:
            ce, cc = copy.deepcopy(c), copy.deepcopy(c)
            x = torch.ones(3) * sign
            assert torch.equal(fn(x, ce), compiled(x, cc))
            assert ce == cc and (list(ce) == list(cc) if isinstance(ce, dict) else True)


_SINK = io.StringIO()


def _mutated_unused_then_input_mutated(x, y):
    if y.sum() > 0:
        t1 = x * 2
    else:
        try:
            def inner(a):
                print("break", a.shape, file=_SINK)  # a break inside the callee, inside try
                return a * y + 2                      # saves y for backward
            t5 = inner(y)
            t5 -= t5 + t5                             # t5 mutated, never used by the loss
        except ValueError:
            pass
    y.clamp_(min=0.25)                                # y mutated after t5's graph saved it
    return torch.stack([y + y]).sum(0)


# Fuzz seed 291259: `inner`, made in the frame and breaking, ran eagerly, so t5's eager MulBackward
# saved y; the resume graph mutating t5 and y has one backward node, which reached t5's history when
# the loss backpropagated (y's version no longer matched). A closure at a break is now compiled
# once per code (capture/callees.py RuntimeCallee), as torch.compile does, and t5 comes from a graph.
def test_backward_does_not_reach_a_mutated_input_the_loss_does_not_use():
    def run(fn):
        yl = (-torch.rand(4, dtype=torch.float64)).requires_grad_()
        x, y = torch.rand(3, 4, dtype=torch.float64), yl * 1
        out = fn(x, y)
        out.sum().backward()
        return out.detach(), yl.grad

    ref = run(_mutated_unused_then_input_mutated)
    got = run(ember.compile(_mutated_unused_then_input_mutated, backend="aot_eager"))
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1])


def test_fuzz_seed3600037_break_before_extended_arg_in_resume():
    # Without nested graph breaks, a break in a resume function right before a jump that needs an
    # EXTENDED_ARG prefix there (its offsets are larger than the original's) looked the prefix up
    # in the offset map to the original function (decode folds prefixes): KeyError, an internal
    # error (strict), the frame run eagerly otherwise.
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    src = generate(3600037, extras3=True, extras4=False)
    with ember.config.patch(nested_graph_breaks=False):
        outcomes = check_program(src, "seed3600037", [("eager", False)])
    assert [o.status for o in outcomes] == ["ok"], outcomes[0].detail[-2000:]
