"""Import ``ember.bytecode`` even while the top-level ``ember`` package is
incomplete (other layers are being written concurrently; ``ember/__init__``
imports modules such as ``ember.api`` that may not exist yet).

ember.bytecode is standard-library only and does not depend on anything in
``ember/__init__``, so when that import fails we register a bare namespace
for ``ember`` and import the subpackage directly.  Once the top-level package
imports cleanly this is a no-op.
"""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

EMBER_DIR = Path(__file__).resolve().parents[2] / "ember"


def import_bytecode_package(bare: bool = False):
    """Import ember.bytecode; ``bare``: without running ``ember/__init__`` (which imports torch),
    to check that the bytecode layer itself never needs torch."""
    if bare:
        return _import_bare()
    try:
        return importlib.import_module("ember.bytecode")
    except ImportError as exc:
        if (exc.name or "").startswith("ember.bytecode"):
            raise  # a real error in our own package
    return _import_bare()


def _import_bare():
    for name in [n for n in sys.modules if n == "ember" or n.startswith("ember.")]:
        del sys.modules[name]
    shell = types.ModuleType("ember")
    shell.__path__ = [str(EMBER_DIR)]
    shell.__file__ = str(EMBER_DIR / "__init__.py")
    sys.modules["ember"] = shell
    return importlib.import_module("ember.bytecode")
