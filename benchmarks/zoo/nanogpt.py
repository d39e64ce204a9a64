"""nanoGPT for the zoo: re-exports ember's built-in demo model (ember/report/demo_model.py).

The model lives inside the ``ember`` package so that ``python -m ember demo``
works from an installed package. If ``ember`` cannot be imported (its top
level is still being written, or is broken), the same file is loaded by path so
that ``--compilers torch`` benchmarks keep working.
"""
from __future__ import annotations

import importlib.util
import pathlib
import sys

try:
    from ember.report.demo_model import (  # noqa: F401
        GPT, GPTConfig, CausalSelfAttention, MLP, Block, make_model, make_batch, train_step)
except Exception:  # noqa: BLE001 - any failure importing ember's top level
    _path = pathlib.Path(__file__).resolve().parents[2] / "ember" / "report" / "demo_model.py"
    _spec = importlib.util.spec_from_file_location("_ember_demo_model", _path)
    _mod = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _mod
    _spec.loader.exec_module(_mod)
    GPT, GPTConfig, CausalSelfAttention, MLP, Block = (
        _mod.GPT, _mod.GPTConfig, _mod.CausalSelfAttention, _mod.MLP, _mod.Block)
    make_model, make_batch, train_step = _mod.make_model, _mod.make_batch, _mod.train_step

__all__ = ["GPT", "GPTConfig", "CausalSelfAttention", "MLP", "Block", "make_model",
           "make_batch", "train_step"]
