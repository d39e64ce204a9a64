"""Random Python programs for the differential fuzzer.

``generate(seed)`` returns the source of a module that defines ``f(x, y, lst, d, obj)``
and a few helpers. The body mixes Python control flow, containers, closures,
small classes, exceptions, generators, tensor views and in-place mutations, and
graph breaks at random points (a print to a StringIO, a ``torch.compiler.disable``'d
helper, ``.item()``, a branch on a tensor value). The same seed always gives the
same text.

The generator keeps a typed environment (tensor names with their shapes,
Python ints, lists, dicts) so that most programs run without errors; some raise
on purpose (an uncaught ``raise``, a caught torch error), since exceptions are
compared too. Names assigned inside a block are forgotten after it, so a program
never reads a name that may be unbound; outer names are only re-assigned inside a
block with a value of the same shape.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field

from .gen_extra import EXTRA_KINDS, EXTRA_PRELUDE, INPUT_MODES, ExtraStatements
from .gen_extra2 import EXTRA2_KINDS, EXTRA2_PRELUDE, Extra2Statements
from .gen_extra3 import EXTRA3_KINDS, EXTRA3_PRELUDE, Extra3Statements
from .gen_extra4 import EXTRA4_KINDS, EXTRA4_PRELUDE, Extra4Statements

PRELUDE = '''\
import io
import torch

SINK = io.StringIO()
LOG = []


@torch.compiler.disable
def opaque(t):
    LOG.append("opaque")
    return t * 2 + 1


class Base:
    def __init__(self, k):
        self.k = k
        self.hits = 0

    def scale(self, t):
        self.hits += 1
        return t * self.k

    @property
    def double_k(self):
        return self.k * 2


class Child(Base):
    def scale(self, t):
        return super().scale(t) + 1


def gen(t, n):
    for i in range(n):
        LOG.append(i)
        yield t * (i + 1)


def make_obj(k):
    return Child(k) if k % 2 else Base(k)

'''


@dataclass
class TVar:
    shape: tuple
    contig: bool = True


@dataclass
class Env:
    tensors: dict = field(default_factory=dict)   # name -> TVar
    ints: list = field(default_factory=list)      # names of Python ints
    tlists: dict = field(default_factory=dict)    # name -> element shape (list of tensors)

    def child(self) -> "Env":
        return Env({k: TVar(v.shape, v.contig) for k, v in self.tensors.items()},
                   list(self.ints), dict(self.tlists))


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


class ProgramGenerator(ExtraStatements, Extra2Statements, Extra3Statements, Extra4Statements):
    tvar = TVar

    def __init__(self, seed: int, max_stmts: int = 14, max_depth: int = 2):
        self.rng = random.Random(seed)
        self.max_stmts = max_stmts
        self.max_depth = max_depth
        self.counter = 0
        self.lines: list[str] = []
        self.uses_calls = False
        self.helpers = True
        self.extras = True            # the kinds of gen_extra.py
        self.extras2 = True           # the kinds of gen_extra2.py
        self.extras3 = True           # the kinds of gen_extra3.py
        self.extras4 = True           # the kinds of gen_extra4.py
        self.extra_returns: list[str] = []

    # ------------------------------------------------------------------ names
    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    # ------------------------------------------------------------ expressions
    def int_expr(self, env: Env) -> str:
        r = self.rng
        choices = [str(r.randint(0, 4)), "len(lst)", "d.get('a', 0)", "obj.k"]
        if env.ints:
            n = r.choice(env.ints)
            choices += [n, f"({n} + {r.randint(1, 3)})", f"({n} % 3)"]
        return r.choice(choices)

    def scalar_expr(self, env: Env) -> str:
        r = self.rng
        return r.choice([str(r.choice([0.5, 2.0, -1.5, 3.0])), f"({self.int_expr(env)} + 1)", "obj.k", "obj.double_k"])

    def pick_tensor(self, env: Env, shape=None, contig=None):
        names = [n for n, v in env.tensors.items()
                 if (shape is None or v.shape == shape) and (contig is None or v.contig == contig)]
        return self.rng.choice(names) if names else None

    def elementwise(self, e: str) -> str:
        r = self.rng
        return r.choice([
            f"{e}.sin()", f"{e}.cos()", f"torch.relu({e})", f"({e} * 2)", f"({e} + 1)",
            f"{e}.abs()", f"torch.tanh({e})", f"({e} - {e}.mean())", f"{e}.clone()", f"({e} ** 2)",
        ])

    def tensor_expr(self, env: Env, shape, depth: int = 0) -> str:
        """An expression of exactly ``shape`` (a fresh tensor or an existing one)."""
        r = self.rng
        base = self.pick_tensor(env, shape)
        if base is None:
            base = self.reshape_from(env, shape)
        if depth >= 2 or self.chance(0.3):
            return base if self.chance(0.5) else self.elementwise(base)
        k = r.randrange(6)
        if k == 0:
            return self.elementwise(self.tensor_expr(env, shape, depth + 1))
        if k == 1:
            other = self.tensor_expr(env, shape, depth + 1)
            op = r.choice(["+", "-", "*"])
            return f"({base} {op} {other})"
        if k == 2:
            return f"({base} * {self.scalar_expr(env)})"
        if k == 3 and shape:
            # broadcast a last-dim vector
            vec = self.pick_tensor(env, shape[-1:])
            if vec is not None:
                return f"({base} + {vec})"
        if k == 4:
            return f"torch.where({base} > 0, {base}, {self.tensor_expr(env, shape, depth + 1)})"
        return self.elementwise(base)

    def reshape_from(self, env: Env, shape) -> str:
        """Make ``shape`` out of some existing tensor (reshape keeps it legal)."""
        r = self.rng
        src = r.choice(sorted(env.tensors))
        sshape = env.tensors[src].shape
        n, m = _numel(sshape), _numel(shape)
        if n == m:
            return f"{src}.reshape({shape!r})" if shape else f"{src}.reshape(())"
        if m == 1:
            return f"{src}.sum().reshape({shape!r})" if shape else f"{src}.sum()"
        return f"({src}.sum() * torch.ones({shape!r}, dtype=torch.float64))"

    def view_of(self, env: Env, name: str):
        """A view op on ``name``: (expr, shape, contiguous)."""
        r = self.rng
        v = env.tensors[name]
        s = v.shape
        opts = []
        if len(s) == 2:
            opts += [(f"{name}.t()", (s[1], s[0]), False),
                     (f"{name}.transpose(0, 1)", (s[1], s[0]), False),
                     (f"{name}[:, 1:]", (s[0], s[1] - 1), False) if s[1] >= 2 else None,
                     (f"{name}[:, {r.randrange(s[1])}]", (s[0],), False)]
        if len(s) >= 1 and s[0] >= 1:
            i = r.randrange(s[0])
            opts += [(f"{name}[{i}]", s[1:], v.contig),
                     (f"{name}.unsqueeze(0)", (1,) + s, v.contig),
                     (f"{name}.narrow(0, 0, {max(1, s[0] - 1)})", (max(1, s[0] - 1),) + s[1:], v.contig)]
            if s[0] >= 2:
                opts.append((f"{name}[1:]", (s[0] - 1,) + s[1:], v.contig))
                opts.append((f"{name}[::2]", ((s[0] + 1) // 2,) + s[1:], False))
        if len(s) >= 1 and s[0] == 1:
            opts.append((f"{name}.squeeze(0)", s[1:], v.contig))
        if v.contig and len(s) >= 1:
            opts.append((f"{name}.view(-1)", (_numel(s),), True))
            if len(s) == 1 and s[0] % 2 == 0:
                opts.append((f"{name}.view(2, {s[0] // 2})", (2, s[0] // 2), True))
        if not v.contig and len(s) >= 1 and self.chance(0.1):
            # eager raises here; compared like any other exception
            opts.append((f"{name}.view(-1)", (_numel(s),), True))
        opts = [o for o in opts if o is not None]
        if not opts:
            return None
        return r.choice(opts)

    # -------------------------------------------------------------- statements
    def block(self, env: Env, indent: int, depth: int, n: int) -> None:
        for _ in range(n):
            self.statement(env, indent, depth)

    def statement(self, env: Env, indent: int, depth: int) -> None:
        r = self.rng
        kinds = [
            ("assign", 10), ("view", 6), ("inplace", 9), ("update", 5), ("int", 3),
            ("list", 4), ("dict", 3), ("tuple", 2), ("set", 1), ("comp", 3),
            ("obj", 3), ("closure", 3), ("generator", 3), ("break_print", 3),
            ("break_opaque", 2), ("break_item", 3), ("catch_torch", 2),
        ] + ([("helper", 3)] if self.helpers else []) + (EXTRA_KINDS if self.extras else []) \
            + (EXTRA2_KINDS if self.extras2 else []) + (EXTRA3_KINDS if self.extras3 else []) \
            + (EXTRA4_KINDS if self.extras4 else [])
        if depth < self.max_depth:
            kinds += [("if_py", 3), ("if_tensor", 3), ("for", 4), ("while", 2), ("try", 3)]
        names, weights = zip(*kinds)
        kind = r.choices(names, weights)[0]
        getattr(self, "s_" + kind)(env, indent, depth)

    def s_assign(self, env, indent, depth):
        shape = env.tensors[self.rng.choice(sorted(env.tensors))].shape
        name = self.fresh("t")
        self.emit(indent, f"{name} = {self.tensor_expr(env, shape)}")
        env.tensors[name] = TVar(shape, True)

    def s_view(self, env, indent, depth):
        src = self.rng.choice(sorted(env.tensors))
        got = self.view_of(env, src)
        if got is None:
            return self.s_assign(env, indent, depth)
        expr, shape, contig = got
        name = self.fresh("v")
        self.emit(indent, f"{name} = {expr}")
        env.tensors[name] = TVar(shape, contig)

    def s_inplace(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        k = r.randrange(7)
        if k == 0:
            self.emit(indent, f"{name}.add_({self.tensor_expr(env, s)})")
        elif k == 1:
            self.emit(indent, f"{name}.mul_({self.scalar_expr(env)})")
        elif k == 2:
            self.emit(indent, f"{name}.copy_({self.tensor_expr(env, s)})")
        elif k == 3 and s:
            i = r.randrange(s[0])
            val = self.scalar_expr(env) if self.chance(0.5) else self.tensor_expr(env, s[1:])
            self.emit(indent, f"{name}[{i}] = {val}")
        elif k == 4 and len(s) == 2:
            self.emit(indent, f"{name}[:, {r.randrange(s[1])}] = {self.scalar_expr(env)}")
        elif k == 5:
            self.emit(indent, f"{name}.clamp_(min={r.choice([-0.5, 0.0, 0.25])})")
        else:
            self.emit(indent, f"{name}.sub_({self.scalar_expr(env)})")

    def s_update(self, env, indent, depth):
        name = self.rng.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        op = self.rng.choice(["+", "*", "-"])
        if self.chance(0.3):
            self.emit(indent, f"{name} {op}= {self.tensor_expr(env, s)}")
            # augmented assignment is in place on a tensor: contiguity is unchanged
        else:
            self.emit(indent, f"{name} = {name} {op} {self.tensor_expr(env, s)}")
            env.tensors[name].contig = True

    def s_int(self, env, indent, depth):
        name = self.fresh("n")
        self.emit(indent, f"{name} = {self.int_expr(env)} + {self.int_expr(env)}")
        env.ints.append(name)

    def s_list(self, env, indent, depth):
        r = self.rng
        k = r.randrange(5)
        if k == 0:
            self.emit(indent, f"lst.append({self.int_expr(env)})")
        elif k == 1:
            self.emit(indent, f"lst.extend([{self.int_expr(env)}, {r.randint(0, 9)}])")
        elif k == 2:
            name = self.fresh("n")
            self.emit(indent, f"{name} = lst.pop() if lst else -1")
            env.ints.append(name)
        elif k == 3:
            shape = env.tensors[r.choice(sorted(env.tensors))].shape
            name = self.fresh("tl")
            self.emit(indent, f"{name} = [{self.tensor_expr(env, shape)}, {self.tensor_expr(env, shape)}]")
            env.tlists[name] = shape
            if self.chance(0.5):
                self.emit(indent, f"{name}.append({self.tensor_expr(env, shape)})")
            out = self.fresh("t")
            self.emit(indent, f"{out} = torch.stack({name}).sum(0)")
            env.tensors[out] = TVar(shape, True)
        else:
            name = self.fresh("n")
            self.emit(indent, f"{name} = sum(lst) + lst[-1] if lst else 0")
            env.ints.append(name)

    def s_dict(self, env, indent, depth):
        r = self.rng
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"d[{r.choice(['a', 'b', 'z'])!r}] = {self.int_expr(env)}")
        elif k == 1:
            name = self.fresh("n")
            self.emit(indent, f"{name} = 0")
            self.emit(indent, f"for key, val in d.items():")
            self.emit(indent + 1, f"{name} += val if key != 'b' else 2 * val")
            env.ints.append(name)
        elif k == 2:
            shape = env.tensors[r.choice(sorted(env.tensors))].shape
            td = self.fresh("td")
            out = self.fresh("t")
            self.emit(indent, f"{td} = {{'p': {self.tensor_expr(env, shape)}}}")
            self.emit(indent, f"{td}['q'] = {td}['p'] * 2")
            self.emit(indent, f"{out} = sum({td}.values())")
            env.tensors[out] = TVar(shape, True)
        else:
            name = self.fresh("n")
            self.emit(indent, f"{name} = d.setdefault('s', {self.int_expr(env)}) + len(d)")
            env.ints.append(name)

    def s_tuple(self, env, indent, depth):
        a = self.rng.choice(sorted(env.tensors))
        b = self.rng.choice(sorted(env.tensors))
        p, q = self.fresh("t"), self.fresh("t")
        self.emit(indent, f"{p}, {q} = {b}, {a}")
        env.tensors[p] = TVar(env.tensors[b].shape, env.tensors[b].contig)
        env.tensors[q] = TVar(env.tensors[a].shape, env.tensors[a].contig)
        if self.chance(0.5):
            tup = self.fresh("tp")
            out = self.fresh("t")
            self.emit(indent, f"{tup} = ({p}, {self.int_expr(env)})")
            self.emit(indent, f"{out} = {tup}[0] * {tup}[1]")
            env.tensors[out] = TVar(env.tensors[p].shape, True)

    def s_set(self, env, indent, depth):
        s, n = self.fresh("s"), self.fresh("n")
        self.emit(indent, f"{s} = {{1, {self.int_expr(env)}, {self.int_expr(env)}}}")
        self.emit(indent, f"{s}.add(len(lst))")
        self.emit(indent, f"{n} = len({s}) + (3 in {s})")
        env.ints.append(n)

    def s_comp(self, env, indent, depth):
        r = self.rng
        shape = env.tensors[r.choice(sorted(env.tensors))].shape
        k = r.randrange(3)
        out = self.fresh("t")
        if k == 0:
            src = self.tensor_expr(env, shape, 1)
            self.emit(indent, f"{out} = sum([{src} * i for i in range({r.randint(1, 3)})])")
        elif k == 1:
            tl = self.fresh("tl")
            self.emit(indent, f"{tl} = [{self.tensor_expr(env, shape, 1)} + v for v in lst if v % 2 == {r.randint(0, 1)}]")
            self.emit(indent, f"{out} = torch.stack({tl}).sum(0) if {tl} else {self.tensor_expr(env, shape, 1)}")
        else:
            dc = self.fresh("dc")
            self.emit(indent, f"{dc} = {{k: v * 2 for k, v in d.items()}}")
            self.emit(indent, f"{out} = {self.tensor_expr(env, shape, 1)} * {dc}.get('a', 1)")
        env.tensors[out] = TVar(shape, True)

    def s_obj(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        k = r.randrange(4)
        if k == 0:
            out = self.fresh("t")
            self.emit(indent, f"{out} = obj.scale({name})")
            env.tensors[out] = TVar(s, True)
        elif k == 1:
            self.emit(indent, f"obj.hits += {r.randint(1, 3)}")
        elif k == 2:
            self.emit(indent, f"obj.last = {self.tensor_expr(env, s)}")
        else:
            b, out = self.fresh("b"), self.fresh("t")
            self.emit(indent, f"{b} = {r.choice(['Base', 'Child'])}({self.int_expr(env)})")
            self.emit(indent, f"{out} = {b}.scale({name}) + {b}.hits")
            env.tensors[out] = TVar(s, True)

    def s_closure(self, env, indent, depth):
        r = self.rng
        fn = self.fresh("inner")
        captured = r.choice(sorted(env.tensors))
        cs = env.tensors[captured].shape
        arg = self.pick_tensor(env, cs) or captured
        self.emit(indent, f"def {fn}(a):")
        if self.chance(0.5):
            self.uses_calls = True
            self.emit(indent + 1, "nonlocal calls")
            self.emit(indent + 1, "calls += 1")
        if self.chance(0.25):
            self.emit(indent + 1, f"print('in {fn}', a.shape, file=SINK)")
        self.emit(indent + 1, f"return a * {captured} + {r.randint(1, 3)}")
        out = self.fresh("t")
        self.emit(indent, f"{out} = {fn}({arg})")
        env.tensors[out] = TVar(cs, True)

    def s_helper(self, env, indent, depth):
        """A nested function with a body of its own (graph breaks, blocks, loops, a nested helper
        in turn), called from the frame, maybe inside a ``try`` or ``with torch.no_grad()``: a
        break inside it is a nested graph break (capture/nested_breaks.py)."""
        r = self.rng
        fn, out = self.fresh("helper"), self.fresh("t")
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        self.emit(indent, f"def {fn}(a, k=1):")
        inner = Env({"a": TVar(s, env.tensors[name].contig)}, [], {})
        if self.chance(0.3):
            self.uses_calls = True
            self.emit(indent + 1, "nonlocal calls")
            self.emit(indent + 1, "calls += 1")
        self.block(inner, indent + 1, depth + 1, r.randint(1, 4))
        ret = r.choice([n for n, v in inner.tensors.items() if v.shape == s])
        self.emit(indent + 1, f"return {ret} * k")
        call = f"{fn}({name}, k={r.randint(1, 3)})" if self.chance(0.3) else f"{fn}({name})"
        wrap = r.randrange(4)
        if wrap == 0:
            self.emit(indent, "with torch.no_grad():")
            self.emit(indent + 1, f"{out} = {call}")
        elif wrap == 1:
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{out} = {call}")
            self.emit(indent, "except (ValueError, RuntimeError, IndexError) as e:")
            self.emit(indent + 1, f"print('caught', type(e).__name__, file=SINK)")
            self.emit(indent + 1, f"{out} = {name} * 0")
        else:
            self.emit(indent, f"{out} = {call}")
        env.tensors[out] = TVar(s, True)

    def s_generator(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        k = r.randrange(3)
        if k == 0:
            self.emit(indent, f"{out} = {name} * 0")
            self.emit(indent, f"for g in gen({name}, {r.randint(1, 3)}):")
            self.emit(indent + 1, f"{out} = {out} + g")
        elif k == 1:
            it = self.fresh("it")
            self.emit(indent, f"{it} = gen({name}, {r.randint(2, 5)})")
            self.emit(indent, f"{out} = next({it})")
            if self.chance(0.5):
                self.emit(indent, f"{out} = {out} + next({it})")
        else:
            self.emit(indent, f"{out} = sum(gen({name}, {r.randint(1, 3)}))")
        env.tensors[out] = TVar(s, True)

    def s_break_print(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        what = r.choice([f"{name}.shape", f"len(lst)", f"sorted(d)", f"obj.hits",
                         f"{self.int_expr(env)}", f"'step', {self.int_expr(env)}"])
        self.emit(indent, f"print({what}, file=SINK)")

    def s_break_opaque(self, env, indent, depth):
        name = self.rng.choice(sorted(env.tensors))
        out = self.fresh("t")
        self.emit(indent, f"{out} = opaque({name})")
        env.tensors[out] = TVar(env.tensors[name].shape, True)

    def s_break_item(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        f, out = self.fresh("f"), self.fresh("t")
        target = r.choice(sorted(env.tensors))
        k = r.randrange(3)
        if k == 0:
            self.emit(indent, f"{f} = {name}.sum().item()")
        elif k == 1:
            self.emit(indent, f"{f} = float({name}.max())")
        else:
            self.emit(indent, f"{f} = {name}.abs().sum().tolist()")
        self.emit(indent, f"{out} = {target} * {f}")
        env.tensors[out] = TVar(env.tensors[target].shape, True)

    def s_catch_torch(self, env, indent, depth):
        name = self.rng.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        bad = self.rng.choice([f"{name}.view(7, 5)", f"{name} @ torch.ones(13, dtype=torch.float64)",
                               f"torch.cat([{name}, torch.ones(9, 9, 9, dtype=torch.float64)])"])
        self.emit(indent, f"{out} = {name} * 1")
        self.emit(indent, "try:")
        self.emit(indent + 1, f"{out} = {bad}")
        self.emit(indent, "except RuntimeError as e:")
        self.emit(indent + 1, f"LOG.append(type(e).__name__)")
        self.emit(indent + 1, f"{out} = {out} + 1")
        env.tensors[out] = TVar(s, True)

    # ---------------------------------------------------------------- blocks
    def _merge(self, env: Env, inner: Env) -> None:
        for k, v in env.tensors.items():
            v.contig = v.contig and inner.tensors[k].contig

    def nested(self, env, indent, depth, n=None):
        inner = env.child()
        self.block(inner, indent, depth + 1, n or self.rng.randint(1, 3))
        self._merge(env, inner)

    def s_if_py(self, env, indent, depth):
        cond = self.rng.choice([f"{self.int_expr(env)} > {self.rng.randint(0, 3)}", "len(lst) % 2 == 0",
                                "'a' in d", "obj.k > 2", "isinstance(obj, Child)", "hasattr(obj, 'last')"])
        self.emit(indent, f"if {cond}:")
        self.nested(env, indent + 1, depth)
        if self.chance(0.5):
            self.emit(indent, "else:")
            self.nested(env, indent + 1, depth)

    def s_if_tensor(self, env, indent, depth):
        name = self.rng.choice(sorted(env.tensors))
        cond = self.rng.choice([f"{name}.sum() > 0", f"({name} > 0).any()", f"{name}.mean() < 0.5"])
        self.emit(indent, f"if {cond}:")
        self.nested(env, indent + 1, depth)
        self.emit(indent, "else:")
        self.nested(env, indent + 1, depth)

    def s_for(self, env, indent, depth):
        r = self.rng
        # a copy of lst: the body may append to lst (iterating it directly would not end)
        it = r.choice([f"range({r.randint(1, 4)})", "range(len(lst))", "list(lst)", "list(d.values())"])
        i = self.fresh("i")
        self.emit(indent, f"for {i} in {it}:")
        inner = env.child()
        inner.ints.append(i)
        if self.chance(0.4):
            self.emit(indent + 1, f"if {i} == {r.randint(0, 2)}:")
            self.emit(indent + 2, r.choice(["break", "continue"]))
        self.block(inner, indent + 1, depth + 1, r.randint(1, 3))
        self._merge(env, inner)

    def s_while(self, env, indent, depth):
        r = self.rng
        c = self.fresh("c")
        self.emit(indent, f"{c} = 0")
        self.emit(indent, f"while {c} < {r.randint(1, 4)}:")
        self.emit(indent + 1, f"{c} += 1")
        inner = env.child()
        inner.ints.append(c)
        if self.chance(0.4):
            self.emit(indent + 1, f"if {c} == {r.randint(1, 3)}:")
            self.emit(indent + 2, r.choice(["break", "continue"]))
        self.block(inner, indent + 1, depth + 1, r.randint(1, 3))
        self._merge(env, inner)
        env.ints.append(c)

    def s_try(self, env, indent, depth):
        r = self.rng
        exc = r.choice(["ValueError", "KeyError", "ZeroDivisionError"])
        self.emit(indent, "try:")
        self.nested(env, indent + 1, depth)
        if self.chance(0.6):
            cond = f"{self.int_expr(env)} >= {r.randint(0, 3)}"
            if exc == "ZeroDivisionError":
                self.emit(indent + 1, f"if {cond}:")
                self.emit(indent + 2, f"LOG.append(1 // ({self.int_expr(env)} * 0))")
            else:
                self.emit(indent + 1, f"if {cond}:")
                self.emit(indent + 2, f"raise {exc}('boom ' + str({self.int_expr(env)}))")
        self.emit(indent, f"except {exc} as e:")
        self.emit(indent + 1, "LOG.append(str(e))")
        self.nested(env, indent + 1, depth)
        if self.chance(0.4):
            self.emit(indent, "finally:")
            self.emit(indent + 1, "LOG.append('finally')")
            if self.chance(0.5):
                self.nested(env, indent + 1, depth)

    # --------------------------------------------------------------- program
    def program(self) -> str:
        r = self.rng
        env = Env({"x": TVar((3, 4)), "y": TVar((4,))})
        body_start = len(self.lines)
        self.block(env, 1, 0, r.randint(3, self.max_stmts))
        if self.chance(0.07):
            self.emit(1, f"if {self.int_expr(env)} > {r.randint(0, 3)}:")
            self.emit(2, f"raise ValueError('final ' + str(len(lst)))")
        body = self.lines[body_start:]
        # return some tensors (fresh, views, inputs), ints and containers
        names = list(env.tensors)[-6:]   # the most recent ones, inputs only sometimes
        outs = r.sample(names, k=min(len(names), r.randint(1, 4)))
        if env.ints and self.chance(0.5):
            outs.append(r.choice(env.ints))
        if self.chance(0.2):
            outs.append("lst")
        if self.chance(0.2):
            outs.append("dict(d)")
        prelude = PRELUDE
        if self.extras:
            outs += self.extra_returns[:2]
            if len(names) >= 2 and self.chance(0.15):
                a, b = r.sample(names, 2)
                outs.append(r.choice([f"[{a}, {b}]", f"{{'p': {a}, 'q': ({b},)}}"]))
            prelude += EXTRA_PRELUDE + (EXTRA2_PRELUDE if self.extras2 else "") \
                + (EXTRA3_PRELUDE if self.extras3 else "") + (EXTRA4_PRELUDE if self.extras4 else "") \
                + f"INPUT_MODE = {r.choice(INPUT_MODES) if self.chance(0.3) else 0}\n"
        head = ["def f(x, y, lst, d, obj):", "    calls = 0"]
        ret = "    return " + ", ".join(outs + ["calls"]) + ("," if not outs else "")
        return prelude + "\n" + "\n".join(head + body + [ret]) + "\n"


def generate(seed: int, max_stmts: int = 14, max_depth: int = 2, helpers: bool = True,
             extras: bool | None = None, extras2: bool | None = None,
             extras3: bool | None = None, extras4: bool | None = None) -> str:
    """``helpers=False``: without nested helper functions (``s_helper``, added later), the
    program an earlier generator made for ``seed`` (tests that pin a seed's program use it).
    ``extras=False`` (the default when ``helpers=False``): without the constructs of
    gen_extra.py, the program the generator made before them. ``extras2=False`` (the default when
    ``extras`` is False): without the constructs of gen_extra2.py; ``extras3=False`` (the default
    when ``extras2`` is False): without those of gen_extra3.py; ``extras4=False`` (the default when
    ``extras3`` is False): without those of gen_extra4.py."""
    gen = ProgramGenerator(seed, max_stmts, max_depth)
    gen.helpers = helpers
    gen.extras = helpers if extras is None else extras
    gen.extras2 = gen.extras if extras2 is None else extras2
    gen.extras3 = gen.extras2 if extras3 is None else extras3
    gen.extras4 = gen.extras3 if extras4 is None else extras4
    return gen.program()


if __name__ == "__main__":
    import sys
    print(generate(int(sys.argv[1]) if len(sys.argv) > 1 else 0))
