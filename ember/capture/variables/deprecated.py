"""torch's functions wrapped by ``typing_extensions.deprecated`` / ``warnings.deprecated`` (3.13):
the wrapper warns, then calls the function (``torch._check_is_size`` is one). torch.compile does
not break on ``torch._check_is_size`` (it knows the function); ember traced the wrapper and broke
at its ``warnings.warn``. A program's own deprecated function still breaks there, as in
torch.compile (it traces the wrapper too).

Here the warning is a side effect replayed after the graph, in program order with the others (as
logging calls are, see deferred_calls.py), so it stays visible as in eager, and the wrapped
function is traced as usual. Inside a ``catch_warnings`` block the wrapper is traced as before (its
``warnings.warn`` breaks): a warning replayed after the block would escape the program's filter.
The location the warning names is ember's entry, not the caller's line (eager: the caller's).
"""
from __future__ import annotations

import warnings

from ember.capture.variables.base import ConstantVariable


def deprecated_wrapper(fn):
    """(message, category, wrapped function) when ``fn`` is the warning wrapper that
    ``typing_extensions.deprecated`` (or 3.13's ``warnings.deprecated``) made; else None."""
    msg = fn.__dict__.get("__deprecated__")
    target = fn.__dict__.get("__wrapped__")
    code = fn.__code__
    if not isinstance(msg, str) or target is None or code.co_name != "wrapper" or \
            str(getattr(target, "__module__", None)).split(".")[0] != "torch" or \
            not code.co_filename.endswith(("typing_extensions.py", "warnings.py")) or fn.__closure__ is None:
        return None
    try:
        cells = {n: c.cell_contents for n, c in zip(code.co_freevars, fn.__closure__)}
    except ValueError:  # an empty cell
        return None
    if set(cells) != {"arg", "category", "msg", "stacklevel"} or cells["arg"] is not target or cells["msg"] != msg:
        return None
    category = cells["category"]
    if not (isinstance(category, type) and issubclass(category, Warning)):
        return None
    return msg, category, target


def call_deprecated(tx, fn_vt, found, args, kwargs):
    """The call of a deprecated wrapper: its warning deferred, the wrapped function traced.
    None where the wrapper must be traced as it is."""
    if tx.trace.catch_warnings_depth > 0:
        return None
    from ember.capture.builder import wrap
    from ember.capture.sources import AttrSource, ConstSource
    msg, category, target = found
    warn_vt = wrap(tx, warnings, ConstSource(warnings, "warnings"))
    tx.side_effects.defer_call(warn_vt, "warn", [ConstantVariable(msg), wrap(tx, category, ConstSource(category, "category"))],
                               {})
    target_vt = wrap(tx, target, AttrSource(fn_vt.source, "__wrapped__") if fn_vt.source is not None else None)
    return target_vt.call(tx, args, kwargs)
