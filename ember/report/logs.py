"""``EMBER_LOGS``: verbose logging by artifact, in the style of ``TORCH_LOGS``.

    EMBER_LOGS=graph_breaks,recompiles python train.py
    EMBER_LOGS=+all python train.py

Artifacts: ``graph_breaks`` (each break / eager fallback with its reason and
line), ``recompiles`` (which guard failed, with the new value), ``guards`` (the
guards of each new cache entry), ``graph`` (each captured fx graph; ``graph_code``,
torch's name, is the same), ``aot_graphs`` (the forward and backward, or inference,
graphs of the AOT layer), ``bytecode`` (the generated entry function and residual
bytecode). These are ``TORCH_LOGS``'s names for the same artifacts, so
``EMBER_LOGS=graph_breaks,recompiles,guards,graph_code,aot_graphs,bytecode`` works as
``TORCH_LOGS`` does. Everything goes through the standard ``logging`` module under the
``ember.<artifact>`` loggers, so the usual handlers and levels apply; ``set_logs``
only attaches a stderr handler.
"""
from __future__ import annotations

import logging
import sys

#: artifact name -> the logger it enables (``ember.<name>``)
LOGGERS = {"graph_breaks": "graph_breaks", "recompiles": "recompiles", "guards": "guards",
           "graph": "graph", "graph_code": "graph", "aot_graphs": "aot_graphs", "bytecode": "bytecode"}
ARTIFACTS = tuple(LOGGERS)
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
    wanted = {LOGGERS[n] for n in names}
    for logger_name in sorted(set(LOGGERS.values())):
        logger = logging.getLogger(f"ember.{logger_name}")
        if logger_name in wanted:
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
