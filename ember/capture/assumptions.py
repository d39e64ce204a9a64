"""Data-dependent checks that only raise: ``if not valid.all(): raise ValueError(...)``.

A branch on a tensor's value breaks the graph (EB0016). Many are checks whose failing side raises
straight away — torch.distributions' argument and sample validation, ``assert (p >= 0).all()``,
a library's ``if torch.isnan(loss): raise``. For those the trace assumes the check passes and
goes on along the other side; the tensor becomes an extra graph output, and the entry code tests
it after the graph. If it does not hold, the frame runs again eagerly from its start
(capture/rerun.py: nothing was done that a rerun would repeat; side effects are replayed after
the graph, so were not), which raises eager's very exception. The graph therefore may hold no
in-place write from before the assumption (else the branch breaks, as before); one after it stays
in the graph when the entry can undo it before the rerun (capture/write_snapshots.py: the written
inputs copied before the call; ``clip_grad_norm_(error_if_nonfinite=True)``'s clipping), else it
breaks the graph there (``OutputGraph._call``, the frame traced again: ``CatchRetry``). Writes into
tensors the graph made itself need neither
(``torch.empty(n).normal_()`` in ``rsample``: a rerun makes them anew, capture/rerun.py); random
draws are kept, the entry then keeps torch's RNG state before the graph and puts it back before a
rerun (``rng_lines``).

torch.compile 2.13 makes one graph of such code too (it drops distribution validation instead:
invalid arguments do not raise under it).
"""
from __future__ import annotations

import torch

from ember.fake.symbolic import has_symbols

_MAX_RAISE_BLOCK = 400  # instructions from the branch to the raise
_ENDS_BLOCK = ("JUMP", "POP_JUMP", "FOR_ITER", "RETURN", "YIELD", "SEND", "BEFORE_WITH", "SETUP", "RERAISE",
               "END_ASYNC_FOR", "CHECK_EXC_MATCH", "PUSH_EXC_INFO")


def _raises_straight_away(instructions, start: int) -> bool:
    """The code from ``start`` raises (``RAISE_VARARGS``) without a jump, return or loop before."""
    for inst in instructions[start:start + _MAX_RAISE_BLOCK]:
        if inst.opname == "RAISE_VARARGS":
            return inst.arg is not None and inst.arg >= 1
        if inst.opname.startswith(_ENDS_BLOCK):
            return False
    return False


def assume_branch(tx, inst, value, when: bool) -> bool | None:
    """``POP_JUMP_IF_<when>`` on the tensor tracker ``value``: if exactly one side raises straight
    away, record that the check takes the other side and answer whether to jump (None: not such a
    branch, or the graph so far could not be run again)."""
    from ember.capture.rerun import graph_changes_state
    from ember.capture.variables.tensor import TensorVariable
    if not isinstance(value, TensorVariable) or type(value.fake).__name__ != "FakeTensor" \
            or value.cls not in (torch.Tensor, torch.nn.Parameter):  # (a subclass's own __bool__)
        return None
    if has_symbols(tuple(value.fake.shape)) or value.fake.numel() != 1:
        return None
    output = tx.output
    changing, draws_only = graph_changes_state(output.graph)
    if not draws_only:
        return None
    here = tx.index_of.get(inst.offset)
    target = tx.index_of.get(inst.argval)
    if here is None or target is None:
        return None
    falls_raise = _raises_straight_away(tx.instructions, here + 1)
    jump_raises = _raises_straight_away(tx.instructions, target)
    if falls_raise == jump_raises:
        return None
    jump = falls_raise  # the side that goes on
    if changing:
        output.assumed_draws = True  # (drawn before the check: the RNG state goes back before a rerun)
    output.__dict__.setdefault("assumptions", []).append((value.node, when if jump else not when))
    return jump


def output_checks(output, plan) -> str | None:
    """The entry's test of the assumptions on the graph's outputs (each tensor an extra output),
    or None when the trace made none."""
    made = output.__dict__.get("assumptions")
    if not made:
        return None
    return " and ".join(f"(bool({plan._out(node)}) is {expected})" for node, expected in made)


def rng_lines(output, scope) -> tuple[list[str], list[str]]:
    """With random ops in a graph that may run again (a failed check): the entry's lines that keep
    torch's RNG state before the graph, and those that put it back before the eager rerun (which
    then draws what eager draws)."""
    if not output.__dict__.get("assumed_draws"):
        return [], []
    import torch

    def rng_state():
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
        return torch.random.get_rng_state(), cuda

    def rng_restore(state):
        torch.random.set_rng_state(state[0])
        if state[1] is not None:
            torch.cuda.set_rng_state_all(state[1])
    scope["___rng_state"], scope["___rng_restore"] = rng_state, rng_restore
    return ["___rng = ___rng_state()"], ["___rng_restore(___rng)"]
