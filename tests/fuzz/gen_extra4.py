"""A fourth set of fuzz constructs (gen.py), on by default (``generate(..., extras4=False)`` gives
the programs of the generator before them): Python state that lives across graph breaks.

* generators consumed on both sides of a break (``yield from``, a break inside the generator's own
  body, a generator wrapping another), and one list iterator shared by two helpers;
* closure cells written across breaks (``nonlocal`` counters, read by a second closure);
* user class instances with ``__setattr__`` and a property setter, ``__slots__``, the input
  ``obj`` mutated inside a nested helper with a break in it;
* lists and dicts bound to two names, mutated through one across a break, read through the other;
* module globals rebound (``global`` in a nested function) and mutated (list, dict, tensor);
* ``try``/``except``/``finally`` around a nested function that breaks and raises a user
  exception, a user exception raised from inside a graph region after a mutation;
* ``with`` blocks of user context managers (``__enter__``/``__exit__`` logging, an ``__exit__``
  that swallows the exception, ``contextlib.contextmanager``) around breaks;
* early ``return`` from inside loops (and from ``try``/``finally`` in a loop) with breaks;
* ``while`` loops whose condition reads ``.item()`` or a tensor's truth value.

Each method consumes the generator's random stream only when it is chosen.
"""
from __future__ import annotations

EXTRA4_PRELUDE = '''

import contextlib

GV = 0
GL = []
GD = {}
GT = torch.zeros(4, dtype=torch.float64)


def set_gv(v):
    global GV
    GV = v


def gen_from(t, n):
    LOG.append("gf")
    yield from gen(t, n)
    LOG.append("gf2")
    yield t * 10


def counted(it):
    for v in it:
        LOG.append("c")
        yield v + 1


class Box:
    def __init__(self, v):
        object.__setattr__(self, "sets", 0)
        self.v = v

    def __setattr__(self, name, value):
        object.__setattr__(self, "sets", self.sets + 1)
        object.__setattr__(self, name, value)

    @property
    def twice(self):
        return self.v * 2

    @twice.setter
    def twice(self, value):
        self.v = value / 2


class Slotted:
    __slots__ = ("a", "n")

    def __init__(self, a):
        self.a = a
        self.n = 0


class Ctx:
    def __init__(self, tag, swallow=False):
        self.tag = tag
        self.swallow = swallow
        self.n = 0

    def __enter__(self):
        LOG.append(("enter", self.tag))
        self.n += 1
        return self

    def __exit__(self, et, ev, tb):
        LOG.append(("exit", self.tag, et.__name__ if et is not None else None))
        return self.swallow


@contextlib.contextmanager
def cm(tag):
    LOG.append(("cm-in", tag))
    try:
        yield tag * 2
    finally:
        LOG.append(("cm-out", tag))


class UserErr(Exception):
    pass
'''

EXTRA4_KINDS = [("gen_yield", 3), ("shared_iter", 2), ("nonlocal_count", 3), ("user_obj", 3),
                ("alias_mut", 3), ("global_state", 3), ("exc_nested", 3), ("user_ctx", 3),
                ("early_return", 3), ("while_item", 2)]


class Extra4Statements:
    """Mixed into gen.ProgramGenerator: same helpers (``emit``, ``fresh``, ``brk``, ...)."""

    def _cond(self, env):
        return f"{self.int_expr(env)} >= {self.rng.randint(0, 4)}"

    def s_gen_yield(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, it = self.fresh("t"), self.fresh("it")
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"{it} = gen_from({name}, {r.randint(1, 3)})")
            self.emit(indent, f"{out} = next({it})")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {out} + next({it})")
            if self.chance(0.6):
                self.emit(indent, f"{out} = {out} + sum({it}, {name} * 0)")
        elif k == 1:
            g = self.fresh("gfn")
            self.emit(indent, f"def {g}(a):")
            self.emit(indent + 1, f"LOG.append('{g}-start')")
            self.emit(indent + 1, "yield a * 2")
            self.brk(env, indent + 1)
            self.emit(indent + 1, "yield a + 1")
            if self.chance(0.5):
                self.emit(indent + 1, "yield from gen(a, 2)")
            self.emit(indent + 1, f"LOG.append('{g}-end')")
            self.emit(indent, f"{it} = {g}({name})")
            self.emit(indent, f"{out} = next({it})")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {out} + next({it})")
            if self.chance(0.6):
                self.emit(indent, f"LOG.append(len(list({it})))")
        elif k == 2:
            self.emit(indent, f"{it} = counted({r.choice(['gen', 'gen_from'])}({name}, {r.randint(2, 3)}))")
            self.emit(indent, f"{out} = next({it})")
            self.brk(env, indent)
            v = self.fresh("g")
            self.emit(indent, f"for {v} in {it}:")
            self.emit(indent + 1, f"{out} = {out} + {v}")
        else:
            v = self.fresh("g")
            self.emit(indent, f"{out} = {name} * 0")
            self.emit(indent, f"for {v} in gen_from({name}, {r.randint(1, 2)}):")
            self.emit(indent + 1, f"{out} = {out} + {v}")
            self.brk(env, indent + 1)
        env.tensors[out] = self.tvar(s, True)

    def s_shared_iter(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, src, h1, h2 = self.fresh("t"), self.fresh("src"), self.fresh("take"), self.fresh("take")
        items = r.choice([f"[{name}, {name} * 2, {name} + 1, {name} - 1, {name} * 3]",
                          f"({name} * i for i in range(5))", f"list(gen({name}, 5))"])
        self.emit(indent, f"{src} = iter({items})")
        self.emit(indent, f"def {h1}():")
        self.emit(indent + 1, f"return next({src}) * 2")
        self.emit(indent, f"def {h2}():")
        if self.chance(0.6):
            self.brk(env, indent + 1)
        self.emit(indent + 1, f"return next({src}) + 1")
        self.emit(indent, f"{out} = {h1}()")
        self.brk(env, indent)
        self.emit(indent, f"{out} = {out} + {h2}() + next({src})")
        if self.chance(0.5):
            self.emit(indent, f"LOG.append(len(list({src})))")
        env.tensors[out] = self.tvar(s, True)

    def s_nonlocal_count(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, cnt, inc = self.fresh("t"), self.fresh("cnt"), self.fresh("inc")
        self.emit(indent, f"{cnt} = {r.randint(0, 2)}")
        self.emit(indent, f"def {inc}(k):")
        self.emit(indent + 1, f"nonlocal {cnt}")
        self.emit(indent + 1, f"{cnt} += k")
        if self.chance(0.4):
            self.brk(env, indent + 1)
        self.emit(indent + 1, f"return {cnt}")
        self.emit(indent, f"{inc}(1)")
        self.brk(env, indent)
        self.emit(indent, f"{inc}({self.int_expr(env)})")
        if self.chance(0.4):
            self.emit(indent, f"{cnt} += 1")
        if self.chance(0.5):
            rd = self.fresh("read")
            self.emit(indent, f"def {rd}():")
            self.emit(indent + 1, f"return {cnt} * 2")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {name} * {rd}() + {inc}(2)")
        else:
            self.emit(indent, f"{out} = {name} * {cnt}")
        self.emit(indent, f"LOG.append({cnt})")
        env.ints.append(cnt)
        env.tensors[out] = self.tvar(s, True)

    def s_user_obj(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, b, fn = self.fresh("t"), self.fresh("b"), self.fresh("mut")
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"{b} = Box({name} * 1)")
            self.emit(indent, f"{b}.v = {b}.v + 1")
            self.brk(env, indent)
            self.emit(indent, f"{b}.twice = {b}.twice + {name}")
            self.emit(indent, f"def {fn}(o):")
            self.emit(indent + 1, "o.v = o.v * 2")
            if self.chance(0.7):
                self.brk(env, indent + 1)
            self.emit(indent + 1, "o.extra = o.v.sum()")
            self.emit(indent, f"{fn}({b})")
            self.emit(indent, f"{out} = {b}.v + {b}.extra + {b}.sets")
            self.emit(indent, f"LOG.append({b}.sets)")
        elif k == 1:
            self.emit(indent, f"def {fn}(o, a):")
            self.emit(indent + 1, f"o.hits += {r.randint(1, 3)}")
            self.brk(env, indent + 1)
            self.emit(indent + 1, "o.acc4 = a * o.k")
            self.emit(indent + 1, "return o.acc4 + o.double_k")
            self.emit(indent, f"{out} = {fn}(obj, {name})")
            self.emit(indent, "LOG.append(obj.hits)")
        elif k == 2:
            self.emit(indent, f"{b} = Slotted({name} * 1)")
            self.emit(indent, f"{b}.a = {b}.a * 2")
            self.brk(env, indent)
            self.emit(indent, f"{b}.n += 1")
            self.emit(indent, f"{b}.a.add_({b}.n)")
            self.emit(indent, f"{out} = {b}.a + {b}.n")
        else:
            self.emit(indent, "obj.k = obj.k + 1")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {name} * obj.double_k")
            self.emit(indent, "obj.k = obj.k - 1")
        env.tensors[out] = self.tvar(s, True)

    def s_alias_mut(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, a, b = self.fresh("t"), self.fresh("al"), self.fresh("al")
        k = r.randrange(5)
        if k == 0:
            self.emit(indent, f"{a} = lst")
            self.emit(indent, f"{b} = {a}")
            self.emit(indent, f"{b}.append({self.int_expr(env)})")
            self.brk(env, indent)
            self.emit(indent, f"{a}.append(len({b}))")
            self.emit(indent, f"{out} = {name} * len(lst)")
        elif k == 1:
            self.emit(indent, f"{a} = d")
            self.emit(indent, f"{a}['al'] = len({a})")
            self.brk(env, indent)
            self.emit(indent, "d['al'] += 1")
            self.emit(indent, f"{out} = {name} * {a}['al']")
        elif k == 2:
            self.emit(indent, f"{a} = [{name}]")
            self.emit(indent, f"{b} = {a}")
            self.emit(indent, f"{b}.append({name} * 2)")
            self.brk(env, indent)
            self.emit(indent, f"{a}[0] = {a}[0] + 1")
            self.emit(indent, f"{out} = sum({b}) + len({a})")
        elif k == 3:
            self.emit(indent, f"{a} = {{'p': {name}}}")
            self.emit(indent, f"{b} = {a}")
            self.brk(env, indent)
            self.emit(indent, f"{b}['p'] = {b}['p'] * 3")
            self.emit(indent, f"{a}['q'] = {a}['p'] + 1")
            self.emit(indent, f"{out} = {b}['q'] - {a}['p']")
        else:
            self.emit(indent, f"obj.items4 = {a} = [{name} * 1]")
            self.brk(env, indent)
            self.emit(indent, f"{a}.append({name})")
            self.emit(indent, f"{a}[0].mul_(2)")
            self.emit(indent, f"{out} = sum(obj.items4)")
        env.tensors[out] = self.tvar(s, True)

    def s_global_state(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out = self.fresh("t")
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"set_gv(GV + {self.int_expr(env)})")
            self.brk(env, indent)
            self.emit(indent, "LOG.append(GV)")
            self.emit(indent, f"{out} = {name} * GV")
        elif k == 1:
            self.emit(indent, f"GL.append({self.int_expr(env)})")
            self.brk(env, indent)
            self.emit(indent, "GL.append(len(GL))")
            self.emit(indent, "LOG.append(list(GL))")
            self.emit(indent, f"{out} = {name} + len(GL)")
        elif k == 2:
            rb = self.fresh("rebind")
            self.emit(indent, f"def {rb}(v):")
            self.emit(indent + 1, "global GT")
            self.emit(indent + 1, "GT = v")
            self.emit(indent, f"{rb}({name}.sum() * 2)")
            self.brk(env, indent)
            if self.chance(0.5):
                self.emit(indent, "GT.add_(1)")
            self.emit(indent, f"{out} = {name} + GT")
        else:
            self.emit(indent, "GD['k'] = GD.get('k', 0) + 1")
            self.brk(env, indent)
            self.emit(indent, f"GD['n'] = len(GD) + {self.int_expr(env)}")
            self.emit(indent, "LOG.append(sorted(GD.items()))")
            self.emit(indent, f"{out} = {name} * GD['k']")
        env.tensors[out] = self.tvar(s, True)

    def s_exc_nested(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, fn = self.fresh("t"), self.fresh("risky")
        k = r.randrange(3)
        if k == 0:
            self.emit(indent, f"def {fn}(a):")
            self.emit(indent + 1, "b = a * 2")
            self.brk(env, indent + 1)
            self.emit(indent + 1, f"if {self._cond(env)}:")
            self.emit(indent + 2, f"raise UserErr('risky ' + str({self.int_expr(env)}))")
            self.emit(indent + 1, "return b")
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{out} = {fn}({name})")
            self.emit(indent, "except UserErr as e:")
            self.emit(indent + 1, "LOG.append(str(e))")
            self.emit(indent + 1, f"{out} = {name} * 0")
            if self.chance(0.6):
                self.emit(indent, "finally:")
                self.emit(indent + 1, "LOG.append('fin4')")
                if self.chance(0.5):
                    self.brk(env, indent + 1)
        elif k == 1:
            # raised from inside a graph region, after a mutation (kept, as in eager)
            tgt = r.choice(sorted(env.tensors))
            self.emit(indent, f"{out} = {name} * 1")
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{out}.add_(1)")
            if self.chance(0.5):
                self.emit(indent + 1, f"{tgt}.mul_({r.choice([0.5, 2.0, -1.0])})")
            self.emit(indent + 1, f"if {self._cond(env)}:")
            self.emit(indent + 2, f"raise UserErr({out}.shape)")
            self.emit(indent + 1, f"{out} = {out} * 3")
            self.emit(indent, "except UserErr as e:")
            self.emit(indent + 1, "LOG.append(('caught4', str(e)))")
            if self.chance(0.5):
                self.brk(env, indent + 1)
        else:
            inner = self.fresh("inner")
            self.emit(indent, f"def {inner}(a):")
            self.emit(indent + 1, "try:")
            self.brk(env, indent + 2)
            self.emit(indent + 2, f"if {self._cond(env)}:")
            self.emit(indent + 3, "raise UserErr('in')")
            self.emit(indent + 2, "return a + 1")
            self.emit(indent + 1, "finally:")
            self.emit(indent + 2, "LOG.append('inner-fin')")
            if self.chance(0.5):
                self.emit(indent + 2, "print('fin', file=SINK)")
            self.emit(indent, f"def {fn}(a):")
            self.emit(indent + 1, f"return {inner}(a * 2) * 3")
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{out} = {fn}({name})")
            self.emit(indent, "except UserErr as e:")
            if self.chance(0.3):
                self.emit(indent + 1, "try:")
                self.emit(indent + 2, "raise KeyError('again') from e")
                self.emit(indent + 1, "except KeyError as e2:")
                self.emit(indent + 2, "LOG.append((str(e2), type(e2.__cause__).__name__))")
            self.emit(indent + 1, f"{out} = {name} - 1")
        env.tensors[out] = self.tvar(s, True)

    def s_user_ctx(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, c = self.fresh("t"), self.fresh("cx")
        k = r.randrange(5)
        if k == 0:
            self.emit(indent, f"with Ctx('{c}') as {c}:")
            self.emit(indent + 1, f"{out} = {name} * 2")
            self.brk(env, indent + 1)
            self.emit(indent + 1, f"{c}.n += 1")
            self.emit(indent + 1, f"{out} = {out} + {c}.n")
            self.emit(indent, f"LOG.append({c}.n)")
        elif k == 1:
            self.emit(indent, f"{out} = {name} * 1")
            self.emit(indent, f"with Ctx('{c}', swallow=True):")
            self.emit(indent + 1, f"{out} = {out} + 1")
            self.brk(env, indent + 1)
            self.emit(indent + 1, f"if {self._cond(env)}:")
            self.emit(indent + 2, r.choice(["raise UserErr('swallowed')", "LOG.append(1 // 0)"]))
            self.emit(indent + 1, f"{out} = {out} * 2")
            self.emit(indent, "LOG.append('after-swallow')")
        elif k == 2:
            h = self.fresh("hwith")
            self.emit(indent, f"def {h}(a):")
            self.emit(indent + 1, "u = a.cos()")
            self.brk(env, indent + 1)
            self.emit(indent + 1, "return u + 1")
            self.emit(indent, f"with Ctx('{c}o'):")
            self.emit(indent + 1, f"with Ctx('{c}i') as {c}:")
            self.emit(indent + 2, f"{out} = {h}({name}) * {c}.n")
        elif k == 3:
            self.emit(indent, "try:")
            self.emit(indent + 1, f"with Ctx('{c}'):")
            self.emit(indent + 2, f"{out} = {name} + 1")
            self.brk(env, indent + 2)
            self.emit(indent + 2, f"if {self._cond(env)}:")
            self.emit(indent + 3, "raise UserErr('through exit')")
            self.emit(indent, "except UserErr as e:")
            self.emit(indent + 1, "LOG.append(str(e))")
            self.emit(indent + 1, f"{out} = {name} * 0")
        else:
            self.emit(indent, f"with cm({r.randint(1, 3)}) as {c}:")
            self.emit(indent + 1, f"{out} = {name} * {c}")
            self.brk(env, indent + 1)
            self.emit(indent + 1, f"LOG.append({c})")
        env.tensors[out] = self.tvar(s, True)

    def s_early_return(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, fn, i = self.fresh("t"), self.fresh("find"), self.fresh("i")
        k = r.randrange(3)
        self.emit(indent, f"def {fn}(a):")
        if k == 0:
            self.emit(indent + 1, f"for {i} in range({r.randint(2, 4)}):")
            self.emit(indent + 2, "a = a + 1")
            self.brk(Env1(env), indent + 2)
            self.emit(indent + 2, f"if {i} == {r.randint(0, 3)}:")
            self.emit(indent + 3, f"return a * ({i} + 1)")
            self.emit(indent + 1, "return a - 1")
        elif k == 1:
            self.emit(indent + 1, f"{i} = 0")
            self.emit(indent + 1, f"while {i} < 4:")
            self.emit(indent + 2, f"{i} += 1")
            self.emit(indent + 2, "a = a * 1.5")
            self.brk(Env1(env), indent + 2)
            self.emit(indent + 2, f"if a.sum() > {r.choice([0.0, 2.0, 5.0])}:")
            self.emit(indent + 3, f"return a + {i}")
            self.emit(indent + 1, "return a")
        else:
            self.emit(indent + 1, f"for {i} in range(3):")
            self.emit(indent + 2, "try:")
            self.brk(Env1(env), indent + 3)
            self.emit(indent + 3, f"if {i} == {r.randint(0, 3)}:")
            self.emit(indent + 4, f"return a * {i}")
            self.emit(indent + 2, "finally:")
            self.emit(indent + 3, f"LOG.append(('ff', {i}))")
            self.emit(indent + 1, "return a")
        self.emit(indent, f"{out} = {fn}({name})")
        env.tensors[out] = self.tvar(s, True)

    def s_while_item(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out, n = self.fresh("t"), self.fresh("n")
        self.emit(indent, f"{out} = {name} * 1")
        self.emit(indent, f"{n} = 0")
        cond = r.choice([f"{out}.abs().sum().item() < {r.choice([4.0, 10.0, 30.0])}",
                         f"({out} < {r.choice([0.0, 1.0, 3.0])}).any()",
                         f"float({out}.max()) > {r.choice([0.1, 1.0])}"])
        self.emit(indent, f"while {cond} and {n} < {r.randint(2, 5)}:")
        self.emit(indent + 1, f"{out} = {out} * {r.choice([1.5, 0.5, -1.25])} + 0.25")
        self.emit(indent + 1, f"{n} += 1")
        if self.chance(0.4):
            self.brk(env, indent + 1)
        self.emit(indent, f"LOG.append({n})")
        env.ints.append(n)
        env.tensors[out] = self.tvar(s, True)


class Env1:
    """An environment with ``a`` as its one tensor (inside a generated helper ``def f(a)``), for
    ``brk``: a break there reads the helper's own argument."""

    def __init__(self, env):
        self.tensors = {"a": None}
        self.ints = []
