"""Make ``ember.bytecode`` importable for these tests (see _ember_import)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ember_import import import_bytecode_package  # noqa: E402

import_bytecode_package()
