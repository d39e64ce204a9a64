"""Inputs that alias each other: deduplication and synthetic bases.

Whether two inputs share memory is a property of the *call*, not of the
graph, so the compiled graph is chosen per call by an *aliasing layout*
(``InputLayout``), computed from the actual arguments:

* the same tensor object passed twice (``f(x, x)``) is **deduplicated**: the
  compiled graph takes it once and the wrapper passes it in both positions;
* distinct tensors sharing a storage where one of them has its *data* mutated
  by the graph (``f(x, x.view(-1))`` with ``x.add_(1)``) are merged into one
  **synthetic base**: the graph takes the base instead and regenerates every
  alias inside itself with ``as_strided`` (so functionalization sees that a
  write through one alias is visible through the others); the epilogue then
  copies the updated base back, which leaves every alias with eager's values.

The base is the aliases' common autograd ``_base`` (so gradients flow through
it exactly as through the views in eager), or, when no alias requires grad
before or after the graph, a fresh 1-D tensor over the whole storage. Aliases that share a storage but
require grad through *different* bases, aliases of different dtypes, and a
metadata mutation (``t_``) of an input that is also part of a synthetic base
raise ``UnsupportedAliasedMutation``.

Aliasing among inputs that are never mutated needs nothing: reading shared
memory through a functional graph is correct as is.

Example::

    def f(a, b):          # called as f(x, x[0])
        a.mul_(2)
        return b + 1

    # layout: a -> base 0 (x itself), b -> as_strided(base 0, (n,), (1,), 0)
    # compiled: g(base) = { a = base; b = base.as_strided(...); a.mul_(2); return b + 1 }
    #           returns [updated base, out]; the epilogue does x.copy_(updated base)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from ember.aot.errors import UnsupportedAliasedMutation
from ember.compat import fake_from_real


def storage_id(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


@dataclass(frozen=True)
class InputLayout:
    """How the inner (compiled) calling convention is built from the outer arguments.

    ``slots[i]`` says where outer argument ``i`` comes from inside the graph:
    ``("arg", j)`` inner argument ``j``; ``("dup", k)`` the same object as outer
    argument ``k < i``; ``("base", b)`` synthetic base ``b`` itself;
    ``("view", b, size, stride, offset, grad)`` regenerated from synthetic base ``b``, with grad
    mode ``grad`` (None: the mode the graph is entered in; True/False: the view requires grad, or
    not while its base does: it was made with grad mode on, or off, before the call).
    ``kept`` lists the outer indices passed through (inner arguments
    ``0..len(kept)-1``); the synthetic bases follow them. ``bases[b]`` is
    ``("autograd_base", i)`` (outer argument ``i``'s ``_base``, or the argument
    itself when it has none) or ``("storage", i)`` (a 1-D tensor over argument
    ``i``'s storage).
    """

    slots: tuple
    kept: tuple
    bases: tuple

    @property
    def num_inner(self) -> int:
        return len(self.kept) + len(self.bases)

    def regenerated(self) -> list[int]:
        return [i for i, s in enumerate(self.slots) if s[0] in ("base", "view")]

    def inner_args(self, args: list) -> list:
        inner = [args[i] for i in self.kept]
        for kind, i in self.bases:
            inner.append(make_base(args[i], kind))
        return inner

    def outer_from_inner(self, inner: list) -> list:
        """Rebuild the outer arguments inside the graph (aliases regenerated from their base)."""
        n_kept = len(self.kept)
        full: list = [None] * len(self.slots)
        for i, s in enumerate(self.slots):
            kind = s[0]
            if kind == "arg":
                full[i] = inner[s[1]]
            elif kind == "dup":
                full[i] = full[s[1]]
            elif kind == "base":
                full[i] = inner[n_kept + s[1]]
            elif s[5] is None or s[5] == torch.is_grad_enabled():
                full[i] = inner[n_kept + s[1]].as_strided(s[2], s[3], s[4])
            else:
                # (a graph entered with grad mode off, inside a no_grad block the frame leaves later:
                # a view its caller made with grad on must be one here too, or an in-place write into
                # its base with grad on would be refused as a write into a no_grad view)
                with torch.set_grad_enabled(s[5]):
                    full[i] = inner[n_kept + s[1]].as_strided(s[2], s[3], s[4])
        return full


def make_base(t: torch.Tensor, kind: str) -> torch.Tensor:
    if kind == "autograd_base":
        return t._base if t._base is not None else t
    with torch.no_grad():
        base = torch.empty((0,), dtype=t.dtype, device=t.device)
        base.set_(t.untyped_storage())
    return base


def _meta(t: torch.Tensor) -> tuple:
    return (tuple(t.size()), tuple(t.stride()), t.storage_offset())


def compute_layout(args: list, data_mutated: frozenset, mutated: frozenset, *, training: bool,
                   gains_grad: frozenset = frozenset()):
    """The aliasing layout of one call, or ``None`` when the plain graph is right.

    ``data_mutated`` / ``mutated``: outer indices the graph mutates (data / data
    or metadata); ``gains_grad``: those that require grad after the graph (a value
    that requires grad written into them). Returns ``(key, layout)``; ``key`` is hashable and equal for
    calls that can share one compiled graph.
    """
    ids = {}
    collide = False
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            sid = storage_id(a)
            if sid in ids:
                ids[sid].append(i)
                collide = True
            else:
                ids[sid] = [i]
    if not collide:
        return None, None

    slots: list = [("arg", None)] * len(args)
    dup_of: dict[int, int] = {}
    groups: list[list[int]] = []
    for idxs in ids.values():
        if len(idxs) == 1:
            continue
        uniq: list[int] = []
        for i in idxs:
            rep = next((u for u in uniq if args[u] is args[i]), None)
            if rep is None:
                uniq.append(i)
            else:
                dup_of[i] = rep
        members = idxs  # with duplicates: a duplicate's mutation counts for its representative
        if len(uniq) > 1 and any(i in data_mutated for i in members):
            groups.append(uniq)
    if not dup_of and not groups:
        return None, None  # shared storages, but no data mutation among them: the plain graph is right

    in_group = {}
    bases = []
    key_groups = []
    for g in groups:
        tensors = [args[i] for i in g]
        dtypes = {t.dtype for t in tensors}
        if len(dtypes) > 1 or any(t._base is not None and t._base.dtype != t.dtype for t in tensors):
            raise UnsupportedAliasedMutation(
                f"inputs {g} share storage, one of them is mutated, and they have different dtypes; "
                "ember cannot regenerate views across dtypes")
        if any(i in mutated and i not in data_mutated for i in g) or any(
                dup_of.get(j) in g and j in mutated and j not in data_mutated for j in dup_of):
            raise UnsupportedAliasedMutation(
                f"inputs {g} share storage and one of them has its data mutated while another has its "
                "metadata mutated (t_, transpose_, ...); not supported")
        if any(i in data_mutated and torch._debug_has_internal_overlap(args[i]) == 1 for i in g):
            raise UnsupportedAliasedMutation(
                f"inputs {g} share storage and a mutated one overlaps itself (an expand()ed view); "
                "ember cannot write it back through a synthetic base")
        needs_grad = training and any(t.requires_grad for t in tensors)
        roots = {id(t._base if t._base is not None else t) for t in tensors}
        if training and not needs_grad and any(i in gains_grad for i in g):
            # none requires grad yet, but the program writes a value that does into one of them
            # (``t[2] = y``): in eager the aliases then take part in autograd through their
            # common base, so the base must be that one, not a fresh tensor over the storage
            if len(roots) > 1:
                raise UnsupportedAliasedMutation(
                    f"inputs {g} share storage, one of them is written a value that requires grad, and "
                    "they are not views of one common base; ember cannot give them one synthetic base")
            needs_grad = True
        if needs_grad:
            if len(roots) > 1:
                raise UnsupportedAliasedMutation(
                    f"inputs {g} share storage, one of them is mutated, and they require grad but are not "
                    "views of one common base; ember cannot give them one synthetic base")
            base_t = tensors[0]._base if tensors[0]._base is not None else tensors[0]
            kind = "autograd_base"
        else:
            base_t = make_base(tensors[0], "storage")
            kind = "storage"
        b = len(bases)
        bases.append((kind, g[0]))
        for i in g:
            t = args[i]
            if t is base_t:
                slots[i] = ("base", b)
            else:
                grad = True if t.requires_grad else (False if base_t.requires_grad else None)
                slots[i] = ("view", b) + _meta(t) + (grad,)
            in_group[i] = b
        key_groups.append((kind, tuple(g), _meta(base_t), str(base_t.dtype),
                           tuple(slots[i] for i in g)))
    kept = []
    for i in range(len(args)):
        if i in dup_of:
            slots[i] = ("dup", dup_of[i])
        elif i not in in_group:
            slots[i] = ("arg", len(kept))
            kept.append(i)
    layout = InputLayout(slots=tuple(slots), kept=tuple(kept), bases=tuple(bases))
    key = (tuple(sorted(dup_of.items())), tuple(key_groups))
    return key, layout


def wrap_program(fn: Callable[..., list], layout: InputLayout, identity_box: list) -> Callable[..., list]:
    """``fn`` over the outer arguments → a function over the inner arguments.

    Records (on the first run) which outputs *are* a regenerated alias, so the
    wrapper can hand back the caller's own tensor object (``return b``).
    """
    regenerated = layout.regenerated()

    def inner_fn(*inner):
        full = layout.outer_from_inner(list(inner))
        outs = fn(*full)
        if not identity_box:
            identity_box.append({oi: i for oi, o in enumerate(outs) for i in regenerated
                                 if isinstance(o, torch.Tensor) and o is full[i]})
        return outs
    return inner_fn


def inner_fake_args(fake_args: list, real_args: list, layout: InputLayout, fake_mode) -> list:
    """Fake inputs of the inner calling convention: kept fakes + fakes of the bases."""
    from torch._subclasses.fake_tensor import FakeTensor
    out: list[Any] = [fake_args[i] for i in layout.kept]
    for kind, i in layout.bases:
        real = real_args[i]
        if isinstance(real, FakeTensor):
            with real.fake_mode:
                base = make_base(real, kind)
            out.append(base)
        else:
            out.append(fake_from_real(fake_mode, make_base(real, kind), static_shapes=True))
    return out
