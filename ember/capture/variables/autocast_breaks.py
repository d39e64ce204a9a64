"""Graph breaks inside ``with torch.autocast(...)``.

A graph must leave autocast as it found it (a backend traces it once, under the state of the
moment), so a break inside an autocast block splits the block across graphs like this:

* the graph before the break exits the blocks still open at its end; the entry code then enters
  them for real (`AutocastEnter`) before the breaking instruction runs, so it runs under autocast;
* the with-block's ``__exit__`` handed to the resume function is an `AutocastExit` that restores
  the state from before the block. The resume function is traced (and guarded) under the autocast
  state it starts in; calling the exit records ``autocast_exit`` in its graph, the graph re-enters
  the block at its end, and the entry code exits it for real after the graph.

Each function mirrors ``torch.autocast.__enter__`` / ``__exit__`` (nesting count, cast cache).
"""
from __future__ import annotations

import torch

from ember.capture.variables.base import ConstantVariable, VariableTracker


def autocast_state(device: str) -> tuple:
    """(enabled, dtype, cache_enabled) of ``device`` now."""
    return (torch.is_autocast_enabled(device), torch.get_autocast_dtype(device), torch.is_autocast_cache_enabled())


def autocast_enter(device: str, enabled: bool, dtype, cache_enabled: bool) -> None:
    torch.set_autocast_enabled(device, enabled)
    torch.set_autocast_dtype(device, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache_enabled)


def autocast_exit(device: str, prev_enabled: bool, prev_dtype, prev_cache_enabled: bool) -> None:
    if torch.autocast_decrement_nesting() == 0:
        torch.clear_autocast_cache()
    torch.set_autocast_enabled(device, prev_enabled)
    torch.set_autocast_dtype(device, prev_dtype)
    torch.set_autocast_cache_enabled(prev_cache_enabled)


class AutocastEnter:
    """Enters an autocast block for real (the entry code, after a graph that broke inside it)."""

    def __init__(self, device: str, block: tuple):
        self.device = device
        self.block = block  # (enabled, dtype, cache_enabled) inside the block

    def __call__(self):
        autocast_enter(self.device, *self.block)

    def __repr__(self):
        return f"AutocastEnter({self.device}, {self.block})"


class AutocastExit:
    """The ``__exit__`` of an autocast block that a graph break cut in two."""

    def __init__(self, device: str, prior: tuple, block: tuple):
        self.device = device
        self.prior = prior  # (enabled, dtype, cache_enabled) before the block
        self.block = block

    def __call__(self, *exc_info):
        autocast_exit(self.device, *self.prior)
        return None  # never suppresses an exception

    def __repr__(self):
        return f"AutocastExit({self.device}, restore={self.prior})"


class AutocastExitVariable(VariableTracker):
    """An `AutocastExit` handed to a resume function: calling it leaves the block in the graph."""

    def __init__(self, value: AutocastExit, source=None):
        self.value = value
        self.source = source

    def describe(self):
        return repr(self.value)

    def call(self, tx, args, kwargs):
        ex = self.value
        tx.output.graph.call_function(autocast_exit, (ex.device, *ex.prior))
        autocast_exit(ex.device, *ex.prior)  # the trace goes on outside the block
        tx.output.autocast_exits.append(ex)
        return ConstantVariable(None)


def finish_autocast(output, reached_break: bool) -> list:
    """Balance the graph's autocast state and return what the entry code runs after the graph."""
    after = list(output.autocast_exits)  # blocks the frame left: left for real after the graph
    for vt in reversed(output.active_autocasts):  # blocks open at a break: the graph leaves them ...
        output.graph.call_function(torch.amp._exit_autocast, (vt.node,))
    for ex in reversed(output.autocast_exits):  # ... and re-enters those it left
        output.graph.call_function(autocast_enter, (ex.device, *ex.block))
    after += [AutocastEnter(vt.device_type, vt.block) for vt in output.active_autocasts]
    return after


def restore_tracing_state(output) -> None:
    """After a trace: undo what it did to the real autocast state (open blocks, blocks it left)."""
    for ctx in reversed(output.active_contexts):
        ctx.__exit__(None, None, None)
    for ex in reversed(output.autocast_exits):
        autocast_enter(ex.device, *ex.block)
