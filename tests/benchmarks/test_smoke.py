"""Smoke test of the benchmark runner: tiny MLP and the built-in GPT, backend eager,
ember and torch.compile, a few iterations each, every measurement in a fresh process.

torch rows must succeed and match eager. ember rows must either succeed and
match eager, or record why they did not (a failed/fallback row with a reason,
never a crash of the runner).
"""
from __future__ import annotations

import json
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import run  # noqa: E402
from benchmarks.zoo import get_model, list_models  # noqa: E402

MODELS = ["mlp", "nanogpt"]


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "rows.json"
    rc = run.main(["--models", ",".join(MODELS), "--backends", "eager",
                   "--compilers", "ember,torch", "--mode", "train", "--iters", "5",
                   "--warmup", "1", "--timeout", "120", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["meta"]["torch"]
    return data["rows"]


def test_rows_produced(rows):
    got = {(r["model"], r["compiler"]) for r in rows}
    assert got == {(m, c) for m in MODELS for c in ("ember", "torch")}


def test_torch_rows_ok_and_correct(rows):
    for r in rows:
        if r["compiler"] != "torch":
            continue
        assert r["status"] == "ok", r
        assert r["correct"], r
        assert r["max_diff_out"] <= 1e-4 and r["max_diff_grad"] <= 1e-4, r
        assert r["graphs"] >= 1 and r["graph_breaks"] == 0, r
        assert r["step_ms"] > 0 and r["eager_ms"] > 0 and r["compile_s"] >= 0, r
        assert r["peak_rss_mb"] > 0


def test_ember_rows_correct_or_explained(rows):
    for r in rows:
        if r["compiler"] != "ember":
            continue
        if r["status"] == "ok":
            assert r["correct"], r
            assert r["max_diff_out"] <= 1e-4 and r["max_diff_grad"] <= 1e-4, r
            assert r["graphs"] >= 1, r
        else:
            assert r["status"] in ("failed", "fallback", "timeout"), r
            assert r.get("reason"), r


def test_table_formats_failed_rows():
    rows = [{"model": "mlp", "mode": "train", "backend": "eager", "compiler": "ember",
             "status": "failed", "phase": "compile", "reason": "boom"},
            {"model": "mlp", "mode": "train", "backend": "eager", "compiler": "torch",
             "status": "ok", "compile_s": 0.1, "step_ms": 1.0, "speedup": 1.0, "graphs": 1,
             "graph_breaks": 0, "recompiles": 1, "peak_rss_mb": 300.0, "max_diff_out": 0.0,
             "max_diff_grad": 0.0, "max_diff_buffers": 0.0, "correct": True}]
    text = run.format_table(rows)
    assert "FAIL" in text and "boom" in text


def test_zoo_specs_build():
    # cheap: every spec object is constructible without building HF models
    for name in list_models():
        spec = get_model(name)
        assert spec.name == name and callable(spec.make_model)
