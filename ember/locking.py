"""The compile lock: one thread at a time traces and compiles.

Tracing uses process-wide state in torch (``make_fx``'s patcher of
``torch.fx``, the fake modes' memo tables, Inductor's caches), so two threads
compiling at once corrupt each other (``CURRENT_PATCHER is None``). Every
compilation — a frame's capture and backend compile, an AOT variant compiled
at call time, a backward compiled at the first ``backward()`` — holds this
re-entrant lock. Running compiled code never takes it, so cached calls stay
lock-free.

A leaf module (standard library only) so that every layer may use it.
"""
from __future__ import annotations

import threading

compile_lock = threading.RLock()
