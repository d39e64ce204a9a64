"""A third set of fuzz constructs (gen.py), on by default (``generate(..., extras3=False)`` gives
the programs of the generator before them): global state and objects that change what torch does,
around graph breaks.

* a ``torch.Tensor`` subclass with a ``__torch_function__`` that logs some calls (``Tagged``), and a
  non-tensor object with ``__torch_function__`` (``Scaled``), flowing through the program;
* views of the inputs written in place, then a break, then the base read (and the reverse);
* ``torch.autocast("cpu", dtype=torch.bfloat16)`` regions around breaks, nested, left by an
  exception;
* ``no_grad`` / ``enable_grad`` / ``inference_mode`` / ``set_grad_enabled`` around breaks and
  exceptions, and decorated helpers with a break inside;
* ``requires_grad_`` toggled inside, ``torch.autograd.grad`` inside;
* module buffers written across a break and read after it (``MOD.buf``, a ``BatchNorm1d``'s running
  statistics, its training flag flipped across a break);
* random ops after ``torch.manual_seed`` inside the program, RNG state saved and restored, a
  ``torch.Generator``;
* ``out=`` into an empty tensor (resized) and into a view of a fresh buffer, across a break;
* Python floats and ints computed from sizes (``numel``, ``shape``, ``math``) fed back into ops.

A break (``brk``, gen_extra2.py) is a print, a disabled call, ``.item()`` or a tensor branch. Each
method consumes the generator's random stream only when chosen.
"""
from __future__ import annotations

EXTRA3_PRELUDE = '''

import math


class Tagged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("add", "__add__", "mul", "__mul__"):
            LOG.append("tf:" + func.__name__)
        return super().__torch_function__(func, types, args, kwargs or {})


class Scaled:
    """Not a tensor: any torch function sees it as ``t * k``."""
    def __init__(self, t, k):
        self.t = t
        self.k = k

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LOG.append("scaled")
        def unwrap(a):
            return a.t * a.k if isinstance(a, Scaled) else a
        return func(*[unwrap(a) for a in args], **{k: unwrap(v) for k, v in (kwargs or {}).items()})


BN = torch.nn.BatchNorm1d(4, dtype=torch.float64)


@torch.no_grad()
def ng_helper(t):
    u = t * 2
    print("ng", tuple(u.shape), u.requires_grad, file=SINK)
    return u + 1


@torch.enable_grad()
def eg_helper(t):
    u = t * 3
    print("eg", u.requires_grad, file=SINK)
    return u - 1
'''

EXTRA3_KINDS = [("subclass", 3), ("view_write_break", 3), ("autocast", 3), ("grad_ctx", 3),
                ("rg_toggle", 2), ("buffer_break", 3), ("random", 3), ("out_break", 2),
                ("size_scalar", 3)]


class Extra3Statements:
    """Mixed into gen.ProgramGenerator: same helpers (``emit``, ``fresh``, ``brk``, ...)."""

    def _pick(self, env):
        name = self.rng.choice(sorted(env.tensors))
        return name, env.tensors[name].shape

    def s_subclass(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out = self.fresh("t")
        k = r.randrange(5)
        if k == 0:
            a = self.fresh("sc")
            self.emit(indent, f"{a} = {name}.as_subclass(Tagged)")
            self.emit(indent, f"{out} = ({a} * 2 + {self.tensor_expr(env, s, 1)}).sin()")
            if self.chance(0.6):
                self.brk(env, indent)
            self.emit(indent, f"{out} = {out} + {a}")
            if self.chance(0.5):
                self.emit(indent, f"LOG.append((type({out}).__name__, isinstance({a}, Tagged)))")
            if self.chance(0.5):
                self.emit(indent, f"{out} = {out}.as_subclass(torch.Tensor)")
        elif k == 1:
            self.emit(indent, f"{out} = torch.add(Scaled({name}, {self.scalar_expr(env)}), {self.tensor_expr(env, s, 1)})")
            if self.chance(0.5):
                self.brk(env, indent)
                self.emit(indent, f"{out} = torch.mul({out}, Scaled({name}, 2))")
        elif k == 2:
            a = self.fresh("sc")
            self.emit(indent, f"{a} = {name}.as_subclass(Tagged)")
            self.emit(indent, f"{out} = opaque({a}) + 1")
            self.emit(indent, f"LOG.append(type({out}).__name__)")
        elif k == 3:
            # a subclass value kept in a container across a break
            a = self.fresh("sc")
            self.emit(indent, f"{a} = [{name}.as_subclass(Tagged) * 1]")
            self.brk(env, indent)
            self.emit(indent, f"{out} = ({a}[0] + {name}).as_subclass(torch.Tensor)")
        else:
            a = self.fresh("sc")
            self.emit(indent, f"{a} = torch.cat([{name}.as_subclass(Tagged), {name}]).sum(0)")
            self.emit(indent, f"{out} = {name} * 0 + {a}")
        env.tensors[out] = self.tvar(s, True)

    def s_view_write_break(self, env, indent, depth):
        r = self.rng
        inputs = [n for n in ("x", "y") if n in env.tensors]
        src = r.choice(inputs) if inputs and self.chance(0.8) else r.choice(sorted(env.tensors))
        got = self.view_of(env, src)
        if got is None:
            return
        expr, shape, _ = got
        v, out = self.fresh("v"), self.fresh("t")
        s = env.tensors[src].shape
        self.emit(indent, f"{v} = {expr}")
        op = r.choice(["mul_(2)", "add_(1.5)", "zero_()", "clamp_(max=0.5)", "neg_()",
                       f"copy_({v} * 0 + {self.scalar_expr(env)})"])
        self.emit(indent, f"{v}.{op}")
        self.brk(env, indent)
        if self.chance(0.5):
            self.emit(indent, f"{out} = {src} * 2")
        else:
            self.emit(indent, f"{out} = {src}.sum() + {src}")
        if self.chance(0.5):
            # the other way: the base written after the break, the view read
            self.emit(indent, f"{src}.add_(1)")
            if self.chance(0.5):
                self.brk(env, indent)
            self.emit(indent, f"{out} = {out} + {v}.sum()")
        env.tensors[out] = self.tvar(s, True)

    def s_autocast(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        a, out = self.fresh("ac"), self.fresh("t")
        mm = r.choice([f"torch.mm({name}.reshape(-1, 1), {name}.reshape(1, -1))",
                       f"torch.matmul({name}.reshape(-1, 1), {name}.reshape(1, -1))",
                       f"({name}.reshape(-1, 1) @ {name}.reshape(1, -1))"])
        k = r.randrange(4)
        self.emit(indent, f"{out} = {name} * 1")
        if k == 3:
            self.emit(indent, "try:")
            indent += 1
        self.emit(indent, "with torch.autocast('cpu', dtype=torch.bfloat16):")
        self.emit(indent + 1, f"{a} = {mm}")
        self.emit(indent + 1, f"LOG.append(({a}.dtype, torch.is_autocast_enabled('cpu')))")
        if self.chance(0.7):
            self.brk(env, indent + 1)
        if k == 1:
            self.emit(indent + 1, "with torch.autocast('cpu', enabled=False):")
            self.emit(indent + 2, f"{a} = {a}.double() + {mm}")
            if self.chance(0.5):
                self.brk(env, indent + 2)
        self.emit(indent + 1, f"{out} = {out} + {a}.sum(1).reshape({name}.shape)")
        if k == 2:
            self.brk(env, indent + 1)
            self.emit(indent + 1, f"{out} = torch.mm({out}.reshape(1, -1), {out}.reshape(-1, 1)).sum() + {out}")
        if k == 3:
            self.emit(indent + 1, f"if {self.int_expr(env)} >= {r.randint(0, 3)}:")
            self.emit(indent + 2, "raise KeyError('in autocast')")
            indent -= 1
            self.emit(indent, "except KeyError as e:")
            self.emit(indent + 1, "LOG.append(('caught', torch.is_autocast_enabled('cpu')))")
        self.emit(indent, f"{out} = {out}.to(torch.float64)")
        env.tensors[out] = self.tvar(s, True)

    def s_grad_ctx(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        a, out = self.fresh("g"), self.fresh("t")
        k = r.randrange(6)
        if k == 0:
            self.emit(indent, "with torch.no_grad():")
            self.emit(indent + 1, f"{a} = {name} * 2")
            self.brk(env, indent + 1)
            self.emit(indent + 1, "with torch.enable_grad():")
            self.emit(indent + 2, f"{out} = {a} + {name}")
            if self.chance(0.5):
                self.brk(env, indent + 2)
            self.emit(indent + 1, f"LOG.append(({a}.requires_grad, {out}.requires_grad))")
        elif k == 1:
            exc = r.choice(["ValueError", "ZeroDivisionError"])
            self.emit(indent, f"{out} = {name} * 1")
            self.emit(indent, "try:")
            self.emit(indent + 1, "with torch.no_grad():")
            self.emit(indent + 2, f"{out} = {out} * 2")
            if self.chance(0.7):
                self.brk(env, indent + 2)
            if exc == "ValueError":
                self.emit(indent + 2, f"if {self.int_expr(env)} >= {r.randint(0, 3)}:")
                self.emit(indent + 3, "raise ValueError('in no_grad')")
            else:
                self.emit(indent + 2, f"LOG.append(1 // ({self.int_expr(env)} * 0))")
            self.emit(indent, f"except {exc}:")
            self.emit(indent + 1, "LOG.append(('caught', torch.is_grad_enabled()))")
            self.emit(indent + 1, f"{out} = {out} + {name}")
        elif k == 2:
            self.emit(indent, "with torch.inference_mode():")
            self.emit(indent + 1, f"{a} = {name} * 2")
            if self.chance(0.7):
                self.brk(env, indent + 1)
            self.emit(indent + 1, f"LOG.append(({a}.is_inference(), torch.is_inference_mode_enabled()))")
            self.emit(indent, f"{out} = {a}.clone() + {name}")
        elif k == 3:
            self.emit(indent, f"{out} = {r.choice(['ng_helper', 'eg_helper'])}({name})")
            if self.chance(0.5):
                self.emit(indent, "with torch.no_grad():")
                self.emit(indent + 1, f"{out} = {out} + eg_helper({name})")
        elif k == 4:
            p = self.fresh("prev")
            self.emit(indent, f"{p} = torch.is_grad_enabled()")
            self.emit(indent, "torch.set_grad_enabled(False)")
            self.emit(indent, f"{a} = {name} * 2")
            self.brk(env, indent)
            self.emit(indent, f"torch.set_grad_enabled({p})")
            self.emit(indent, f"{out} = {a} + {name}")
        else:
            self.emit(indent, f"with torch.set_grad_enabled({self.int_expr(env)} % 2 == 0):")
            self.emit(indent + 1, f"{out} = {name} * 3")
            if self.chance(0.7):
                self.brk(env, indent + 1)
            self.emit(indent + 1, f"LOG.append({out}.requires_grad)")
        env.tensors[out] = self.tvar(s, True)

    def s_rg_toggle(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        a, out = self.fresh("leaf"), self.fresh("t")
        k = r.randrange(3)
        if k == 0:
            self.emit(indent, f"{a} = {name}.detach().clone()")
            self.emit(indent, f"{a}.requires_grad_()")
            self.emit(indent, f"{out} = {a} * {name}")
            if self.chance(0.6):
                self.brk(env, indent)
            self.emit(indent, f"LOG.append(({out}.requires_grad, {a}.is_leaf))")
            self.emit(indent, f"{a}.requires_grad_(False)")
            self.emit(indent, f"{out} = {out} + {a}")
        elif k == 1:
            self.emit(indent, f"{out} = {name} * 1")
            self.emit(indent, "try:")
            self.emit(indent + 1, f"{out}.requires_grad_({r.choice(['False', 'True'])})")
            self.emit(indent, "except RuntimeError as e:")
            self.emit(indent + 1, "LOG.append('rg')")
            self.emit(indent, f"LOG.append({out}.requires_grad)")
        else:
            g = self.fresh("gr")
            self.emit(indent, f"{a} = {name}.detach().requires_grad_(True)")
            self.emit(indent, f"{out} = ({a} * {a}).sum()")
            if self.chance(0.5):
                self.brk(env, indent)
            self.emit(indent, f"{g}, = torch.autograd.grad({out}, {a})")
            self.emit(indent, f"{out} = {name} + {g}")
        env.tensors[out] = self.tvar(s, True)

    def s_buffer_break(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        out = self.fresh("t")
        k = r.randrange(4)
        if k == 0:
            self.emit(indent, f"MOD.buf.{r.choice(['add_', 'sub_'])}({name}.sum())")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {name} * MOD.buf.sum()")
        elif k == 1:
            self.emit(indent, f"MOD.buf = MOD.buf + {name}.mean()")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {name} + MOD.buf.mean() + MOD({name}).sum()")
        elif k == 2:
            b = self.fresh("bn")
            self.emit(indent, f"{b} = BN({name}.sum() * torch.arange(8, dtype=torch.float64).reshape(2, 4) + {name}.mean())")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {name} * 0 + (BN.running_mean.sum() + {b}.sum())")
            self.emit(indent, "LOG.append(int(BN.num_batches_tracked))")
        else:
            b = self.fresh("bn")
            self.emit(indent, "BN.train(False)")
            self.brk(env, indent)
            self.emit(indent, f"{b} = BN(torch.ones(3, 4, dtype=torch.float64) * {name}.sum())")
            self.emit(indent, "BN.train(True)")
            self.emit(indent, f"{out} = {name} * 0 + {b}.sum() + BN.running_var.sum()")
        env.tensors[out] = self.tvar(s, True)

    def s_random(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        a, out = self.fresh("rn"), self.fresh("t")
        ops = [f"torch.rand_like({name})", f"torch.randn_like({name})",
               f"torch.nn.functional.dropout({name}, 0.5, training=True)",
               f"torch.bernoulli(torch.full_like({name}, 0.5))",
               f"torch.randint(0, 5, {name}.shape).to(torch.float64)",
               f"torch.rand({name}.shape, dtype=torch.float64)"]
        k = r.randrange(3)
        if k == 0:
            self.emit(indent, f"torch.manual_seed({r.randint(0, 9)})")
            self.emit(indent, f"{a} = {r.choice(ops)}")
            if self.chance(0.6):
                self.brk(env, indent)
            self.emit(indent, f"{out} = {a} + {r.choice(ops)}")
        elif k == 1:
            st = self.fresh("st")
            self.emit(indent, f"torch.manual_seed({r.randint(0, 9)})")
            self.emit(indent, f"{st} = torch.get_rng_state()")
            self.emit(indent, f"{a} = {r.choice(ops)}")
            self.brk(env, indent)
            self.emit(indent, f"torch.set_rng_state({st})")
            self.emit(indent, f"{out} = {a} - torch.rand_like({name})")
        else:
            g = self.fresh("gen")
            self.emit(indent, f"{g} = torch.Generator().manual_seed({r.randint(0, 9)})")
            self.emit(indent, f"{a} = torch.rand({name}.shape, generator={g}, dtype=torch.float64)")
            if self.chance(0.6):
                self.brk(env, indent)
            self.emit(indent, f"{out} = {a} * torch.rand({name}.shape, generator={g}, dtype=torch.float64) + {name}")
        env.tensors[out] = self.tvar(s, True)

    def s_out_break(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        o, out = self.fresh("o"), self.fresh("t")
        if self.chance(0.5):
            self.emit(indent, f"{o} = torch.empty(0, dtype=torch.float64)")
            self.emit(indent, f"torch.{r.choice(['sin', 'cos', 'tanh', 'exp'])}({name}, out={o})")
            self.brk(env, indent)
            self.emit(indent, f"torch.add({o}, {self.tensor_expr(env, s, 1)}, out={o})")
            self.emit(indent, f"{out} = {o}")
        else:
            self.emit(indent, f"{o} = {name}.new_zeros((2,) + tuple({name}.shape))")
            self.emit(indent, f"torch.mul({name}, {self.scalar_expr(env)}, out={o}[{r.randrange(2)}])")
            self.brk(env, indent)
            self.emit(indent, f"{out} = {o}.sum(0) + {o}[1]")
        env.tensors[out] = self.tvar(s, True)

    def s_size_scalar(self, env, indent, depth):
        r = self.rng
        name, s = self._pick(env)
        f, out = self.fresh("fs"), self.fresh("t")
        dim0 = f"{name}.shape[0]" if s else "1"
        self.emit(indent, f"{f} = " + r.choice([
            f"{name}.numel() / {r.randint(2, 7)}", f"math.sqrt({name}.numel())",
            f"{dim0} * 0.5 + {name}.dim()", f"float({name}.numel()) ** 0.5",
            f"{name}.numel() // 2 + 0.25", f"round({name}.numel() / 3, 2)"]))
        if self.chance(0.3):
            self.brk(env, indent)
        use = r.randrange(6)
        if use == 0:
            self.emit(indent, f"{out} = {name} * {f} + {f}")
        elif use == 1:
            self.emit(indent, f"{out} = torch.full_like({name}, {f}) - {name}")
        elif use == 2:
            self.emit(indent, f"{out} = {name}.clamp(max={f} / 4)")
        elif use == 3:
            self.emit(indent, f"{out} = {name} + torch.arange(int({f}) + 1, dtype=torch.float64).sum()")
        elif use == 4:
            self.emit(indent, f"{out} = {name} * math.floor({f}) - math.ceil({f} / 3)")
        else:
            self.emit(indent, f"if {f} > {r.choice([1.0, 2.5, 4.0])}:")
            self.emit(indent + 1, f"{out} = {name} * 2")
            self.emit(indent, "else:")
            self.emit(indent + 1, f"{out} = {name} - 1")
        if self.chance(0.3):
            n = self.fresh("n")
            self.emit(indent, f"{n} = int({f})")
            env.ints.append(n)
        env.tensors[out] = self.tvar(s, True)
