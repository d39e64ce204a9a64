"""Random programs full of graph breaks, eager vs compiled.

Each program mixes, at random nesting (for loops, try/except/finally, ``with no_grad``, ``if``):
breaking calls (a ``torch.compiler.disable``d function, ``print``), lists/dicts/objects made in the
frame and mutated on both sides of a break, an iterator advanced by a breaking call, closures over
frame cells (``nonlocal``), nested functions with defaults, list iterators over mutated lists,
raising and handling exceptions, ``sys.exc_info()`` inside handlers, ``*args`` calls, branches on
tensors, ``while`` with ``break``/``continue``, breaks in closures called by closures, in a user
context manager's block and in a method calling ``super()``. Eager and compiled (strict,
every generated code object validated) must agree on the result, the log of side effects and what
was printed. ``EMBER_FUZZ_BREAKS=N`` runs N programs (1000 ran clean when this was written).
"""
import builtins
import contextlib
import io
import os
import random
import sys

import pytest
import torch

from ember_test_helpers import compile, reset

N_PROGRAMS = int(os.environ.get("EMBER_FUZZ_BREAKS", "30"))


@torch.compiler.disable
def brk(*a):
    return a[0] if a else None


@torch.compiler.disable
def adv(it):
    return next(it, None)


@torch.compiler.disable
def cur():
    return repr(sys.exc_info()[1])


class Obj:
    pass


class Ctx:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, value, tb):
        self.log.append(("exit", typ.__name__ if typ else None))
        return False


class Base:
    def f(self, x):
        return x * 2


class Child(Base):
    def f(self, x):
        brk()
        return super().f(x) + 1


# "\n" separates lines of one statement, a leading "\t" indents a line one level more.
STATEMENTS = [
    "x = x + {k}", "log.append({k})", "acc.append(x * {k})", "brk()", "brk(acc.append({k}))",
    "d['k{k}'] = len(acc)", "brk(d)", "n = n + 1", "log.append(n)", "log.append(len(d))",
    "log.append(adv(it))", "x = cl(x)", "print('p', {k})", "o.v = o.v + {k}", "brk(o)",
    "log.append(o.v)", "log.append(cur())", "fn2 = lambda v, q={k}: v + q + n",
    "for v in acc:\n\tbrk()\n\tlog.append(len(acc))",
    "lst2 = [n, {k}]\nit2 = iter(lst2)\nbrk(lst2.append(7))\nlog.append(list(it2))",
    "t2 = ([{k}],)\nbrk(t2[0].append(1))\nlog.append(t2)",
    "def g2(v, w={k}):\n\treturn v * w + n\nbrk()\nx = g2(x)",
    "x = brk(*[x, {k}])",
    "log.append(brk(len(acc), *acc[:1]) is not None)",
    "if x.sum() > {k}:\n\tlog.append('big')\nelse:\n\tlog.append('small')",
    "while n < {k}:\n\tn = n + 1\n\tif n == 2:\n\t\tcontinue\n\tbrk()\n\tif n > 3:\n\t\tbreak",
    "def inner2(v):\n\tbrk()\n\treturn v + n\ndef outer2(v):\n\treturn inner2(v) * 1\nx = outer2(x)",
    "with Ctx(log):\n\tbrk()\n\tlog.append({k})",
    "m = Child()\nx = m.f(x)",
    "for kk, vv in d.items():\n\tbrk()\n\tlog.append(kk)",
    "tmp = [x]\nbrk()\ndel tmp",
]

PROLOGUE = """def f(log, x, O):
    acc = []
    d = {}
    n = 0
    it = iter([10, 20, 30, 40, 50, 60])
    o = O()
    o.v = 0
    k = 3
    def cl(v):
        nonlocal n
        n += 1
        return v + k + n
"""


def _block(rng, depth, ind):
    lines = []
    pad = "    " * ind
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        if depth < 2 and r < 0.12:
            lines.append(f"{pad}for i{depth} in range({rng.randint(1, 3)}):")
            lines += _block(rng, depth + 1, ind + 1)
        elif depth < 2 and r < 0.22:
            lines.append(f"{pad}try:")
            lines += _block(rng, depth + 1, ind + 1)
            if rng.random() < 0.5:
                lines.append(f"{pad}    raise ValueError({rng.randint(0, 9)})")
            lines.append(f"{pad}except ValueError as e:")
            lines += _block(rng, depth + 1, ind + 1)
            if rng.random() < 0.5:
                lines.append(f"{pad}finally:")
                lines += _block(rng, depth + 1, ind + 1)
        elif depth < 2 and r < 0.3:
            lines.append(f"{pad}with torch.no_grad():")
            lines += _block(rng, depth + 1, ind + 1)
        elif depth < 2 and r < 0.36:
            lines.append(f"{pad}if n % 2 == 0:")
            lines += _block(rng, depth + 1, ind + 1)
        else:
            for part in rng.choice(STATEMENTS).format(k=rng.randint(1, 5)).split("\n"):
                lines.append("    " * (ind + part.count("\t")) + part.replace("\t", ""))
    return lines


def make_program(seed: int) -> str:
    rng = random.Random(seed)
    return PROLOGUE + "\n".join(_block(rng, 0, 1)) + "\n    return x, acc, d, n, o.v, list(it)\n"


def _run(fn):
    log, out = [], io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            r = fn(log, torch.ones(2), Obj)
            r = (repr(r[0]), repr(r[1]), r[2:4], r[4:])
        except Exception as e:  # noqa: BLE001 - compared with eager's
            r = ("raised", type(e).__name__, str(e))
    return repr(r), repr(log), out.getvalue()


@pytest.mark.parametrize("seed", range(N_PROGRAMS))
def test_random_program_with_breaks(seed):
    src = make_program(seed)
    namespace = {"torch": torch, "brk": brk, "adv": adv, "cur": cur, "Ctx": Ctx, "Child": Child}
    exec(builtins.compile(src, f"<graph break fuzz {seed}>", "exec"), namespace)
    fn = namespace["f"]
    expected = _run(fn)
    reset()
    actual = _run(compile(fn))
    assert actual == expected, f"program (seed {seed}):\n{src}"

