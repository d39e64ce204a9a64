"""Which autocast state the backward is traced under: ``backward_pass_autocast``.

The joint graph traces the backward right after the forward, so by default it
inherits whatever autocast state is ambient at that point — the state the
compiled function was *called* under at compile time (``"same_as_forward"``,
torch's default too). Autocast regions *inside* the graph
(``torch.amp._enter_autocast`` / ``_exit_autocast`` nodes) are closed by then
and do not leak into the backward; their casts are recorded ops whose
backward casts the gradients back, as in eager.

Accepted values (``ember.config.backward_pass_autocast``, or the
``EMBER_BACKWARD_PASS_AUTOCAST`` environment variable for the string forms):

``"same_as_forward"``
    trace the backward under the ambient autocast state (no change).
``"off"``
    disable autocast for every device type while tracing the backward.
``"device_type=cpu,dtype=bfloat16"`` (``key=value`` pairs; ``;`` separates several contexts)
    disable autocast, then enter ``torch.autocast(**kwargs)`` for each context.
    Also accepted as a dict or a list of dicts of ``torch.autocast`` kwargs,
    e.g. ``{"device_type": "cpu", "dtype": torch.bfloat16}``.
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch

from ember.aot.errors import AOTCompileError

_DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu")


def _parse_value(key: str, text: str) -> Any:
    text = text.strip()
    if key == "dtype":
        name = text.removeprefix("torch.")
        dtype = getattr(torch, name, None)
        if not isinstance(dtype, torch.dtype):
            raise AOTCompileError(f"backward_pass_autocast: unknown dtype {text!r}")
        return dtype
    if text.lower() in ("true", "false", "1", "0"):
        return text.lower() in ("true", "1")
    return text


def parse_backward_pass_autocast(value) -> str | list[dict]:
    """``"same_as_forward"``, ``"off"``, or a list of ``torch.autocast`` kwargs dicts."""
    if value is None:
        return "same_as_forward"
    if isinstance(value, dict):
        return [dict(value)]
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, dict) for v in value):
            raise AOTCompileError(f"backward_pass_autocast: expected dicts of autocast kwargs, got {value!r}")
        return [dict(v) for v in value]
    if not isinstance(value, str):
        raise AOTCompileError(f"backward_pass_autocast: cannot interpret {value!r}")
    text = value.strip()
    if text in ("same_as_forward", "off"):
        return text
    contexts = []
    for part in text.split(";"):
        if not part.strip():
            continue
        kwargs = {}
        for item in part.split(","):
            if "=" not in item:
                raise AOTCompileError(
                    f"backward_pass_autocast: expected 'same_as_forward', 'off' or key=value pairs, got {value!r}")
            k, v = item.split("=", 1)
            kwargs[k.strip()] = _parse_value(k.strip(), v)
        if "device_type" not in kwargs:
            raise AOTCompileError(f"backward_pass_autocast: {part!r} names no device_type")
        contexts.append(kwargs)
    return contexts


def _disable_all() -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    for dt in _DEVICE_TYPES:
        if torch.amp.is_autocast_available(dt):
            stack.enter_context(torch.autocast(dt, enabled=False))
    return stack


@contextlib.contextmanager
def backward_autocast(setting="same_as_forward"):
    """Enter the autocast state the backward is traced under."""
    parsed = parse_backward_pass_autocast(setting)
    if parsed == "same_as_forward":
        yield
        return
    with _disable_all(), contextlib.ExitStack() as stack:
        if parsed != "off":
            for kwargs in parsed:
                stack.enter_context(torch.autocast(**kwargs))
        yield
