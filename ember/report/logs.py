"""``EMBER_LOGS``: verbose logging by artifact, in the style of ``TORCH_LOGS``.

    EMBER_LOGS=graph_breaks,recompiles python train.py
    EMBER_LOGS=+all python train.py

Artifacts: ``graph_breaks`` (each break / eager fallback with its reason and
line), ``recompiles`` (which guard failed, with the new value), ``guards`` (the
guards of each new cache entry), ``graph`` (each captured fx graph), ``bytecode``
(the generated entry function and residual bytecode). Everything goes through
the standard ``logging`` module under the ``ember.<artifact>`` loggers, so the
usual handlers and levels apply; ``set_logs`` only attaches a stderr handler.
"""
from __future__ import annotations

import logging
import sys

ARTIFACTS = ("graph_breaks", "recompiles", "guards", "graph", "bytecode")
_handler: logging.Handler | None = None


def set_logs(spec: str) -> list[str]:
    """Enable the artifacts named in ``spec`` (comma separated; ``+all``/``all`` for every one)."""
    global _handler
    names = [s.strip().lstrip("+") for s in spec.split(",") if s.strip()]
    if "all" in names:
        names = list(ARTIFACTS)
    unknown = [n for n in names if n not in ARTIFACTS]
    if unknown:
        raise ValueError(f"unknown EMBER_LOGS artifact(s) {unknown}; known: {', '.join(ARTIFACTS)}, all")
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[ember %(name)s] %(message)s"))
    for name in ARTIFACTS:
        logger = logging.getLogger(f"ember.{name}")
        if name in names:
            logger.setLevel(logging.DEBUG)
            if _handler not in logger.handlers:
                logger.addHandler(_handler)
            logger.propagate = False
        else:
            logger.setLevel(logging.NOTSET)
            logger.propagate = True
            if _handler in logger.handlers:
                logger.removeHandler(_handler)
    return names
