"""``random.Random(seed)`` made in the frame with a constant seed: a generator whose every value
follows from that seed, so the trace runs it (on a private ``random.Random`` holding the tracked
state) and the values are constants of the graph, as torch.compile does (one graph; ember broke at
``Random.seed``'s C code). ``seed`` / ``getstate`` / ``setstate`` change or read the tracked state.
If the object escapes (returned, stored, live across a graph break), a ``random.Random`` with the
same state is built after the graph.

Not here: Python's global generator (``random.random()``) and generators from outside the frame,
whose values depend on state at run time (those calls break the graph), and ``random.Random()``
without a seed (seeded from the OS), also a break.
"""
from __future__ import annotations

import random

from ember.capture.variables.base import ConstantVariable, VariableTracker, unsupported
from ember.exc import PythonException

# Methods whose result depends only on the state and constant arguments.
_DRAWS = {"random", "randint", "randrange", "uniform", "gauss", "normalvariate", "choice", "getrandbits",
          "triangular", "expovariate", "betavariate", "gammavariate", "lognormvariate", "vonmisesvariate",
          "paretovariate", "weibullvariate"}
_STATE = {"seed", "getstate", "setstate"}


def seeded_random(tx, args, kwargs) -> "RandomObjectVariable | None":
    """The tracker for ``random.Random(*args)``, or None where the trace cannot know its values."""
    if kwargs or len(args) != 1 or not args[0].is_constant():
        return None
    seed = args[0].as_constant()
    if seed is None or type(seed) not in (int, float, str, bytes, bytearray):
        return None  # (None: seeded from the OS at run time)
    try:
        gen = random.Random(seed)
    except Exception as e:  # noqa: BLE001 — eager raises it at the call
        raise PythonException(e) from None
    return RandomObjectVariable(gen.getstate())


def _make_random(state):
    gen = random.Random()
    gen.setstate(state)
    return gen


class RandomObjectVariable(VariableTracker):
    created_in_frame = True  # (rebuilt once after the graph if it escapes: convert_frame._made_in_frame)
    source = None

    def __init__(self, state):
        # (in `items`, as a container's: a speculation checkpoint journals and restores it)
        self.items = {"state": state}

    def python_type(self):
        return random.Random

    def describe(self):
        return "random.Random object made in the frame"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        if name in _DRAWS or name in _STATE:
            from ember.capture.variables.functions import BoundMethodVariable
            return BoundMethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        if name not in _DRAWS and name not in _STATE:
            return super().call_method(tx, name, args, kwargs)
        if not all(a.is_constant() for a in args) or not all(v.is_constant() for v in kwargs.values()):
            raise unsupported("EB0033", f"random.Random.{name} with arguments that are not constants")
        gen = _make_random(self.items["state"])
        try:
            result = getattr(gen, name)(*[a.as_constant() for a in args],
                                        **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as e:  # noqa: BLE001 — eager raises it here (randint(5, 1), choice([]))
            raise PythonException(e) from None
        if name != "getstate":
            checkpoints = getattr(getattr(tx, "trace", None), "checkpoints", None)
            if checkpoints:
                from ember.capture.speculation import note_container_write
                note_container_write(tx, self)
            self.items = {**self.items, "state": gen.getstate()}
        from ember.capture.variables.builtins import wrap_constant
        return wrap_constant(result)

    def reconstruct(self, plan):
        from ember.capture.sources import bind
        return f"{bind(plan.scope, _make_random, 'make_random')}({bind(plan.scope, self.items['state'], 'random_state')})"
