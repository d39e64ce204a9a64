"""Python's ``random`` module in a frame: ``random.random()``, ``randint``, ``randrange``, ``uniform``.

torch.compile records such a call and makes its value in Python just before the graph runs, by
calling the same function on the same generator (so Python's random stream after the call is
eager's exactly), then passes it into the graph. ember does the same, for Python's global
generator and any other ``random.Random`` from outside the frame (not a subclass; an argument
may be a different generator each call: the entry draws from the one its source names, with no
guard on its identity):

* the trace records ``(generator, method, constant arguments)`` and gives back a
  ``RandomValueVariable``; its example value comes from a private copy of the generator, so
  tracing leaves the real one alone;
* the entry code draws every recorded value, in program order, after the guards and before the
  graph (``___rv = ___draw()``); a graph that raises and is rerun eagerly first gets the
  generators' states back (no value is drawn twice);
* in arithmetic with a tensor (``x * random.uniform(0.8, 1.2)``) the value is a 0-d tensor input
  of the graph, never a constant (no guard on a value the guards cannot see); passed on (returned,
  stored, handed to a break) it is ``___rv[i]`` itself;
* Python arithmetic on drawn values and number constants (``random.uniform(0, 1) * 2 - 1``) is one
  more recorded step, computed by the entry code right after the draws (``derived_value``): its
  result is a drawn value like the others. Only operations whose result type does not hang on
  the value and that cannot raise for another draw qualify (+, -, *, unary -/+, and /, //, % by a
  nonzero constant); an int result must stay within int64 for every possible draw (``bound``).

Anything else that needs the number in Python (a branch, a size, ``int(v)``, an op's scalar
argument) breaks the graph there and runs on the real value: unlike torch.compile 2.13, whose
example value got baked into the graph without a guard (``torch.ones(random.randint(1, 5))``).
"""
from __future__ import annotations

import operator
import random
import types

import torch

from ember.capture.sources import Source
from ember.capture.variables.base import VariableTracker, unsupported

DRAWS = frozenset({"random", "randint", "randrange", "uniform"})
_LIMIT = 2 ** 53  # (arguments: the value fits a float64 / int64 0-d tensor exactly)


def is_random_draw(value) -> bool:
    """``random.randint`` and the like: a method of a plain ``random.Random`` (the module's own)."""
    if not isinstance(value, (types.MethodType, types.BuiltinMethodType)):
        return False  # (any other object: no attribute read, a user __getattr__ would see it)
    owner = getattr(value, "__self__", None)
    return type(owner) is random.Random and getattr(value, "__name__", None) in DRAWS \
        and getattr(owner, getattr(value, "__name__", ""), None) == value


class RandomDrawFunction(VariableTracker):
    """The bound method ``gen.<name>`` of a ``random.Random`` from outside the frame."""

    def __init__(self, gen: random.Random, name: str, source=None):
        self.gen, self.name, self.source = gen, name, source

    def describe(self):
        return f"random.{self.name}"

    def python_type(self):
        return type(getattr(self.gen, self.name))

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        from ember.capture.variables.symbolic import SymNodeVariable
        values = [*args, *kwargs.values()]
        if not all(v.is_constant() and not isinstance(v, SymNodeVariable) for v in values):
            raise unsupported("EB0033", f"random.{self.name} with arguments that are not constants")
        plain_args = [a.as_constant() for a in args]
        plain_kwargs = {k: v.as_constant() for k, v in kwargs.items()}
        if not all(type(v) in (int, float, bool) and abs(v) <= _LIMIT for v in (*plain_args, *plain_kwargs.values())):
            raise unsupported("EB0033", f"random.{self.name} with arguments other than small numbers")
        calls = tx.output.__dict__.setdefault("random_calls", [])
        shadow = random.Random()
        earlier = [c for c in calls if c[0] is self.gen]
        shadow.setstate(earlier[-1][4] if earlier else self.gen.getstate())
        try:
            example = getattr(shadow, self.name)(*plain_args, **plain_kwargs)
        except Exception:  # noqa: BLE001 — eager raises it at this call: run the call eagerly
            raise unsupported("EB0033", f"random.{self.name} raises for these arguments") from None
        calls.append((self.gen, self.name, tuple(plain_args), plain_kwargs, shadow.getstate(), self.source))
        bound = 1 if self.name == "random" else max((abs(v) for v in (*plain_args, *plain_kwargs.values())),
                                                    default=_LIMIT)
        return RandomValueVariable(len(calls) - 1, example, bound)


class RandomValueVariable(VariableTracker):
    """The value of the ``index``-th recorded draw: ``___rv[index]`` in the entry code. ``bound``:
    no draw's value is larger in magnitude (arithmetic on it keeps an int within int64)."""

    def __init__(self, index: int, example, bound=_LIMIT):
        self.index, self.example, self.source, self.bound = index, example, None, bound

    def describe(self):
        return f"a value of random.{type(self.example).__name__} (drawn at run time)"

    def python_type(self):
        return type(self.example)

    def reconstruct(self, plan) -> str:
        return f"___rv[{self.index}]"

    def as_tensor(self, tx, other):
        """The value as a 0-d tensor graph input, for arithmetic with the tensor ``other``: an int as
        int64, a float as float64 with a floating tensor (the op casts it as it casts a Python
        float), else the default dtype (a float with an integer tensor makes the default dtype).
        With a 0-d ``other`` a 0-d input of the same kind would promote the result (a Python number
        does not): a float takes ``other``'s floating dtype; an int with a narrower integer breaks."""
        zero_dim = other.fake.dim() == 0  # (a 0-d tensor would promote a 0-d other of its kind)
        if type(self.example) is int:
            dtype = torch.int64
            if zero_dim and other.fake.dtype not in (torch.int64, torch.bool) \
                    and not (other.fake.is_floating_point() or other.fake.is_complex()):
                raise unsupported("EB0033", f"a drawn int with a 0-d {other.fake.dtype} tensor")
        elif other.fake.is_floating_point() or other.fake.is_complex():
            dtype = other.fake.dtype if zero_dim else torch.float64  # (eager casts the number so)
        else:
            dtype = torch.get_default_dtype()
        output = tx.output
        memo = output.__dict__.setdefault("random_inputs", {})
        key = (self.index, dtype)
        if key not in memo:
            from ember.capture.variables.tensor import TensorVariable
            source = RandomValueSource(self.index, dtype)
            real = torch.tensor(self.example, dtype=dtype)
            fake = output.fake.fake(real)
            memo[key] = TensorVariable(output._placeholder(source, real, fake), fake, None, cls=torch.Tensor)
        return memo[key]


class RandomValueSource(Source):
    """The ``index``-th drawn value as a 0-d tensor (read after the draw, never by a guard)."""

    made_after_guards = True  # (a new tensor each call: no guard reads it, see OutputGraph.finish)

    def __init__(self, index: int, dtype: torch.dtype):
        self.index, self.dtype = index, dtype

    def name(self) -> str:
        return f"random_value_{self.index}"

    def expr(self, scope) -> str:
        from ember.capture.sources import bind
        return f"{bind(scope, torch.tensor, 'tensor')}(___rv[{self.index}], dtype={bind(scope, self.dtype, 'dtype')})"


_DERIVED = {operator.add: lambda a, b: a + b, operator.sub: lambda a, b: a + b,
            operator.mul: lambda a, b: a * b, operator.truediv: lambda a, b: a / b,
            operator.floordiv: lambda a, b: a / b + 1, operator.mod: lambda a, b: b,
            operator.neg: lambda a: a, operator.pos: lambda a: a}  # op -> bound of its result
_BY_CONSTANT = (operator.truediv, operator.floordiv, operator.mod)
_INT_BOUND = 2 ** 62


def derived_value(tx, fn, operands) -> RandomValueVariable | None:
    """``fn(*operands)`` (plain, not in-place) on drawn values and number constants, such as
    ``random.uniform(0, 1) * 2``: a new drawn value that the entry code computes right after the
    draws, as eager computes it (None: not such arithmetic, the caller goes on as before)."""
    from ember.capture.variables.symbolic import SymNodeVariable
    if fn not in _DERIVED or not any(isinstance(v, RandomValueVariable) for v in operands):
        return None
    refs, examples, bounds = [], [], []
    for v in operands:
        if isinstance(v, RandomValueVariable):
            refs.append((True, v.index))
            examples.append(v.example)
            bounds.append(v.bound)
        elif v.is_constant() and not isinstance(v, SymNodeVariable) \
                and type(v.as_constant()) in (int, float, bool) and abs(v.as_constant()) <= _LIMIT:
            refs.append((False, v.as_constant()))
            examples.append(v.as_constant())
            bounds.append(abs(v.as_constant()))
        else:
            return None
    if (len(operands) == 2) != (fn not in (operator.neg, operator.pos)):
        return None
    if fn in _BY_CONSTANT and (refs[1][0] or refs[1][1] == 0):
        return None  # (a drawn divisor may be 0 on another call: eager raises there, mid-frame)
    try:
        example = fn(*examples)
    except Exception:  # noqa: BLE001 — (not for constant nonzero divisors; defensive)
        return None
    bound = _DERIVED[fn](*bounds)
    if type(example) is not float and (type(example) is not int or bound > _INT_BOUND):
        return None
    calls = tx.output.__dict__.setdefault("random_calls", [])
    calls.append((None, fn, tuple(refs), {}, None, None))
    return RandomValueVariable(len(calls) - 1, example, bound)


def random_operands(tx, a, b):
    """A drawn value meeting a tensor in arithmetic: the value as a tensor input (else unchanged)."""
    from ember.capture.variables.tensor import TensorVariable
    if isinstance(a, RandomValueVariable) and isinstance(b, TensorVariable):
        return a.as_tensor(tx, b), b
    if isinstance(b, RandomValueVariable) and isinstance(a, TensorVariable):
        return a, b.as_tensor(tx, a)
    return a, b


def entry_lines(output, scope) -> tuple[list[str], list[str]]:
    """The entry's lines that draw the recorded values (after the guards), and the lines that give
    the generators their states back (before an eager rerun of the frame)."""
    calls = output.__dict__.get("random_calls")
    if not calls:
        return [], []
    # Each draw calls the bound method its source names this call (`L['rng'].randint`, the guards
    # fix its type and name): the generator passed in now, not the one the trace saw.
    exprs = list(dict.fromkeys(c[5].expr(scope) for c in calls if c[0] is not None))
    plan = [(exprs.index(c[5].expr(scope)) if c[0] is not None else None, c[1], c[2], c[3]) for c in calls]

    def draw(methods):
        values = []
        for at, op, args, kwargs in plan:
            if at is None:  # arithmetic on earlier values (derived_value)
                values.append(op(*(values[a] if drawn else a for drawn, a in args)))
            else:
                values.append(methods[at](*args, **kwargs))
        return values

    def states(methods):
        gens = list({id(m.__self__): m.__self__ for m in methods}.values())
        return [(g, g.getstate()) for g in gens]

    def restore(saved):
        for g, s in saved:
            g.setstate(s)
    scope["___draw"], scope["___random_states"], scope["___random_restore"] = draw, states, restore
    methods = "(" + "".join(f"{e}, " for e in exprs) + ")"
    return [f"___rm = {methods}", "___rs = ___random_states(___rm)", "___rv = ___draw(___rm)"], \
        ["___random_restore(___rs)"]
