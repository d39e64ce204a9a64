"""What capture writes into the structured trace (``EMBER_TRACE``, see ``ember.trace_log``).

The records and their order follow what Dynamo writes under ``TORCH_TRACE`` for one frame::

    [recompile_reasons]        artifact (json), a recompile only: the guard that failed
    dynamo_start               the user stack that called the function, the function last
    [<resume>_ORIGINAL_BYTECODE]  artifact, a resume function: its code (disassembly)
    [dynamo_graph_break_reason]   artifact, attempt 0: why the frame breaks, with the user stack
    dynamo_output_graph        the captured fx graph (attempt 1 after a break)
    aot_* graphs               from the AOT layer (ember.aot.compile), when the backend uses it
    dynamo_guards              the entry's guards (with provenance where recorded)
    [<fn>_ENTRY_SOURCE]        artifact: the generated entry function (guards, graph call, residual)
    compilation_metrics        times per phase, guard/graph/op counts, breaks, failures

Every function here returns at once while tracing is off; none is on the per-call path.
"""
from __future__ import annotations

import contextlib
import os
import time

from ember import metrics, trace_log


def _torch_dir() -> str:
    import torch
    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


class FrameTrace:
    """One compile of one function being traced: the cache sets ``entry`` when it has one."""

    def __init__(self, cache, compile_id):
        self.cache = cache
        self.compile_id = compile_id
        self.entry = None


@contextlib.contextmanager
def compile_frame(cache, recompile_reason: str | None = None):
    """Around one compile of ``cache``'s function: its compile id, ``dynamo_start``, and at the end
    its ``compilation_metrics``. Yields None while tracing is off."""
    if trace_log.writer is None:
        yield None
        return
    w = trace_log.writer
    mine = getattr(cache, "trace_frame", None)  # (writer, frame id, compiles so far): ids per trace file
    if mine is None or mine[0] is not w:
        mine = (w, w.new_frame_id(), 0)
    cid = trace_log.CompileId(mine[1], mine[2])
    cache.trace_frame = (w, mine[1], mine[2] + 1)
    fid = cid.frame_id
    ft = FrameTrace(cache, cid)
    phases = dict(metrics.phase_seconds)
    counters = dict(metrics.counters)
    start = time.perf_counter()
    failure = None
    code = cache.fn.__code__
    with trace_log.compiling(cid):
        if recompile_reason is not None:
            trace_log.artifact("recompile_reasons", [f"{fid}/{cid.frame_compile_id - 1}: {recompile_reason}"],
                               encoding="json")
        frames = trace_log.user_frames((_torch_dir(),))
        frames.append((code.co_filename, code.co_firstlineno, code.co_name, None))
        trace_log.emit("dynamo_start", {"stack": trace_log.stack_summary(frames)})
        if cache.is_resume:
            from ember.capture.graph_break import readable_code
            trace_log.artifact(f"{code.co_name}_ORIGINAL_BYTECODE", lambda: readable_code(code))
        try:
            yield ft
        except BaseException as e:
            failure = e
            raise
        finally:
            _compilation_metrics(ft, start, phases, counters, failure)


def _compilation_metrics(ft: FrameTrace, start: float, phases: dict, counters: dict, failure) -> None:
    cache, cid, entry = ft.cache, ft.compile_id, ft.entry
    code = cache.fn.__code__
    elapsed = time.perf_counter() - start
    phase_times = {k: round(v - phases.get(k, 0.0), 6) for k, v in metrics.phase_seconds.items()
                   if v - phases.get(k, 0.0) > 0}
    m = {"compile_id": str(cid), "frame_key": str(cid.frame_id), "co_name": code.co_name,
         "co_filename": code.co_filename, "co_firstlineno": code.co_firstlineno,
         "cache_size": len(cache.entries), "accumulated_cache_size": len(cache.entries),
         "start_time": cid.start_time, "entire_frame_compile_time_s": round(elapsed, 6),
         "backend_compile_time_s": phase_times.get("backend"),
         "inductor_compile_time_s": None, "code_gen_time_s": None,
         "fail_type": None, "fail_reason": None, "fail_user_frame_filename": None,
         "fail_user_frame_lineno": None, "non_compliant_ops": [], "compliant_custom_ops": [],
         "restart_reasons": [str(r) for r in cid.restart_reasons],
         "dynamo_time_before_restart_s": cid.metrics.pop("time_before_restart", 0.0)}
    m.update(cid.metrics)
    if entry is not None and entry.guards is not None:
        from ember.capture.guards import GuardKind
        guards = entry.guards.ordered()
        m["guard_count"] = len(guards)
        m["shape_env_guard_count"] = sum(1 for g in guards if g.kind is GuardKind.SHAPE_ENV)
    reason = failure
    if entry is None and reason is None:
        reason = cache.fallback_reasons[-1] if cache.fallback_reasons else cache.run_eagerly_reason
    elif entry is not None and entry.eager_reason is not None:
        reason = entry.eager_reason
    if isinstance(reason, str) and getattr(cache, "internal_error", None) is not None \
            and cache.internal_error[1] == reason:
        m["fail_type"], m["fail_reason"] = cache.internal_error  # (the frame runs eagerly from now on)
    elif reason is not None:
        m["fail_type"] = type(reason).__name__ if isinstance(reason, BaseException) else \
            "RecompileLimitExceeded" if str(reason).startswith("recompile limit") else "RunEagerly"
        m["fail_reason"] = str(reason)
    if reason is not None:
        where = getattr(reason, "where", None)
        if isinstance(where, str) and ":" in where:
            fname, _, line = where.rpartition(":")
            if line.isdigit():
                m["fail_user_frame_filename"], m["fail_user_frame_lineno"] = fname, int(line)
    # ember's own: every phase's time (capture, backend, aot, backend_compile), and the counts
    m["ember_phase_times_s"] = phase_times
    m["graph_count"] = metrics.counters.get("graphs", 0) - counters.get("graphs", 0)
    m["graph_break_count"] = metrics.counters.get("graph_breaks", 0) - counters.get("graph_breaks", 0)
    m["is_resume_function"] = bool(cache.is_resume)
    trace_log.emit("compilation_metrics", m, compile_id=cid)


def recompile_limit_hit(cache, bound) -> None:
    """The function hit ``config.recompile_limit``: a compile that fails at once (the guard that
    failed, then metrics with ``fail_type`` RecompileLimitExceeded); it runs eagerly from now on."""
    if trace_log.writer is None:
        return
    with compile_frame(cache, cache._recompile_reason(bound)):
        pass


def graph_break(e) -> None:
    """The frame breaks at ``e`` (an Unsupported): its reason with the user stack, in attempt 0;
    the re-trace up to the break is the next attempt (Dynamo's restart)."""
    cid = trace_log.current()
    if trace_log.writer is None or cid is None:
        return
    trace_log.artifact("dynamo_graph_break_reason", lambda: break_text(e))
    cid.restart_reasons.append(_one_line(e))
    cid.metrics["time_before_restart"] = round(time.time() - cid.start_time, 6)
    cid.attempt += 1


def break_text(e) -> str:
    """A graph break as tlparse shows Dynamo's: where, why, and the user code traceback."""
    lines = [f"Graph break in user code at {e.where or '?'}"]
    gb = break_id(e)
    lines.append(f"Graph Break Reason: {f'[{gb}] ' if gb else ''}{e.reason}")
    hint = getattr(e, "hint", None)
    if hint:
        lines.append(f"  Hint: {hint}")
    lines += ["", "User code traceback:"]
    for text in e.user_stack or ([f"{e.where} in ?"] if e.where else []):
        fname, lineno, name, _ = trace_log.parse_location(text)
        lines.append(f'  File "{fname}", line {lineno}, in {name}')
        src = _source_line(fname, lineno)
        if src:
            lines.append(f"    {src}")
    return "\n".join(lines) + "\n"


def break_id(e) -> str | None:
    """The graph-break registry id of a break (``EB0001``...) when its reason carries one."""
    for attr in ("gb_id", "break_id", "id"):
        v = getattr(e, attr, None)
        if isinstance(v, str) and v:
            return v
    return None


def _one_line(e) -> str:
    gb = break_id(e)
    where = f" at {e.where}" if getattr(e, "where", None) else ""
    return f"{f'[{gb}] ' if gb else ''}{getattr(e, 'reason', e)}{where}"


def _source_line(fname: str, lineno: int) -> str:
    import linecache
    return linecache.getline(fname, lineno).strip()


def output_graph(gm) -> None:
    """``dynamo_output_graph``: the graph capture hands the backend, with its sizes."""
    if trace_log.writer is None:
        return
    sizes, ops, placeholders = {}, 0, 0
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            placeholders += 1
        elif node.op in ("call_function", "call_method", "call_module"):
            ops += 1
        shape = getattr(node.meta.get("example_value"), "shape", None)
        if shape is not None:
            sizes[node.name] = [d if isinstance(d, int) else str(d) for d in shape]
    cid = trace_log.current()
    if cid is not None:
        cid.metrics.update(graph_op_count=ops, graph_node_count=len(gm.graph.nodes),
                           graph_input_count=placeholders)
    trace_log.emit("dynamo_output_graph", {"sizes": sizes}, lambda: readable_graph(gm))


def readable_graph(gm) -> str:
    """The graph as Python with shapes (torch's print_readable), its plain code if that fails."""
    try:
        return gm.print_readable(print_output=False, include_stride=True, include_device=True)
    except Exception:  # noqa: BLE001 — a graph that cannot be pretty-printed is still shown
        return gm.code


def entry_made(entry, label: str) -> None:
    """``dynamo_guards`` (with each guard's provenance where recorded) and the entry's source."""
    if trace_log.writer is None or trace_log.current() is None:
        return
    if entry.guards is not None and len(entry.guards):
        trace_log.emit("dynamo_guards", None, lambda: [_guard_record(g) for g in entry.guards.ordered()])
    if entry.source:
        trace_log.artifact(f"{entry.run.__code__.co_name}_ENTRY_SOURCE" if hasattr(entry.run, "__code__")
                           else "ember_entry_source", entry.source)


def _guard_record(g) -> dict:
    """One guard as tlparse's dynamo_guards table wants it: its code, and as ``user_stack`` the
    user stack that made the trace depend on it (its provenance: capture/provenance.py). tlparse
    shows only ``code``, so the provenance follows it as a comment (``# file:line in fn (operation):
    source line``, as torch's guard dumps comment theirs); beyond torch's fields (tlparse ignores
    them): ``guard`` (the guard alone, with its ``kind``) and ``provenance`` (as plain data)."""
    record = {"code": str(g.text), "stack": None, "user_stack": None, "guard": str(g.text), "kind": g.kind.name}
    prov = getattr(g, "provenance", None)
    if prov is None:
        return record
    record["code"] = f"{g.text}  # {prov}"
    frames = [trace_log.parse_location(s) for s in getattr(prov, "stack", ()) or ()]
    innermost = (prov.filename, prov.lineno, prov.function.rpartition(".")[2], prov.source_line or None)
    if frames and (frames[-1][0], frames[-1][1]) == innermost[:2]:
        frames[-1] = innermost
    else:
        frames.append(innermost)
    record["user_stack"] = trace_log.stack_summary(frames)
    record["provenance"] = prov.as_dict() if hasattr(prov, "as_dict") else str(prov)
    return record


def residual_made(code) -> None:
    """The residual function a graph break generated (its bytecode), as an artifact."""
    if trace_log.writer is None or trace_log.current() is None:
        return
    from ember.capture.graph_break import readable_code
    trace_log.artifact(f"{code.co_name}_RESIDUAL_BYTECODE", lambda: readable_code(code))
