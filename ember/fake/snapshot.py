"""Snapshot and in-place restore of fake tensor metadata, for the interpreter's rollback.

VariableTrackers are immutable, so rolling the interpreter back is cheap, but the fake tensors
inside them are not: an in-place metadata op traced in a region that is then undone (``x.t_()``,
``squeeze_``, ``resize_``, ``as_strided_``, ``set_``, ``detach_``, ``requires_grad_``, or an
in-place op giving a leaf a ``grad_fn``) changes the very fake tensor every tracker of ``x``
shares. A snapshot records what the program can observe of each fake tensor and puts it back
*in place* (the same object, so every tracker, graph node and memo still agrees):

    snap = FakeSnapshot.take(fakes)
    ...                                  # x.t_() traced on x's fake
    if not snap.restore(): give up       # x's fake: size, stride, offset, leaf-ness, version back

Restored: size, stride, storage offset and storage (``set_`` under no_grad), ``requires_grad``
and leaf-ness (``detach_`` / ``requires_grad_``; a tensor that lost its ``grad_fn`` gets one back
from an in-place add of a zero that requires grad), and the version counter
(``_unsafe_set_version_counter``). A copy of the tensor would not do: it is a different object,
and a naive copy is a leaf. What cannot be put back (a view whose autograd history changed:
``detach_`` refuses views) makes ``restore`` return False; the caller then abandons the trace.
The identity of a non-leaf's ``grad_fn`` is not kept (only that it has one), nor the size of a
storage that ``resize_`` grew (no program reads it through a tensor of the old size).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

#: the "version" of an inference tensor (made under torch.inference_mode): it has no counter
NO_VERSION = -1


def version_of(t: torch.Tensor) -> int:
    """``t._version``, or ``NO_VERSION`` for an inference tensor (reading its counter raises).
    A write to an inference tensor is not seen by comparing versions: callers that must see
    writes check ``is_inference()`` themselves."""
    return NO_VERSION if t.is_inference() else t._version


def _moved_inference(r) -> bool:
    """An inference tensor (no version counter to tell): whether its size, stride or offset moved."""
    t = r[0]
    return not (_same_numbers(tuple(t.shape), tuple(r[1])) and _same_numbers(tuple(t.stride()), tuple(r[2]))
                and _same_number(t.storage_offset(), r[3]))


@dataclass(frozen=True)
class FakeMeta:
    size: tuple
    stride: tuple
    storage_offset: object
    storage: object
    requires_grad: bool
    is_leaf: bool
    version: int

    @staticmethod
    def of(t: torch.Tensor) -> "FakeMeta":
        return FakeMeta(tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.untyped_storage(),
                        bool(t.requires_grad), bool(t.is_leaf), version_of(t))

    def same(self, other: "FakeMeta") -> bool:
        return (_same_numbers(self.size, other.size) and _same_numbers(self.stride, other.stride)
                and _same_number(self.storage_offset, other.storage_offset)
                and _same_storage(self.storage, other.storage)
                and (self.requires_grad, self.is_leaf, self.version)
                == (other.requires_grad, other.is_leaf, other.version))


def _same_storage(a, b) -> bool:
    return a is b or a._cdata == b._cdata


def _same_number(a, b) -> bool:
    """Equal without asking a symbolic value a question (that would add a guard): plain ints by
    value, symbolic ones by their expression."""
    if a is b:
        return True
    if type(a) is int and type(b) is int:
        return a == b
    na, nb = getattr(a, "node", None), getattr(b, "node", None)
    if na is None or nb is None:
        return False
    return na is nb or getattr(na, "expr", None) is not None and na.expr == getattr(nb, "expr", None)


def _same_numbers(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(_same_number(x, y) for x, y in zip(a, b))


class FakeSnapshot:
    """The observable metadata of a set of fake tensors at one moment.

    Taking one is a few attribute reads per tensor (it is taken at every speculated region). What
    changed is found by the version counter and the autograd flags alone: every in-place op,
    metadata ones included (``t_``, ``squeeze_``, ``as_strided_``, ``resize_``, ``set_``), bumps
    the version; ``detach_`` and ``requires_grad_`` change the flags. (``.data =``, which does
    neither, is not traced.)"""

    def __init__(self, raw: list, mode):
        self._raw = raw  # (tensor, size, stride, offset, storage, requires_grad, is_leaf, version)
        self.mode = mode

    @staticmethod
    def take(tensors) -> "FakeSnapshot":
        seen: set[int] = set()
        raw = []
        mode = None
        for t in tensors:
            if not isinstance(t, torch.Tensor) or id(t) in seen:
                continue
            seen.add(id(t))
            if mode is None:
                mode = getattr(t, "fake_mode", None)
            raw.append((t, t.shape, t.stride(), t.storage_offset(), t.untyped_storage(),
                        t.requires_grad, t.is_leaf, version_of(t)))
        return FakeSnapshot(raw, mode)

    @property
    def entries(self) -> list[tuple[torch.Tensor, FakeMeta]]:
        return [(r[0], _meta_of(r)) for r in self._raw]

    def _changed_raw(self) -> list:
        return [r for r in self._raw
                if version_of(r[0]) != r[7] or r[0].requires_grad != r[5] or r[0].is_leaf != r[6]
                or r[7] == NO_VERSION and _moved_inference(r)]

    def changed(self) -> list[torch.Tensor]:
        """The tensors whose metadata may differ from the snapshot."""
        return [r[0] for r in self._changed_raw()]

    def restore(self) -> bool:
        """Put every changed tensor back as it was; False when one could not be (see the module doc)."""
        changed = self._changed_raw()
        if not changed:
            return True
        try:
            with _mode(self.mode):
                for r in changed:
                    _restore_autograd(r[0], _meta_of(r))
                for r in changed:
                    t, m = r[0], _meta_of(r)
                    if not (_same_numbers(tuple(t.shape), m.size) and _same_numbers(tuple(t.stride()), m.stride)
                            and _same_number(t.storage_offset(), m.storage_offset)
                            and _same_storage(t.untyped_storage(), m.storage)):
                        with torch.no_grad():
                            t.set_(m.storage, m.storage_offset, m.size, m.stride)
                # (views share their base's version counter: each is set back to the value it had)
                moved = [r for r in self._raw if version_of(r[0]) != r[7]]
                torch._C._autograd._unsafe_set_version_counter(tuple(r[0] for r in moved),
                                                               tuple(r[7] for r in moved))
        except Exception:  # noqa: BLE001 — e.g. detach_ of a view: the caller gives up on the trace
            return False
        return all(FakeMeta.of(r[0]).same(_meta_of(r)) for r in changed) and not self._changed_raw()


def _meta_of(r) -> FakeMeta:
    return FakeMeta(tuple(r[1]), tuple(r[2]), r[3], r[4], bool(r[5]), bool(r[6]), int(r[7]))


def _restore_autograd(t: torch.Tensor, m: FakeMeta) -> None:
    if bool(t.is_leaf) == m.is_leaf and bool(t.requires_grad) == m.requires_grad:
        return
    if m.is_leaf:
        if not t.is_leaf:
            with torch.no_grad():
                t.detach_()  # (refused for a view: restore fails)
        t.requires_grad_(m.requires_grad)
        return
    # it had a grad_fn (so required grad) and lost it: an in-place add of a zero that requires grad
    # gives it one again (its data is fake; the version is put back afterwards)
    t.requires_grad_(False)
    zero = torch.zeros((), dtype=t.dtype, device=t.device, requires_grad=True)
    with torch.enable_grad():
        t.add_(zero)


class _mode:
    """The fake mode the tensors belong to, on (``set_`` and the zero above must be fake)."""

    def __init__(self, mode):
        self.mode = mode

    def __enter__(self):
        if self.mode is not None:
            self.mode.__enter__()

    def __exit__(self, *exc):
        if self.mode is not None:
            return self.mode.__exit__(*exc)
        return False


def entry_stand_in(ctx, fake: torch.Tensor, key: tuple):
    """A fake tensor with ``fake``'s size and stride as they were at entry (``key``: its
    `ember.fake.symbolic.entry_metadata`, the same symbols), for the shape guards after an in-place
    metadata op (``x.t_()``) changed ``fake``: guards describe an input as it arrives, not as the
    trace left it (a stride guard from the transposed tensor could never pass). None when the entry
    offset is not 0, the input is a view, or the stand-in cannot be made (the caller then retraces
    with static shapes)."""
    i = key.index("|")
    j = key.index("|", i + 1)
    size, stride, offset = key[:i], key[i + 1:j], key[j + 1]
    if not (type(offset) is int and offset == 0) or fake._base is not None:
        return None  # (a view input: its base's symbols are named through it, which a stand-in is not)
    try:
        with ctx.enabled():
            stand_in = torch.empty_strided(size, stride, dtype=fake.dtype, device=fake.device)
    except Exception:  # noqa: BLE001 — a stand-in ember cannot make: static shapes instead
        return None
    if id(fake) in ctx.contexts:
        ctx.contexts[id(stand_in)] = ctx.contexts[id(fake)]
    ctx.stand_ins = getattr(ctx, "stand_ins", [])
    ctx.stand_ins.append(stand_in)  # (kept alive: contexts are keyed by id)
    return stand_in
