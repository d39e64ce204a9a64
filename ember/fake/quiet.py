"""Silence fake tensors' error log for exceptions the trace handles itself.

When an op fails on fake tensors (``torch.ones(3) + torch.ones(4)`` inside a user's
``try``), torch's fake mode logs the exception at ERROR level before raising it. The
trace turns that exception into the user's own (it propagates, or the user catches
it), exactly as eager raises it; the log would print a traceback for an error the
program handled. While ember traces, those records are dropped.
"""
from __future__ import annotations

import contextlib
import logging
import threading

_state = threading.local()
_MESSAGE = "failed while attempting to run meta"


class _DuringTrace(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(_state, "depth", 0) and str(record.msg).startswith(_MESSAGE):
            return False
        return True


_installed = False


def _install() -> None:
    global _installed
    if not _installed:
        logging.getLogger("torch._subclasses.fake_tensor").addFilter(_DuringTrace())
        _installed = True


@contextlib.contextmanager
def quiet_meta_errors():
    _install()
    _state.depth = getattr(_state, "depth", 0) + 1
    try:
        yield
    finally:
        _state.depth -= 1
