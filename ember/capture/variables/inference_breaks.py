"""Graph breaks inside ``with torch.inference_mode(...)``.

Inference mode is a C++ guard (``torch._C._InferenceMode``): it can only be left by the guard
object that entered it, so a block cut by a graph break is left and entered again around the
break, as torch.compile does for its context managers:

* the graph before the break leaves the blocks still open at its end (``_exit_inference_mode``);
* the entry code enters each for real (`InferenceBlock`, made by the residual call's arguments),
  so the breaking instruction runs inside it; if it raises, the with-block's cleanup calls the
  block as its ``__exit__``;
* otherwise the residual leaves the blocks (`leave_blocks`) and calls the resume function with
  the `InferenceBlock` in the stack slot of the block's ``__exit__``; the resume function's
  prologue enters it again (``BEFORE_WITH``, see bytecode/resume.py ``reenter``), which the
  resume function's trace sees as an ordinary ``with torch.inference_mode(mode):`` at its start.

So every graph starts and ends in the state the frame was called in, a backend traces it under
that state, and a resume function that runs eagerly enters the block itself.

    with torch.inference_mode():
        y = x * 2
        print(y)        # graph 1: enter, mul, exit; then print inside a real block
        z = y + 1       # graph 2 (resume): enter, add, exit, then the rest
    return z + x
"""
from __future__ import annotations

import torch


class InferenceBlock:
    """A ``torch.inference_mode(mode)`` block cut by a graph break: entered for real between the
    graphs, handed to the resume function, which enters it again (``__enter__``)."""

    def __init__(self, mode: bool):
        self.mode = mode
        self.guard = None

    def enter(self) -> "InferenceBlock":
        self.guard = torch.autograd.grad_mode._enter_inference_mode(self.mode)
        return self

    def leave(self) -> None:
        guard, self.guard = self.guard, None
        if guard is not None:
            torch.autograd.grad_mode._exit_inference_mode(guard)

    # -- the context protocol (the resume function's prologue, an eager resume function) --
    def __enter__(self):
        self.enter()
        return None

    def __exit__(self, *exc_info):
        self.leave()
        return None  # never suppresses an exception

    def __call__(self, *exc_info):
        """As the block's ``__exit__`` where the frame holds it (the residual's exception handler)."""
        self.leave()
        return None

    def __repr__(self):
        return f"InferenceBlock({self.mode}, {'entered' if self.guard is not None else 'left'})"


def entered_block(mode: bool) -> InferenceBlock:
    """The entry code's: the block entered for real, before the breaking instruction runs."""
    return InferenceBlock(mode).enter()


def leave_blocks(*blocks: InferenceBlock) -> None:
    """The residual's, after the breaking instruction: leave the blocks (innermost first) the
    resume function enters again."""
    for b in blocks:
        b.leave()


def reentered_at_resume(vt) -> bool:
    """Whether stack item ``vt`` (at a graph break) is the exit of an inference-mode block, handed
    over as an `InferenceBlock` that the resume function enters again."""
    from ember.capture.variables.ctx_managers import InferenceModeVariable
    return type(vt).__name__ == "_WithExit" and isinstance(vt.ctx, InferenceModeVariable)


def finish_inference(output) -> bool | None:
    """At the end of a trace that broke inside inference-mode blocks: the graph leaves them
    (innermost first). Returns the grad mode outside them (what the frame's graph-balancing code
    must see as the frame's own), or None when none is open; a string says why the break cannot
    be resumed (the caller refuses it)."""
    blocks = list(output.active_inference)
    if not blocks:
        return None
    # Grad mode changed inside the innermost block (a no_grad/enable_grad block or set_grad_enabled
    # call still in effect) would be lost when the block is left and entered again.
    if torch.is_grad_enabled() != (not blocks[-1].mode):
        return "graph break inside `with torch.inference_mode()` after a grad-mode change inside it"
    for vt in reversed(blocks):
        output.graph.call_function(torch.autograd.grad_mode._exit_inference_mode, (vt.node,))
    return blocks[0].prior_grad
