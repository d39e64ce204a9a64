"""ember.autograd — compiled autograd: the whole backward, captured at run time into one graph.

See docs/compiled_autograd.md. The public switch is ``ember.compiled_autograd.enable(backend)``.
"""
from ember.autograd.engine import counters, pop, push, reset

__all__ = ["counters", "push", "pop", "reset"]
