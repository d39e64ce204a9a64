"""ember.report: compiled_functions(), EMBER_LOGS parsing, python -m ember."""
import logging
import subprocess
import sys

import pytest
import torch

import ember
from ember.report import compiled_functions
from ember.report.logs import set_logs


def with_break(x):
    y = x.sin()
    print("break")
    return y.cos()


def test_compiled_functions_reports_entries_graphs_and_breaks():
    ember.compile(with_break)(torch.ones(2))
    reports = {r.label: r for r in compiled_functions()}
    top = reports["with_break"]
    assert top.guard_counts and top.graph_node_counts
    assert len(top.break_reasons) == 1 and "print" in top.break_reasons[0]
    assert any(label.startswith("with_break:resume_at_") for label in reports)
    ember.reset()
    assert compiled_functions() == []  # reset forgets every entry, resume functions' too


def test_set_logs_enables_named_artifacts_and_rejects_unknown():
    try:
        assert set_logs("recompiles,graph_breaks") == ["recompiles", "graph_breaks"]
        assert logging.getLogger("ember.recompiles").level == logging.DEBUG
        assert set_logs("+all") == ["graph_breaks", "recompiles", "guards", "graph", "graph_code", "aot_graphs",
                                    "bytecode"]
        with pytest.raises(ValueError, match="unknown EMBER_LOGS artifact"):
            set_logs("graphz")
    finally:
        set_logs("")


def test_cli_without_command_prints_help():
    out = subprocess.run([sys.executable, "-m", "ember"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "demo" in out.stdout


def test_explain_shows_resume_function_code():
    out = ember.explain(with_break)(torch.ones(2))
    assert len(out.resume_code) == 1
    name, code = out.resume_code[0]
    assert name.startswith("with_break.resume_at_")
    assert "LOAD_FAST" in code and "cos" in code  # the disassembly of the rest of the function
    assert "Resume function" in str(out)
