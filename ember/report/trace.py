"""``EMBER_TRACE``: the structured trace of every compile, in the format of torch's ``TORCH_TRACE``.

    EMBER_TRACE=/tmp/trace python train.py
    tlparse --latest /tmp/trace -o /tmp/tl_out      # pip install tlparse; open tl_out/index.html

or from code::

    ember.report.trace.enable("/tmp/trace")   # (or ember.config.trace = "/tmp/trace")
    ...
    ember.report.trace.disable()
    records = ember.report.trace.read(ember.report.trace.log_files("/tmp/trace")[-1])

Each compile of a function writes the records Dynamo writes for a frame (``dynamo_start`` with
the user stack, ``dynamo_output_graph``, ``aot_joint_graph`` / ``aot_forward_graph`` /
``aot_backward_graph`` or ``aot_inference_graph``, ``dynamo_guards``, ``compilation_metrics``,
and artifacts: ``recompile_reasons``, ``dynamo_graph_break_reason``, resume functions' and
residuals' bytecode, the generated entry function), under a compile id ``[frame/recompile_attempt]``,
so stock ``tlparse`` renders them. See docs/observability.md. The writer is ``ember.trace_log``.
"""
from __future__ import annotations

import glob
import json
import os
import re

from ember import trace_log
from ember.trace_log import TraceRecord

__all__ = ["enable", "disable", "enabled", "records", "read", "log_files", "TraceRecord"]

_PREFIX = re.compile(r"^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+ [^:]+:\d+\] ")


def enable(directory: str, keep: bool = False) -> str:
    """Trace every compile from now on into a new log file under ``directory`` (created when the
    first record is written; its path is ``trace_log.writer.path``). ``keep``: also keep the
    records in memory (see ``records()``). Returns the directory."""
    from ember.config import config
    config.trace = directory
    trace_log.sync(directory)  # (marks the setting applied, so the next compile keeps this writer)
    w = trace_log.writer
    if w is None or w.directory != os.path.abspath(os.path.expanduser(directory)) or w.keep != keep:
        w = trace_log.enable(directory, keep=keep)
    return w.directory


def disable() -> None:
    """Stop tracing (closes the log file)."""
    from ember.config import config
    config.trace = ""
    trace_log.sync("")
    trace_log.disable()


def enabled() -> bool:
    return trace_log.writer is not None


def records() -> list[TraceRecord]:
    """The records written since ``enable(..., keep=True)`` (empty when not keeping them)."""
    w = trace_log.writer
    return list(w.records) if w is not None else []


def log_files(directory: str) -> list[str]:
    """The trace logs under ``directory``, oldest first."""
    return sorted(glob.glob(os.path.join(directory, "dedicated_log_torch_trace_*.log")), key=os.path.getmtime)


def read(path: str) -> list[TraceRecord]:
    """The records of a trace log (ember's or torch's), payloads joined, file names of stacks
    resolved from the ``str`` records (``filename`` ids become paths)."""
    strings: dict[int, str] = {}
    out: list[TraceRecord] = []
    current: list | None = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("\t"):
                if current is not None:
                    current.append(line[1:])
                continue
            m = _PREFIX.match(line)
            if not m:
                continue
            _finish(out, current)
            current = None
            try:
                obj = json.loads(line[m.end():])
            except ValueError:
                continue
            if "str" in obj:
                s, n = obj["str"]
                strings[n] = s
                continue
            cid = (obj.get("frame_id"), obj.get("frame_compile_id"), obj.get("attempt")) \
                if "frame_id" in obj else None
            name = next((k for k in obj if k not in _CONTEXT_KEYS), "?")
            meta = _resolve(obj.get(name), strings)
            rec = TraceRecord(name, meta, cid, None)
            out.append(rec)
            if "has_payload" in obj:
                current = [rec]
        _finish(out, current)
    return out


_CONTEXT_KEYS = {"frame_id", "frame_compile_id", "attempt", "has_payload", "rank", "compiled_autograd_id",
                 "subgraph_name", "stack"}


def _finish(out: list, current: list | None) -> None:
    if current:
        current[0].payload = "\n".join(current[1:])


def _resolve(meta, strings: dict):
    """Stacks' interned ``filename`` ids back to file names."""
    if isinstance(meta, dict):
        return {k: ([{**fr, "filename": strings.get(fr.get("filename"), fr.get("filename"))}
                     if isinstance(fr, dict) else fr for fr in v] if k in ("stack", "user_stack") and isinstance(v, list)
                    else _resolve(v, strings))
                for k, v in meta.items()}
    return meta
