"""The end of a trace: drop what it holds, so the values it wrapped die when the program drops them."""
from __future__ import annotations


def release_trace(root) -> None:
    """The trace is over (an entry was made, or it failed): drop what its translators, output
    graph and side-effect log hold. Trackers refer to their translator, and the translators and
    the output graph to the trackers (locals, stack, the memo of wrapped sources): cycles that
    only the garbage collector frees, with every real value the trace wrapped — a model's
    parameters, an optimizer's state, the inputs — alive until it runs (torch's OutputGraph
    cleanup breaks its cycles the same way). Containers are rebound, never cleared in place: a
    live entry that shares one keeps it whole."""
    trace = root.trace
    translators = trace.translators
    for obj in (*translators, root.output, root.side_effects, trace):
        state = vars(obj)
        for name, value in list(state.items()):
            if type(value) in _CONTAINERS:
                state[name] = type(value)()
            elif isinstance(value, dict):  # (a root frame's ArgumentLocals: capture/lazy_arguments.py)
                state[name] = {}
    for t in translators:
        t.result = t.yield_value = t.current_exception_vt = t.current_exception = None
        t.reached_break = None  # (its stack of trackers; capture took what it needed)


_CONTAINERS = (dict, list, set)
