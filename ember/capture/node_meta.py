"""What a graph node says about the user's program: its name and its stack trace.

Printed graphs (``gm.print_readable()``, ``gm.code``) are read by people and compared by tests
with torch.compile's, so ember records the same two things torch does:

* a tensor's node takes the name of the first local it is stored to (``y = x.sin()`` makes the
  node ``y``, not ``sin``); inputs keep their own names, later stores do not rename again;
* ``node.meta["stack_trace"]`` is the user's stack when the node was made, in ``traceback``'s
  format (``File "f.py", line 3, in fn`` / the source line), innermost frame last. ``torch.fx``
  prints one ``# File: ...`` comment per run of nodes from the same line, and the AOT layer's
  error messages quote it.
"""
from __future__ import annotations

import linecache

_NAMEABLE = ("call_function", "call_method", "call_module")
_TRACES: dict = {}


def name_node_after(value, local: str) -> None:
    """Name ``value``'s graph node after ``local`` if it is a tensor's node not yet named so."""
    from ember.capture.variables.tensor import TensorVariable
    if not isinstance(value, TensorVariable):
        return
    node = value.raw_node  # (naming is not a use of the tensor: an input's node is never renamed)
    if node.op not in _NAMEABLE or node.meta.get("named_after_local"):
        return
    node.meta["named_after_local"] = True
    node._rename(local)  # (torch.fx makes the name unique and a valid identifier)


def stack_trace(frame) -> str | None:
    """The user's stack at ``frame``'s current line (its callers first), as traceback formats it."""
    key = []
    tx = frame
    while tx is not None:
        key.append((tx.code, tx.lineno))
        tx = tx.parent
    key = tuple(reversed(key))
    hit = _TRACES.get(key)
    if hit is None:
        if len(_TRACES) > 20_000:
            _TRACES.clear()
        parts = []
        for code, lineno in key:
            if lineno is None:
                continue
            parts.append(f'  File "{code.co_filename}", line {lineno}, in {code.co_name}\n')
            line = linecache.getline(code.co_filename, lineno).strip()
            if line:
                parts.append(f"    {line}\n")
        hit = _TRACES[key] = "".join(parts) or None
    return hit
