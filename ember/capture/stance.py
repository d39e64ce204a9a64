"""The compiler's stance: ``torch.compiler.set_stance`` / ``ember.set_stance``.

One process-wide setting, as torch's, that changes what a compiled function does on a call:

* ``"default"``: compile on a cache miss (with ``force_backend``: with that backend instead of the
  one the function was compiled with).
* ``"force_eager"``: every compiled function runs as it is; no cache lookup, no compile.
* ``"eager_on_recompile"``: cached entries still serve calls whose guards pass; a miss runs the
  frame eagerly instead of compiling (a frame never compiled runs eagerly too: torch's "run
  only" mode).
* ``"fail_on_recompile"``: a miss in a frame with a tensor argument raises ``RuntimeError``
  naming the function and the guards that failed (torch raises at a first compile too).
* ``"eager_then_compile"``: a frame's first miss runs eagerly, the next ones compile.
* ``"aot_eager_then_compile"``: a frame's first miss compiles with ``aot_eager``, the next ones
  with the function's backend.

``skip_guard_eval_unsafe`` is accepted and ignored: ember keeps checking every guard, which is
what the flag's "safe" side promises anyway.

``set_stance`` works as torch's does: a call sets the stance now; as a context manager it
restores the previous stance on exit; as a decorator it sets the stance only while the decorated
function runs. ``install()`` (done on ``import ember``) wraps ``torch.compiler.set_stance`` so
that a program written for torch.compile sets ember's stance too (torch's own is set as well).
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile", "eager_then_compile",
           "aot_eager_then_compile")


@dataclasses.dataclass(frozen=True)
class Stance:
    stance: str = "default"
    skip_guard_eval_unsafe: bool = False
    backend: Any = None  # force_backend: a name or a backend callable


_current = Stance()
#: Whether the stance is anything but the default (read on every compiled call: one module lookup).
active = False


def current() -> Stance:
    return _current


def _set(new: Stance) -> Stance:
    global _current, active
    prior, _current = _current, new
    active = not (new.stance == "default" and new.backend is None)
    return prior


def check_valid() -> None:
    """torch raises on the next compiled call for a stance it does not know; so does ember."""
    if _current.stance not in STANCES:
        raise RuntimeError(f"invalid torch.compile stance '{_current}'")


def forced_backend() -> Callable | None:
    """The backend callable ``force_backend`` names (stance "default"), or None."""
    if _current.stance != "default" or _current.backend is None:
        return None
    from ember.backends.registry import lookup_backend
    return lookup_backend(_current.backend)


class set_stance:  # noqa: N801 (named as torch's, used the same three ways)
    """Set the compiler's stance: now, for a ``with`` block, or for calls of a decorated function."""

    _dynamo_forbidden = True  # (called inside a compiled region: an error, as in torch)

    def __init__(self, stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                 force_backend: str | Callable | None = None) -> None:
        if force_backend is not None and stance != "default":
            raise RuntimeError("non-default stance cannot have force_backend set")
        self.stance = Stance(stance, skip_guard_eval_unsafe, force_backend)
        self.prev = _set(self.stance)

    def __enter__(self) -> None:
        _set(self.stance)

    def __exit__(self, *exc) -> None:
        _set(self.prev)

    def __call__(self, fn: Callable) -> Callable:
        _set(self.prev)  # (as a decorator, the stance holds only while fn runs)
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            prior = _set(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(prior)

        with_stance._dynamo_forbidden = True
        return with_stance


class _Both:
    """What the wrapped ``torch.compiler.set_stance`` returns: torch's object and ember's, used together."""

    _dynamo_forbidden = True

    def __init__(self, theirs, ours: set_stance) -> None:
        self.theirs, self.ours = theirs, ours

    def __enter__(self):
        self.ours.__enter__()
        return self.theirs.__enter__()

    def __exit__(self, *exc):
        self.ours.__exit__(*exc)
        return self.theirs.__exit__(*exc)

    def __call__(self, fn: Callable) -> Callable:
        return self.ours(self.theirs(fn))


_installed = False


def install() -> None:
    """Make ``torch.compiler.set_stance`` set ember's stance as well as torch's."""
    global _installed
    if _installed:
        return
    import torch
    original = getattr(torch.compiler, "set_stance", None)
    if original is None:
        return
    _installed = True

    @functools.wraps(original)
    def set_stance_too(stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
                       force_backend: str | Callable | None = None):
        theirs = original(stance, skip_guard_eval_unsafe=skip_guard_eval_unsafe, force_backend=force_backend)
        return _Both(theirs, set_stance(stance, skip_guard_eval_unsafe=skip_guard_eval_unsafe,
                                        force_backend=force_backend))

    set_stance_too._dynamo_forbidden = True
    torch.compiler.set_stance = set_stance_too
