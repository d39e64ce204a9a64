"""The structured trace: what ``TORCH_TRACE`` writes, for ember's compiles (``EMBER_TRACE=dir``).

One log file per process under the directory, one record per line, in the format
torch's ``torch._logging.trace_structured`` writes and ``tlparse`` reads::

    V1127 06:06:56.547000 18740 ember/capture/cache.py:180] {"dynamo_start": {...}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    V1127 06:06:56.655000 18740 ember/capture/trace_hooks.py:52] {"dynamo_output_graph": {...}, ..., "has_payload": "<md5>"}
    \tclass GraphModule(torch.nn.Module):
    \t    def forward(self, ...):

A glog prefix (level, date, time, pid, emitting file:line), then one JSON object: the record's
name and metadata, the compile id (``frame_id`` / ``frame_compile_id`` / ``attempt``), and, when
the record has a payload, its md5 in ``has_payload``; the payload follows on lines that start
with a tab. File names in stacks are interned: the first use of a name writes a
``{"str": [name, id]}`` record and stacks refer to the id.

A leaf module (standard library only) so that every layer may emit into it. Tracing off costs
one ``writer is None`` test on compile paths and nothing on the per-call path (no hook is there).
Records can also be kept in memory (``enable(..., keep=True)``) for a report to read back;
``ember.report.trace`` is the public face (enable, disable, read a trace file).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import sys
import threading
import time
import traceback
from typing import Any, Callable

#: the active writer; None while tracing is off (every hook tests this first)
writer: "TraceWriter | None" = None

_EMBER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_local = threading.local()


@dataclasses.dataclass
class CompileId:
    """Which compile a record belongs to: ``[frame_id/frame_compile_id_attempt]`` in tlparse.

    ``frame_id`` numbers the functions (code caches) ember compiled, in order of their first
    compile; ``frame_compile_id`` counts the compiles of one function (0, then one per recompile);
    ``attempt`` counts restarts of one compile (a graph break re-traces the frame up to the break)."""
    frame_id: int
    frame_compile_id: int
    attempt: int = 0
    start_time: float = dataclasses.field(default_factory=time.time)
    #: what the compile learnt, for its ``compilation_metrics`` record (hooks add to it)
    metrics: dict = dataclasses.field(default_factory=dict)
    restart_reasons: list = dataclasses.field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.frame_id}/{self.frame_compile_id}"


@dataclasses.dataclass
class TraceRecord:
    """One record as written (kept in memory with ``keep=True``, or read back from a file)."""
    name: str
    metadata: Any
    compile_id: tuple | None   # (frame_id, frame_compile_id, attempt)
    payload: str | None


class TraceWriter:
    """Writes records to ``<directory>/dedicated_log_torch_trace_ember_<pid>_<n>.log`` (opened at
    the first record), and keeps them in ``records`` when ``keep``."""

    def __init__(self, directory: str, keep: bool = False):
        self.directory = directory
        self.keep = keep
        self.records: list[TraceRecord] = []
        self.path: str | None = None
        self._file = None
        self._lock = threading.Lock()
        self._strings: dict[str, int] = {}
        self._pid = os.getpid()
        self._frame_ids = itertools.count()

    def new_frame_id(self) -> int:
        """The next function's frame id in this trace (0, 1, ...)."""
        return next(self._frame_ids)

    # -- low level -------------------------------------------------------------------------
    def _open(self):
        os.makedirs(self.directory, exist_ok=True)
        rank = _distributed_rank()
        stem = "dedicated_log_torch_trace_" + (f"rank_{rank}_" if rank is not None else "") + f"ember_{self._pid}"
        for n in itertools.count():
            path = os.path.join(self.directory, f"{stem}_{n}.log")
            try:
                self._file = open(path, "x", encoding="utf-8")  # (never another process's file)
            except FileExistsError:
                continue
            self.path = path
            return self._file

    def write(self, name: str, metadata: Any, payload: Any = None, compile_id: CompileId | None = None,
              context: bool = True, where: tuple[str, int] = ("ember/trace_log.py", 0)) -> None:
        record: dict[str, Any] = {name: metadata}
        if context and compile_id is not None:
            record["frame_id"] = compile_id.frame_id
            record["frame_compile_id"] = compile_id.frame_compile_id
            record["attempt"] = compile_id.attempt
        text = None
        if payload is not None:
            text = payload if isinstance(payload, str) else _payload_text(payload)
            record["has_payload"] = hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()
        now = time.time()
        stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now))
        line = f"V{stamp}.{int((now % 1) * 1e6):06d} {self._pid} {where[0]}:{where[1]}] " \
               f"{json.dumps(record, default=repr)}"
        if text is not None:
            line += "".join(f"\n\t{part}" for part in text.split("\n"))
        with self._lock:
            f = self._file or self._open()
            f.write(line + "\n")
            f.flush()
            if self.keep:
                cid = (compile_id.frame_id, compile_id.frame_compile_id, compile_id.attempt) \
                    if context and compile_id is not None else None
                self.records.append(TraceRecord(name, metadata, cid, text))

    def intern(self, filename: str) -> int:
        """The id of a file name in stacks (its ``str`` record written at its first use)."""
        n = self._strings.get(filename)
        if n is None:
            n = self._strings[filename] = len(self._strings)
            self.write("str", [filename, n], context=False)
        return n

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def _payload_text(payload: Any) -> str:
    if isinstance(payload, list):  # (one item a line, as torch writes lists)
        return "[\n" + ",\n".join(json.dumps(i, default=repr) for i in payload) + "\n]"
    return json.dumps(payload, default=repr, indent=0)


def _distributed_rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:  # noqa: BLE001 — a rank is a nicety for the file name
        pass
    return None


# -- switching on and off ---------------------------------------------------------------------
def enable(directory: str, keep: bool = False) -> TraceWriter:
    """Trace every compile from now on into a new log file under ``directory``."""
    global writer
    disable()
    writer = TraceWriter(os.path.abspath(os.path.expanduser(directory)), keep=keep)
    return writer


def disable() -> None:
    global writer
    if writer is not None:
        writer.close()
    writer = None


_configured = ""  # the last ``ember.config.trace`` value applied


def sync(directory: str) -> None:
    """Follow ``ember.config.trace`` (``EMBER_TRACE``): called at import and at each compile, it
    switches tracing when the setting changed since the last call ('' turns it off)."""
    global _configured
    if directory == _configured:
        return
    _configured = directory
    if directory:
        enable(directory)
    else:
        disable()


# -- emitting ------------------------------------------------------------------------------
def current() -> CompileId | None:
    """The compile in progress on this thread (innermost), if any."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def compiling(compile_id: CompileId):
    """Records emitted inside belong to ``compile_id``."""
    stack = getattr(_local, "stack", None)
    if stack is None:
        stack = _local.stack = []
    stack.append(compile_id)
    try:
        yield compile_id
    finally:
        stack.pop()


def emit(name: str, metadata: Any = None, payload: Any | Callable[[], Any] = None, *,
         compile_id: CompileId | None = None, context: bool = True) -> None:
    """Write one record (nothing while tracing is off). ``payload`` may be a function that
    makes it (called only when tracing is on); ``metadata`` defaults to ``{}``."""
    w = writer
    if w is None:
        return
    if callable(payload):
        payload = payload()
    caller = sys._getframe(1)
    if caller.f_code.co_filename == __file__ and caller.f_back is not None:
        caller = caller.f_back  # (artifact(): name the hook that called it)
    where = (_relative(caller.f_code.co_filename), caller.f_lineno)
    w.write(name, {} if metadata is None else metadata, payload, compile_id or current(), context, where)


def artifact(name: str, payload: Any | Callable[[], Any], encoding: str = "string", *,
             compile_id: CompileId | None = None) -> None:
    """An ``artifact`` record (tlparse saves its payload as a file named after ``name``)."""
    if writer is None:
        return
    emit("artifact", {"name": name, "encoding": encoding}, payload, compile_id=compile_id)


def stack_summary(frames) -> list[dict]:
    """Frames ``(filename, lineno, name, line)`` as the records' stacks (file names interned)."""
    w = writer
    if w is None:
        return []
    return [{"line": lineno, "name": name, "filename": w.intern(filename), **({"loc": line} if line else {})}
            for filename, lineno, name, line in frames]


_STDLIB_DIR = os.path.dirname(os.__file__) + os.sep


def user_frames(skip_dirs: tuple[str, ...] = ()) -> list[tuple]:
    """The calling program's stack, outermost first: where the compile was triggered from.

    Left out: ember's frames and the code it generates (entry functions, ``<ember ...>``; a graph
    break's residual, ``break_at_<offset>``), the standard library's, and those under
    ``skip_dirs`` (torch's own)."""
    out = []
    for fs in traceback.extract_stack(sys._getframe(1)):
        fname = fs.filename
        if fname.startswith(("<", _EMBER_DIR)) or any(fname.startswith(d) for d in skip_dirs) \
                or fs.name.startswith("break_at_") or (fname.startswith(_STDLIB_DIR) and not
                                                       ("site-packages" in fname or "dist-packages" in fname)):
            continue
        out.append((fname, fs.lineno, fs.name, fs.line))
    return out


def parse_location(text: str) -> tuple:
    """``"file.py:12 in fn"`` (ember's user-stack strings) → ``(file, 12, fn, None)``."""
    where, _, name = text.partition(" in ")
    fname, _, line = where.rpartition(":")
    try:
        return (fname, int(line), name or "?", None)
    except ValueError:
        return (where, 0, name or "?", None)


def _relative(filename: str) -> str:
    root = os.path.dirname(_EMBER_DIR.rstrip(os.sep)) + os.sep
    return filename[len(root):] if filename.startswith(root) else os.path.basename(filename)
