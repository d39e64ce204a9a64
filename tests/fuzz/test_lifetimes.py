"""Generated programs keep their inputs alive exactly as long as eager does.

With the garbage collector off, an input that eager frees when the caller drops it must be freed
by ember too: a reference cycle left by a trace (trackers and translators, an exception raised
while tracing whose traceback holds the compile's frames, a residual holding the exception it
caught) would keep the inputs — and a model's activations — until a gc pass. The seeds are
programs where such cycles were found (exceptions caught and raised around graph breaks, data
ops raising at trace time, optimizer-like state read through lazy trackers); the fuzzer's
generator makes them (tests/fuzz/gen.py)."""
from __future__ import annotations

import gc
import warnings
import weakref

import pytest

import ember

from .gen import generate
from .harness import exec_program, make_inputs

_SEEDS = [400002, 400013, 400014, 400020, 400023, 400050, 400071]


def _alive_after_calls(src: str, name: str, compiled: bool, grad: bool) -> list:
    ember.reset()
    ns = exec_program(src, name)
    fn = ember.compile(ns["f"], backend="aot_eager") if compiled else ns["f"]
    alive = []
    gc.collect()
    gc.disable()
    try:
        for call in range(2):
            args, leaves = make_inputs(call, grad, ns)
            refs = [weakref.ref(a) for a in args[:2]] + [weakref.ref(t) for t in leaves]
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 — the program's own exception: same in both runs
                pass
            del args, leaves
            ns["LOG"].clear()
            alive.append([i for i, r in enumerate(refs) if r() is not None])
    finally:
        gc.enable()
    return alive


@pytest.mark.parametrize("seed", _SEEDS)
def test_inputs_die_as_in_eager(seed):
    src = generate(seed, helpers=False)
    _alive_after_calls(generate(1, helpers=False), "warm", True, False)  # (one-time imports of a first compile)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = _alive_after_calls(src, f"s{seed}", False, False)
        got = _alive_after_calls(src, f"s{seed}", True, False)
    assert got == expected
