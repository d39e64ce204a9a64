"""Weak references as dict keys (variables/weakrefs.py, builder's dict wrapping): a
``WeakKeyDictionary`` read in the frame (``mod in states``, ``states.get(mod)``), whose data is a
dict keyed by ``weakref.ref(obj)``. A reference hashes and compares as its referent, so the
frame's own ``weakref.ref(obj)`` finds the entry; the key guard recompiles when the entries change."""
import weakref

import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, check_same, compile


class _Obj:
    pass


_MOD_A, _MOD_B, _MOD_C = torch.nn.Module(), torch.nn.Module(), torch.nn.Module()
_STATES = weakref.WeakKeyDictionary({_MOD_A: 2, _MOD_B: 3})


def read_weak_key_dict(x):
    if _MOD_A in _STATES:
        x = torch.sin(x)
    if _MOD_C in _STATES:
        x = torch.cos(x)
    return x * _STATES.get(_MOD_B, 10)


def test_weak_key_dictionary_reads_and_recompiles_on_new_entries():
    counter = check_same(read_weak_key_dict, torch.randn(4))
    compiled = compile(read_weak_key_dict, backend=counter, fullgraph=True)
    _STATES[_MOD_C] = 5
    del _STATES[_MOD_B]
    try:
        x = torch.randn(4)
        assert_same(compiled(x), read_weak_key_dict(x))
        assert counter.frame_count == 2
    finally:
        _STATES[_MOD_B] = 3
        del _STATES[_MOD_C]


def ref_of_argument_in(x, obj, d):
    return x + (10 if weakref.ref(obj) in d else 20)


@pytest.mark.skipif(REFERENCE, reason="torch.compile (2.13) answers this wrong: its third call gives 20 where eager "
                                      "gives 10")
def test_reference_to_an_argument_found_by_its_referent():
    a, b = _Obj(), _Obj()
    d = {weakref.ref(a): 1}
    counter = CompileCounter()
    compiled = compile(ref_of_argument_in, backend=counter, fullgraph=True)
    x = torch.zeros(1)
    for obj, table in ((a, d), (b, d), (a, d), (b, {weakref.ref(b): 1})):
        assert_same(compiled(x, obj, table), ref_of_argument_in(x, obj, table))
