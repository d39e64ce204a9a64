"""A second set of fuzz constructs (gen.py), on by default (``generate(..., extras2=False)`` gives
the programs of the generator before them): state carried across a graph break.

* custom ``torch.autograd.Function``s (``save_for_backward`` of an input or of the output, ctx
  attributes, ``mark_dirty``, ``mark_non_differentiable``, ``setup_context``, an input returned
  unchanged, a print in ``forward``);
* module and object attributes written before a break and read (and written) after it;
* generators and iterators started before a break and drained after it;
* lists and dicts mutated on both sides of a break;
* ``try``/``except``/``finally`` around a break and an op that raises;
* a closure cell written on both sides of a break;
* sizes computed from ``.shape``/``.size()``/``numel()`` feeding ``view``, ``reshape``,
  ``narrow``, slices, factories and ``split``.

A break (``brk``) is one of: a print to ``SINK``, a ``torch.compiler.disable``'d call, ``.item()``,
a branch on a tensor value. Each method consumes the generator's random stream only when chosen.
"""
from __future__ import annotations

EXTRA2_PRELUDE = '''

class Sq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, k):
        ctx.save_for_backward(a)
        ctx.k = k
        return a * a * k

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * 2 * a * ctx.k, None


class ExpOut(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        out = (a * 0.25).exp()
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        (out,) = ctx.saved_tensors
        return g * out * 0.25


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        a.mul_(2)
        ctx.mark_dirty(a)
        return a

    @staticmethod
    def backward(ctx, g):
        return g * 2


class Pos(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a, s):
        ctx.s = s
        mask = a > 0
        ctx.mark_non_differentiable(mask)
        return a * s, mask

    @staticmethod
    def backward(ctx, g, gmask):
        return g * ctx.s, None


class NewStyle(torch.autograd.Function):
    @staticmethod
    def forward(a, b):
        return a.sin() + b

    @staticmethod
    def setup_context(ctx, inputs, output):
        a, b = inputs
        ctx.save_for_backward(a)
        ctx.b_is_tensor = isinstance(b, torch.Tensor)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * a.cos(), (g if ctx.b_is_tensor else None)


class Same(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a

    @staticmethod
    def backward(ctx, g):
        return g * 3


class Loud(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        print("Loud.forward", tuple(a.shape), file=SINK)
        ctx.save_for_backward(a)
        return a * 2

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * 2 + a * 0
'''

EXTRA2_KINDS = [("autograd_fn", 4), ("attr_break", 3), ("iter_break", 3), ("container_break", 3),
                ("try_break", 3), ("closure_break", 3), ("dyn_shape", 4)]


class Extra2Statements:
    """Mixed into gen.ProgramGenerator: same helpers (``emit``, ``fresh``, ``tensor_expr``, ...)."""

    def brk(self, env, indent):
        """A graph break that leaves the environment as it was."""
        r = self.rng
        name = r.choice(sorted(env.tensors))
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"print('brk', {self.int_expr(env)}, file=SINK)")
        elif k == 1:
            self.emit(indent, f"LOG.append(opaque({name}).sum().item() > 0)")
        elif k == 2:
            f = self.fresh("f")
            self.emit(indent, f"{f} = float({name}.sum())")
            self.emit(indent, f"LOG.append({f} > 0)")
        else:
            self.emit(indent, f"if {name}.sum() > 0:")
            self.emit(indent + 1, "LOG.append('pos')")

    def s_autograd_fn(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        k = r.randrange(8)
        if k == 0:
            self.emit(indent, f"{out} = Sq.apply({name}, {self.scalar_expr(env)})")
        elif k == 1:
            self.emit(indent, f"{out} = ExpOut.apply({self.tensor_expr(env, s, 1)})")
        elif k == 2:
            # mark_dirty on a fresh clone (on the name itself now and then: an input's version)
            if self.chance(0.8):
                c = self.fresh("c")
                self.emit(indent, f"{c} = {name}.clone()")
                self.emit(indent, f"{out} = Dirty.apply({c})")
                if self.chance(0.5):
                    self.emit(indent, f"{out} = {out} + {c}")
            else:
                self.emit(indent, f"{out} = Dirty.apply({name})")
        elif k == 3:
            m = self.fresh("m")
            self.emit(indent, f"{out}, {m} = Pos.apply({name}, {self.scalar_expr(env)})")
            self.emit(indent, f"{out} = {out} * {m}")
            if self.chance(0.5):
                self.emit(indent, f"LOG.append(({m}.requires_grad, {m}.dtype == torch.bool))")
        elif k == 4:
            other = self.tensor_expr(env, s, 1) if self.chance(0.6) else self.scalar_expr(env)
            self.emit(indent, f"{out} = NewStyle.apply({name}, {other})")
        elif k == 5:
            self.emit(indent, f"{out} = Same.apply({name})")
            if self.chance(0.5):
                self.emit(indent, f"{out} = {out} * 1")
        elif k == 6:
            self.emit(indent, f"{out} = Loud.apply({name})")
        else:
            # saved across a break: forward before it, more ops after
            self.emit(indent, f"{out} = Sq.apply({name}, 2)")
            self.brk(env, indent)
            self.emit(indent, f"{out} = ExpOut.apply({out}) + {name}")
        env.tensors[out] = self.tvar(s, True)

    def s_attr_break(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        holder = r.choice(["MOD", "obj"])
        attr = r.choice(["state", "acc"])
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"{holder}.{attr} = {self.tensor_expr(env, s, 1)}")
            self.brk(env, indent)
            self.emit(indent, f"{holder}.{attr} = {holder}.{attr} * 2 + {name}")
            self.emit(indent, f"{out} = {holder}.{attr} + 1")
        elif k == 1:
            # an attribute that may not exist yet (first call) or hold an earlier call's tensor
            self.emit(indent, f"{holder}.{attr} = getattr({holder}, {attr!r}, 0) + {name}.sum()")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {name} * {holder}.{attr}")
        elif k == 2:
            n = self.fresh("n")
            self.emit(indent, f"setattr({holder}, 'tag', {self.int_expr(env)})")
            self.brk(env, indent)
            self.emit(indent, f"{holder}.tag += 1")
            self.emit(indent, f"{n} = {holder}.tag")
            self.emit(indent, f"{out} = {name} * {n}")
            env.ints.append(n)
        else:
            self.emit(indent, f"obj.last = {name} * 2")
            self.brk(env, indent)
            self.emit(indent, f"{out} = obj.last.sin()")
            self.emit(indent, "del obj.last")
            if self.chance(0.5):
                self.emit(indent, f"LOG.append(hasattr(obj, 'last'))")
        env.tensors[out] = self.tvar(s, True)

    def s_iter_break(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        it = self.fresh("it")
        k = r.randrange(5)
        if k == 0:
            self.emit(indent, f"{it} = gen({name}, {r.randint(2, 4)})")
            self.emit(indent, f"{out} = next({it})")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {out} + next({it})")
            if self.chance(0.5):
                self.emit(indent, f"{out} = {out} + sum({it}, {name} * 0)")
        elif k == 1:
            n = self.fresh("n")
            self.emit(indent, f"{it} = iter(lst)")
            self.emit(indent, f"{n} = next({it}, 0)")
            self.brk(env, indent)
            self.emit(indent, f"{n} = {n} + sum({it})")
            self.emit(indent, f"{out} = {name} * {n}")
            env.ints.append(n)
        elif k == 2:
            p, q = self.fresh("p"), self.fresh("q")
            self.emit(indent, f"{it} = zip(lst, [{name}, {name} * 2, {name} + 1])")
            self.emit(indent, f"{out} = {name} * 0")
            self.emit(indent, f"for {p}, {q} in {it}:")
            self.emit(indent + 1, f"{out} = {out} + {q} * {p}")
            self.emit(indent + 1, "break")
            self.brk(env, indent)
            self.emit(indent, f"for {p}, {q} in {it}:")
            self.emit(indent + 1, f"{out} = {out} - {q}")
        elif k == 3:
            self.emit(indent, f"{it} = ({name} * i for i in range(3))")
            self.emit(indent, f"{out} = next({it})")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {out} + max(len(list({it})), 1)")
        else:
            e = self.fresh("e")
            self.emit(indent, f"{e} = enumerate(d.items(), start={r.randint(0, 2)})")
            self.emit(indent, f"{out} = {name} * 1")
            j = self.fresh("j")
            self.emit(indent, f"for {j}, (key, val) in {e}:")
            self.emit(indent + 1, f"{out} = {out} + {j} * val")
            self.emit(indent + 1, f"if {j} >= 1:")
            self.emit(indent + 2, "break")
            self.brk(env, indent)
            self.emit(indent, f"LOG.append([key for _, (key, val) in {e}])")
        env.tensors[out] = self.tvar(s, True)

    def s_container_break(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        k = r.randrange(4)
        if k == 0:
            tl = self.fresh("tl")
            self.emit(indent, f"{tl} = [{name}]")
            self.brk(env, indent)
            self.emit(indent, f"{tl}.append({tl}[-1] * 2)")
            self.emit(indent, f"{tl}[0] = {tl}[0] + 1")
            self.emit(indent, f"{out} = {tl}.pop() - {tl}[0]")
        elif k == 1:
            self.emit(indent, f"d['w'] = {self.tensor_expr(env, s, 1)}")
            self.brk(env, indent)
            self.emit(indent, f"d['w'] = d['w'] * 2")
            self.emit(indent, f"{out} = d.pop('w') + len(d)")
        elif k == 2:
            ops = ["lst.insert(0, len(d))", "lst.sort(reverse=True)", "lst.reverse()",
                   "del lst[0]", "lst[-1:] = [7, 8]", "d.update(e=len(lst))", "d.pop('b', None)",
                   "lst.remove(lst[0])", "d.setdefault('z', 5)"]
            self.emit(indent, f"if lst:")
            self.emit(indent + 1, r.choice(ops))
            self.brk(env, indent)
            self.emit(indent, f"if lst:")
            self.emit(indent + 1, r.choice(ops))
            self.emit(indent, f"{out} = {name} * (sum(lst) + sum(d.values()))")
        else:
            td = self.fresh("td")
            self.emit(indent, f"{td} = {{'p': {name}}}")
            self.emit(indent, f"{td}['q'] = {td}['p'].cos()")
            self.brk(env, indent)
            self.emit(indent, f"del {td}['p']")
            self.emit(indent, f"{td}['r'] = {name} * 3")
            self.emit(indent, f"{out} = sum({td}.values()) + len({td})")
            if self.chance(0.4) and indent == 1:
                self.extra_returns.append(td)
        env.tensors[out] = self.tvar(s, True)

    def s_try_break(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        self.emit(indent, f"{out} = {name} * 1")
        self.emit(indent, "try:")
        if self.chance(0.6):
            self.brk(env, indent + 1)
        self.emit(indent + 1, f"{out} = {out} + 1")
        k = r.randrange(4)
        if k == 0:
            self.emit(indent + 1, f"{out} = {name}.view(7, 5)")
        elif k == 1:
            self.emit(indent + 1, f"{out} = {name} + torch.ones(9, 9, dtype=torch.float64)")
        elif k == 2:
            self.emit(indent + 1, f"if {self.int_expr(env)} >= {r.randint(0, 4)}:")
            self.emit(indent + 2, f"raise RuntimeError('boom')")
        else:
            self.emit(indent + 1, f"{out} = {out} * [1, 2][{self.int_expr(env)}]")
        if self.chance(0.5):
            self.brk(env, indent + 1)
        self.emit(indent, "except (RuntimeError, IndexError) as e:")
        self.emit(indent + 1, "LOG.append(type(e).__name__)")
        if self.chance(0.4):
            self.brk(env, indent + 1)
        self.emit(indent + 1, f"{out} = {out} - 1")
        if self.chance(0.6):
            self.emit(indent, "finally:")
            self.emit(indent + 1, "LOG.append('fin')")
            if self.chance(0.5):
                self.brk(env, indent + 1)
        env.tensors[out] = self.tvar(s, True)

    def s_closure_break(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        acc, fn = self.fresh("acc"), self.fresh("bump")
        init = f"{name} * 0" if self.chance(0.7) else "0"
        self.emit(indent, f"{acc} = {init}")
        self.emit(indent, f"def {fn}(v):")
        self.emit(indent + 1, f"nonlocal {acc}")
        self.emit(indent + 1, f"{acc} = {acc} + v")
        if self.chance(0.3):
            self.brk(env, indent + 1)
        self.emit(indent + 1, f"return {acc}")
        self.emit(indent, f"{fn}({name})")
        self.brk(env, indent)
        self.emit(indent, f"{fn}({self.tensor_expr(env, s, 1)})")
        if self.chance(0.4):
            self.emit(indent, f"{acc} = {acc} * 2")
            self.emit(indent, f"{fn}(1)")
        self.emit(indent, f"{out} = {acc} + {name}")
        env.tensors[out] = self.tvar(s, True)

    def s_dyn_shape(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        n = self.fresh("n")
        if not s:
            self.emit(indent, f"{n} = {name}.numel() + {name}.dim()")
            self.emit(indent, f"{out} = {name} * torch.ones({n}, dtype=torch.float64).sum()")
            env.tensors[out] = self.tvar(s, True)
            env.ints.append(n)
            return
        self.emit(indent, f"{n} = {r.choice([f'{name}.shape[0]', f'{name}.size(0)', f'len({name})'])}")
        env.ints.append(n)
        if self.chance(0.3):
            self.brk(env, indent)
        rest = s[1:]
        numel_rest = 1
        for v in rest:
            numel_rest *= v
        k = r.randrange(8)
        if k == 0:
            self.emit(indent, f"{out} = {name}.reshape({n}, -1).reshape({name}.shape) * 2")
            shape = s
        elif k == 1:
            self.emit(indent, f"{out} = {name}.view({n} * {numel_rest})")
            shape = (s[0] * numel_rest,)
            env.tensors[out] = self.tvar(shape, env.tensors[name].contig)   # (eager raises if not)
            return
        elif k == 2:
            self.emit(indent, f"{out} = {name}.narrow(0, {n} // 2, {n} - {n} // 2)")
            shape = (s[0] - s[0] // 2,) + rest
        elif k == 3:
            self.emit(indent, f"{out} = {name}[: {n} - 1] if {n} > 1 else {name}")
            shape = (max(s[0] - 1, 1),) + rest
        elif k == 4:
            self.emit(indent, f"{out} = torch.cat([{name}, {name}.new_zeros(({n} + 1,) + tuple({name}.shape[1:]))])")
            shape = (2 * s[0] + 1,) + rest
        elif k == 5:
            self.emit(indent, f"{out} = {name} * torch.arange({n}, dtype=torch.float64).reshape(({n},) + (1,) * ({name}.dim() - 1))")
            shape = s
        elif k == 6:
            a = self.fresh("t")
            self.emit(indent, f"{a}, *_ = {name}.split(max({n} // 2, 1))")
            self.emit(indent, f"{out} = {a}.sum(0) + {name}[{n} - 1]")
            shape = rest
        else:
            self.emit(indent, f"{out} = {name}.expand({n} % 2 + 1, *{name}.shape).sum(0) / ({n} % 2 + 1)")
            shape = s
        env.tensors[out] = self.tvar(shape, True)
