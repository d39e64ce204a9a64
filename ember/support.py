"""Which Python and torch versions ember runs on, and the one message for the others.

ember's capture reads CPython bytecode, whose instructions change with every minor release, and
uses torch internals (fake tensors, functionalization, ShapeEnv) that change between torch
releases. On a version it was not tested on it would not merely be slower: it could trace wrong
bytecode or fail deep inside torch. So ``ember.compile`` refuses such a version up front, with
one message naming the supported ones, instead of running everything eagerly in silence.

``import ember`` itself works on any version (the bytecode layer is tested on newer Pythons before
the interpreter supports them). An untested torch gets one warning naming the supported versions
and ember goes on (a torch release changes less than a Python one, and trying a new release must
stay possible); ``EMBER_STRICT_VERSIONS=1`` makes it an error too.
"""
from __future__ import annotations

import os
import sys
import warnings

__all__ = ["SUPPORTED_PYTHON", "SUPPORTED_TORCH", "UnsupportedVersion", "check_supported", "describe"]

#: CPython minor versions whose bytecode the interpreter and code generator handle
SUPPORTED_PYTHON: tuple[tuple[int, int], ...] = ((3, 11), (3, 12), (3, 13))
#: torch minor versions ember is tested with (pyproject.toml pins the same)
SUPPORTED_TORCH: tuple[tuple[int, int], ...] = ((2, 13),)


class UnsupportedVersion(RuntimeError):
    """ember.compile was called on a Python or torch version ember does not support."""


def _dotted(versions) -> str:
    return ", ".join(".".join(map(str, v)) for v in versions)


def describe() -> str:
    return f"Python {_dotted(SUPPORTED_PYTHON)} with torch {_dotted(SUPPORTED_TORCH)}"


def _torch_minor(version: str) -> tuple[int, int] | None:
    try:
        major, minor = version.split("+")[0].split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return None


_warned_torch = False


def check_supported(python: tuple[int, int] | None = None, torch_version: str | None = None) -> None:
    """Raise :class:`UnsupportedVersion` unless this Python is supported; warn once for an
    untested torch (raise with ``EMBER_STRICT_VERSIONS=1``)."""
    global _warned_torch
    python = tuple(python or sys.version_info[:2])
    if python not in SUPPORTED_PYTHON:
        raise UnsupportedVersion(
            f"ember does not support Python {python[0]}.{python[1]}: it supports {describe()} "
            f"(the bytecode it compiles differs between Python versions)")
    if torch_version is None:
        import torch
        torch_version = torch.__version__
    if _torch_minor(torch_version) in SUPPORTED_TORCH:
        return
    message = f"ember is not tested with torch {torch_version}: it supports {describe()}"
    if os.environ.get("EMBER_STRICT_VERSIONS", "") not in ("", "0"):
        raise UnsupportedVersion(message)
    if not _warned_torch:
        _warned_torch = True
        warnings.warn(message + "; compiling anyway", stacklevel=3)
