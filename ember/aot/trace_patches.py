"""Where torch's tracing machinery does not reproduce eager, ember adjusts it while it traces.

``exact_rnn_dropout``: exact dropout between the layers of a multi-layer RNN.
``exact_decompositions``: ember's own decompositions for ops whose torch decomposition is wrong.

torch's Python decompositions of ``aten.lstm`` / ``gru`` / ``rnn_tanh`` / ``rnn_relu`` (which the
Python dispatcher runs while ``make_fx`` traces) never apply the inter-layer dropout (their test
``num_layers < i - 1`` is always false), so a traced ``nn.LSTM(num_layers=2, dropout=p)`` in
training mode gave other outputs than eager and drew nothing from the RNG. While ember traces, a
call that has that dropout runs the C++ composite kernel instead (what eager runs, dropout
included, op by op); every other call keeps torch's decomposition.
"""
from __future__ import annotations

import contextlib

import torch
from torch._C import DispatchKey

from ember.aot.fixed_decompositions import fixed_decompositions, fixed_kernels

_KEYS = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)


def _overloads():
    aten = torch.ops.aten
    return [aten.lstm.input, aten.lstm.data, aten.gru.input, aten.gru.data, aten.rnn_tanh.input,
            aten.rnn_tanh.data, aten.rnn_relu.input, aten.rnn_relu.data]


def _wrap(op, python_kernel):
    names = [a.name for a in op._schema.arguments]
    at = {n: names.index(n) for n in ("num_layers", "dropout", "train")}

    def arg(args, kwargs, name):
        i = at[name]
        return args[i] if i < len(args) else kwargs.get(name)

    def kernel(*args, **kwargs):
        if arg(args, kwargs, "train") and arg(args, kwargs, "dropout") and arg(args, kwargs, "num_layers") > 1:
            return op._op_dk(DispatchKey.CompositeImplicitAutograd, *args, **kwargs)
        return python_kernel(*args, **kwargs)
    return kernel


@contextlib.contextmanager
def exact_rnn_dropout():
    """Within: multi-layer RNN calls with dropout trace as eager runs them (see the module doc)."""
    saved = []
    for op in _overloads():
        for key in _KEYS:
            kernel = op.py_kernels.get(key)
            if kernel is not None:
                saved.append((op, key, kernel))
                op.py_kernels[key] = _wrap(op, kernel)
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, key, kernel in saved:
            op.py_kernels[key] = kernel
        for op in _overloads():
            op._dispatch_cache.clear()


def fixed_table(table):
    """``table`` (a decomposition table for make_fx) with ember's entries for the ops it fixes."""
    if not table:
        return table
    fixes = {op: fn for op, fn in fixed_decompositions().items() if op in table}
    return {**table, **fixes} if fixes else table


def exact_decompositions():
    """Within: the ops in ember/aot/fixed_decompositions.py trace through ember's decomposition instead of
    torch's Python kernel (which the Python dispatcher would run at the Autograd key)."""
    return fixed_kernels(DispatchKey.Autograd)


# Ops torch marks "effectful" so that its AOTAutograd threads ordering tokens through them; ember's
# graphs keep program order without tokens, so while tracing they are plain ops (functionalization
# otherwise fails: "Could not find a token"). After the trace they are effectful again, which keeps
# them from dead-code elimination (and fx's own list says so too, for DCE while tracing):
# linalg.inv's check still raises on a singular matrix.
_TOKENED = ("aten::_linalg_check_errors",)
torch.fx.node.has_side_effect(torch.ops.aten._linalg_check_errors.default)


@contextlib.contextmanager
def untokened_effects():
    from torch._library.simple_registry import singleton
    holders = [singleton.find(name).effect for name in _TOKENED]
    saved = [h._effect for h in holders]
    for h in holders:
        h._effect = None
    try:
        yield
    finally:
        for h, effect in zip(holders, saved):
            h._effect = effect


@contextlib.contextmanager
def tracing_patches():
    """All of the above, for one AOT compile (the compile lock is held: the changes are global);
    also anomaly detection off while tracing: its NaN checks read fake values (the compiled
    backward still runs under the program's anomaly mode), and the program's saved-tensor hooks."""
    from ember.fake.convert import saved_tensors_hooks_off
    with exact_rnn_dropout(), exact_decompositions(), untokened_effects(), torch.autograd.set_detect_anomaly(False), \
            saved_tensors_hooks_off():
        yield
