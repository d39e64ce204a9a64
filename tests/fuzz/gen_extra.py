"""More constructs for the fuzz generator (gen.py), on by default (``generate(..., extras=False)``
gives the programs of the generator before them, for tests that pin a seed's text).

What the first generator rarely or never made:

* chains of views of the inputs written in place through one alias and read through another;
* ``out=`` variants writing into a fresh buffer, an existing tensor, or a view of an input;
* ``requires_grad`` mixes: ``detach()`` aliases written in place, in-place writes under
  ``torch.no_grad()``, a fresh leaf by ``detach().clone().requires_grad_()``, ``requires_grad``
  read as a Python bool, ``torch.enable_grad`` inside ``no_grad``; and inputs whose
  ``requires_grad`` differ (``INPUT_MODE``, read by harness.make_inputs);
* an ``nn.Module`` global (``MOD``): attributes set on it (tensors, ints), its buffer mutated, its
  parameter used (its gradient is compared too);
* Python containers of tensors kept on ``obj`` and in ``d``, mutated through the container, and
  returned;
* in-place metadata changes (``t_()``, ``unsqueeze_``/``squeeze_``) undone before the name is used
  again;
* exceptions raised after a mutation and caught, re-raised as another type, and ``assert`` on a
  tensor.

Each method consumes the generator's random stream only when it is chosen, so the old kinds
keep their texts for a seed only with ``extras=False``.
"""
from __future__ import annotations

EXTRA_PRELUDE = '''

class Mod(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64))
        self.register_buffer("buf", torch.zeros(3, dtype=torch.float64))
        self.count = 0

    def forward(self, t):
        self.count += 1
        return t * self.w.sum() + self.buf.mean()


MOD = Mod()
'''

# INPUT_MODE (grad runs only, harness.make_inputs): 0 both inputs non-leaf views of leaves that
# require grad; 1 y does not require grad; 2 x a leaf that requires grad (in-place on it raises in
# eager); 3 x does not require grad, y does.
INPUT_MODES = (0, 1, 2, 3)

EXTRA_KINDS = [("alias_chain", 4), ("out_variant", 3), ("grad_mix", 4), ("module", 3),
               ("container", 3), ("meta_inplace", 2), ("exc_extra", 2)]


class ExtraStatements:
    """Mixed into gen.ProgramGenerator: same helpers (``emit``, ``fresh``, ``view_of``, ...)."""

    def s_alias_chain(self, env, indent, depth):
        r = self.rng
        inputs = [n for n in ("x", "y") if n in env.tensors]   # (a helper's body has only `a`)
        src = r.choice(inputs if inputs and r.random() < 0.7 else sorted(env.tensors))
        got = self.view_of(env, src)
        if got is None:
            return self.s_view(env, indent, depth)
        e1, s1, c1 = got
        a1 = self.fresh("v")
        self.emit(indent, f"{a1} = {e1}")
        env.tensors[a1] = self.tvar(s1, c1)
        last = a1
        if self.chance(0.6):
            got2 = self.view_of(env, a1)
            if got2 is not None:
                e2, s2, c2 = got2
                a2 = self.fresh("v")
                self.emit(indent, f"{a2} = {e2}")
                env.tensors[a2] = self.tvar(s2, c2)
                last = a2
        s = env.tensors[last].shape
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"{last}.mul_({self.scalar_expr(env)})")
        elif k == 1:
            self.emit(indent, f"{last}.add_({self.tensor_expr(env, s, 1)})")
        elif k == 2 and s:
            self.emit(indent, f"{last}[0] = {self.scalar_expr(env)}")
        else:
            self.emit(indent, f"{last}.copy_({self.tensor_expr(env, s, 1)})")
        out = self.fresh("t")
        reader = r.choice([src, a1])
        self.emit(indent, f"{out} = {reader} * 1")
        env.tensors[out] = self.tvar(env.tensors[reader].shape, True)

    def s_out_variant(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        other = self.tensor_expr(env, s, 1)
        fn = r.choice(["torch.add", "torch.mul", "torch.sub", "torch.maximum"])
        k = r.randrange(3)
        if k == 0:
            buf = self.fresh("t")
            self.emit(indent, f"{buf} = torch.empty({s!r}, dtype=torch.float64)")
            env.tensors[buf] = self.tvar(s, True)
        elif k == 1:
            buf = self.pick_tensor(env, s) or name
        else:
            # the target is a view of an input (or anything with that shape): a mutation of it
            buf = self.pick_tensor(env, s, contig=False) or self.pick_tensor(env, s) or name
        if self.chance(0.6):
            # (out= into or from tensors that require grad raises with grad on)
            self.emit(indent, "with torch.no_grad():")
            self.emit(indent + 1, f"{fn}({name}, {other}, out={buf})")
        else:
            self.emit(indent, f"{fn}({name}.detach(), ({other}).detach(), out={buf})")
        if self.chance(0.5):
            out = self.fresh("t")
            self.emit(indent, f"{out} = {buf} + 0")
            env.tensors[out] = self.tvar(s, True)

    def s_grad_mix(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        k = r.randrange(6)
        if k == 0:
            # a detach() alias written in place: the original sees the new values
            dt = self.fresh("dt")
            self.emit(indent, f"{dt} = {name}.detach()")
            self.emit(indent, f"{dt}.mul_({self.scalar_expr(env)})")
            self.emit(indent, f"{out} = {name} + {dt}")
        elif k == 1:
            self.emit(indent, "with torch.no_grad():")
            self.emit(indent + 1, f"{name}.add_({self.scalar_expr(env)})")
            self.emit(indent, f"{out} = {name} * 2")
        elif k == 2:
            lf = self.fresh("lf")
            self.emit(indent, f"{lf} = {name}.detach().clone().requires_grad_()")
            self.emit(indent, f"{out} = ({lf} * {self.tensor_expr(env, s, 1)}).sin()")
            if self.chance(0.5):
                self.emit(indent, f"LOG.append(({lf}.is_leaf, {lf}.requires_grad, {out}.requires_grad))")
        elif k == 3:
            self.emit(indent, f"if {name}.requires_grad:")
            self.emit(indent + 1, f"{out} = {name} * 3")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{out} = {name} - 1")
        elif k == 4:
            self.emit(indent, "with torch.no_grad():")
            self.emit(indent + 1, f"{out} = {name} * 2")
            self.emit(indent + 1, "with torch.enable_grad():")
            self.emit(indent + 2, f"{out} = {out} + {name}")
        else:
            self.emit(indent, f"{out} = {name}.detach() * {name}")
            self.emit(indent, f"LOG.append(({name}.requires_grad, {out}.requires_grad, {name}.is_leaf))")
        env.tensors[out] = self.tvar(s, True)

    def s_module(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        k = r.randrange(5)
        if k == 0:
            out = self.fresh("t")
            self.emit(indent, f"{out} = MOD({name})")
            env.tensors[out] = self.tvar(s, True)
        elif k == 1:
            self.emit(indent, f"MOD.cache = {self.tensor_expr(env, s, 1)}")
            if self.chance(0.5):
                out = self.fresh("t")
                self.emit(indent, f"{out} = MOD.cache * 2")
                env.tensors[out] = self.tvar(s, True)
        elif k == 2:
            self.emit(indent, f"MOD.buf.add_({name}.detach().sum())")
        elif k == 3:
            self.emit(indent, f"MOD.count += {self.int_expr(env)}")
            n = self.fresh("n")
            self.emit(indent, f"{n} = MOD.count")
            env.ints.append(n)
        else:
            out = self.fresh("t")
            self.emit(indent, f"{out} = {name} * MOD.w[{r.randrange(3)}] + MOD.count")
            env.tensors[out] = self.tvar(s, True)

    def s_container(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"obj.stash = [{name}, {self.tensor_expr(env, s, 1)}]")
            self.emit(indent, f"obj.stash[{r.randrange(2)}].mul_({self.scalar_expr(env)})")
        elif k == 1:
            self.emit(indent, f"obj.bag = {{'k': {name}}}")
            self.emit(indent, f"obj.bag['k'] = obj.bag['k'] + 1")
        elif k == 2:
            self.emit(indent, f"d['t'] = {self.tensor_expr(env, s, 1)}")
            out = self.fresh("t")
            self.emit(indent, f"{out} = d.pop('t') * 2")
            env.tensors[out] = self.tvar(s, True)
        else:
            tl = self.fresh("tl")
            self.emit(indent, f"{tl} = [{name}, {name}[0]] if {name}.dim() else [{name}]")
            self.emit(indent, f"{tl}[-1].add_(1)")
            if indent == 1:   # names made inside a block are not returned (maybe unbound)
                self.extra_returns.append(tl)

    def s_meta_inplace(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        if len(s) == 2 and self.chance(0.6):
            self.emit(indent, f"{name}.t_()")
            self.emit(indent, f"{out} = ({name} * 2).t()")
            self.emit(indent, f"{name}.t_()")
        else:
            self.emit(indent, f"{name}.unsqueeze_(0)")
            self.emit(indent, f"{out} = {name}.sum(0) + 1")
            self.emit(indent, f"{name}.squeeze_(0)")
        env.tensors[out] = self.tvar(s, True)

    def s_exc_extra(self, env, indent, depth):
        r = self.rng
        name = r.choice(sorted(env.tensors))
        s = env.tensors[name].shape
        out = self.fresh("t")
        k = r.randrange(3)
        if k == 0:
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{name}.add_(1)")
            self.emit(indent + 1, f"if {self.int_expr(env)} >= {r.randint(0, 3)}:")
            self.emit(indent + 2, f"raise ValueError({name}.shape[0] if {name}.dim() else 0)")
            self.emit(indent + 1, f"{out} = {name} * 2")
            self.emit(indent, "except ValueError as e:")
            self.emit(indent + 1, f"{out} = {name} * len(e.args)")
        elif k == 1:
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{out} = {name} * {{'a': 2}}[{r.choice(['a', 'q'])!r}]")
            self.emit(indent, "except KeyError as e:")
            self.emit(indent + 1, "LOG.append('key')")
            if self.chance(0.15):
                self.emit(indent + 1, "raise RuntimeError('wrapped') from e")
            self.emit(indent + 1, f"{out} = {name} + 0")
        else:
            self.emit(indent, f"assert ({name} > {r.choice([-100, -100, -100, 0])}).all(), 'not positive'")
            self.emit(indent, f"{out} = {name} * 1")
        env.tensors[out] = self.tvar(s, True)
