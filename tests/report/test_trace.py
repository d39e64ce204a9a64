"""EMBER_TRACE: the structured trace (torch's TORCH_TRACE format) and stock tlparse rendering it."""
import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import torch

import ember
from ember import trace_log
from ember.report import trace


@pytest.fixture
def tracing(tmp_path):
    """Tracing on (records kept in memory) for one test, off afterwards."""
    d = tmp_path / "trace"
    trace.enable(str(d), keep=True)
    try:
        yield d
    finally:
        trace.disable()


def breaks_and_recompiles(x, y):
    a = x.sin() + y
    print("in the middle")
    return a.cos() * 2


def run_program(fn, backend="aot_eager"):
    """Three calls: sizes 4, then 5 (a recompile of the function and of its resume function)."""
    compiled = ember.compile(fn, backend=backend)
    outs = []
    for n in (4, 5):
        x = torch.randn(n, requires_grad=True)
        y = torch.randn(n)
        got = compiled(x, y)
        got.sum().backward()
        x2 = x.detach().clone().requires_grad_(True)
        want = fn(x2, y)
        want.sum().backward()
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x.grad, x2.grad)
        outs.append(got)
    return outs


def test_trace_records_compiles_breaks_recompiles_graphs_and_metrics(tracing, capsys):
    run_program(breaks_and_recompiles)
    recs = trace.records()
    by_name = {}
    for r in recs:
        by_name.setdefault(r.name, []).append(r)
    # two functions (the original and its resume function), each compiled twice (sizes 4 and 5)
    starts = by_name["dynamo_start"]
    assert [r.compile_id[:2] for r in starts] == [(0, 0), (1, 0), (0, 1), (1, 1)]
    assert [r.metadata["stack"][-1]["name"] for r in starts[:2]] == \
        ["breaks_and_recompiles", starts[1].metadata["stack"][-1]["name"]]
    assert starts[1].metadata["stack"][-1]["name"].startswith("resume_at_")
    # the user's frame that made the call is on the stack (file names interned in "str" records)
    strings = {}
    with open(trace_log.writer.path) as f:
        for line in f:
            if '{"str": ' in line:
                import json
                s, n = json.loads(line.split("] ", 1)[1])["str"]
                strings[n] = s
    caller = starts[0].metadata["stack"][-2]
    assert strings[caller["filename"]] == __file__ and caller["name"] == "run_program"

    artifacts = {}
    for r in by_name["artifact"]:
        artifacts.setdefault(r.metadata["name"], []).append(r)
    breaks = artifacts["dynamo_graph_break_reason"]
    assert len(breaks) == 2 and all(r.compile_id[2] == 0 for r in breaks)  # in attempt 0 ...
    assert "print" in breaks[0].payload and 'print("in the middle")' in breaks[0].payload
    assert f'File "{__file__}"' in breaks[0].payload
    graphs = by_name["dynamo_output_graph"]
    assert graphs[0].compile_id == (0, 0, 1)  # ... and the graph in the re-trace, attempt 1
    assert "sin" in graphs[0].payload and graphs[0].metadata["sizes"]
    recompiles = artifacts["recompile_reasons"]
    assert [r.compile_id[:2] for r in recompiles] == [(0, 1), (1, 1)]
    assert "size=[5]" in recompiles[0].payload and "0/0:" in recompiles[0].payload
    for name in ("aot_joint_graph", "aot_forward_graph", "aot_backward_graph"):
        assert len(by_name[name]) == 4 and "aten" in by_name[name][0].payload
    guards = by_name["dynamo_guards"]
    assert len(guards) == 4 and "L['x']" in guards[0].payload
    assert any(n.endswith("_ORIGINAL_BYTECODE") for n in artifacts)  # the resume functions' code
    assert any(n.endswith("_RESIDUAL_BYTECODE") for n in artifacts)
    assert any(n.endswith("_ENTRY_SOURCE") for n in artifacts)

    metrics = by_name["compilation_metrics"]
    assert len(metrics) == 4
    first = metrics[0].metadata
    assert first["co_name"] == "breaks_and_recompiles" and first["compile_id"] == "0/0"
    assert first["graph_count"] == 1 and first["graph_break_count"] == 1
    assert len(first["restart_reasons"]) == 1 and "print" in first["restart_reasons"][0]
    assert first["entire_frame_compile_time_s"] > 0 and first["fail_type"] is None
    assert set(first["ember_phase_times_s"]) >= {"capture", "backend", "aot"}
    assert first["guard_count"] > 0 and first["graph_op_count"] >= 2
    resume = metrics[1].metadata
    assert resume["is_resume_function"] and resume["graph_break_count"] == 0

    # the file holds the same records (read back, payloads and stacks resolved)
    back = trace.read(trace_log.writer.path)
    assert [r.name for r in back] == [r.name for r in recs if r.name != "str"]
    assert back[0].payload == recs[0].payload if recs[0].payload else True
    assert strings[caller["filename"]] == next(r for r in back if r.name == "dynamo_start").metadata["stack"][-2]["filename"]


def test_steady_state_calls_write_nothing(tracing):
    compiled = ember.compile(breaks_and_recompiles, backend="eager")
    x, y = torch.randn(3), torch.randn(3)
    compiled(x, y)
    n = len(trace.records())
    for _ in range(20):
        compiled(x, y)
    assert len(trace.records()) == n > 0  # tracing hooks sit on compile paths only


def test_tracing_off_writes_nothing(tmp_path):
    assert trace_log.writer is None and not trace.enabled()
    ember.compile(breaks_and_recompiles)(torch.randn(3), torch.randn(3))
    assert trace_log.writer is None and not list(tmp_path.iterdir())


def test_config_trace_switches_at_the_next_compile(tmp_path):
    d = tmp_path / "via_config"
    try:
        with ember.config.patch(trace=str(d)):
            ember.compile(lambda x: x.sin() + 1)(torch.randn(2))
            assert trace.enabled() and len(trace.log_files(str(d))) == 1
        ember.compile(lambda x: x.cos() + 1)(torch.randn(2))  # setting back to '': off again
        assert not trace.enabled()
    finally:
        trace.disable()
    names = [r.name for r in trace.read(trace.log_files(str(d))[0])]
    assert names.count("dynamo_start") == 1 and "compilation_metrics" in names


def test_internal_error_is_a_failed_compile_in_the_metrics(tracing):
    def f(x):
        return x * 2

    with ember.config.patch(strict=False, inject_fault="capture"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(ember.compile(f)(torch.ones(2)), torch.ones(2) * 2)
    m = [r for r in trace.records() if r.name == "compilation_metrics"]
    assert len(m) == 1 and m[0].metadata["fail_type"] == "InjectedFault"
    assert "capture" in m[0].metadata["fail_reason"]


def test_inference_graph_and_guard_records(tracing):
    with torch.no_grad():
        ember.compile(lambda x: (x @ x).relu(), backend="aot_eager")(torch.randn(3, 3))
    names = [r.name for r in trace.records()]
    assert "aot_inference_graph" in names and "aot_forward_graph" not in names
    guards = next(r for r in trace.records() if r.name == "dynamo_guards")
    import json
    rows = json.loads(guards.payload)
    assert rows and all(set(row) >= {"code", "stack", "user_stack", "guard", "kind"} for row in rows)
    # each guard's provenance (the line that made the trace depend on it) rides along: in the code
    # as a comment (what tlparse shows), as a user stack, and as plain data
    tensor = next(row for row in rows if row["kind"] == "TENSOR_MATCH")
    assert tensor["provenance"]["file"] == __file__ and tensor["provenance"]["function"].endswith("<lambda>")
    assert tensor["code"].startswith(tensor["guard"] + "  # " + __file__)
    assert tensor["user_stack"][-1]["line"] == tensor["provenance"]["line"]


PROGRAM = textwrap.dedent('''
    import torch, ember

    def f(x, y):
        a = x.sin() + y
        print("in the middle")
        return a.cos() * 2

    cf = ember.compile(f, backend="aot_eager")
    for n in (4, 5):
        x = torch.randn(n, requires_grad=True)
        cf(x, torch.randn(n)).sum().backward()
''')


def _tlparse() -> str | None:
    exe = Path(sys.executable).with_name("tlparse")
    return str(exe) if exe.exists() else shutil.which("tlparse")


@pytest.mark.skipif(_tlparse() is None, reason="tlparse is not installed (pip install tlparse; in the test extras)")
def test_stock_tlparse_renders_the_trace_with_recompile_and_break(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    trace_dir = tmp_path / "trace"
    env = {**os.environ, "EMBER_TRACE": str(trace_dir)}
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    logs = trace.log_files(str(trace_dir))
    assert len(logs) == 1
    out = tmp_path / "tl_out"
    # --strict: every line is a record tlparse knows; --strict-compile-id: each names its compile
    parsed = subprocess.run([_tlparse(), logs[0], "-o", str(out), "--overwrite", "--no-browser", "--strict",
                             "--strict-compile-id"], capture_output=True, text=True, timeout=300)
    assert parsed.returncode == 0, parsed.stdout + parsed.stderr
    index = (out / "index.html").read_text()
    # the compiles, by compile id, with the stack of the user's call
    for cid in ("[0/0]", "[0/1]", "[1/0]", "[1/1]"):
        assert f"'#{cid}'" in index
    assert "prog.py" in index and "in f" in index
    # the recompile and the graph break are named, and the graphs are there
    assert "recompile_reasons" in index and "dynamo_graph_break_reason" in index
    for graph in ("dynamo_output_graph", "aot_joint_graph", "aot_forward_graph", "aot_backward_graph",
                  "dynamo_guards", "compilation_metrics"):
        assert graph in index, graph
    assert "2 restart(s)" in index
    restarts = (out / "failures_and_restarts.html").read_text()
    assert "print" in restarts and "prog.py:6" in restarts
    reasons = next(out.glob("-_0_1_0/recompile_reasons_*.json")).read_text()
    assert "size=[5]" in reasons
    graph = next(out.glob("-_0_0_1/dynamo_output_graph_*.txt")).read_text()
    assert "sin" in graph and "f32[4]" in graph
    metrics = next(out.glob("-_0_0_1/compilation_metrics_*.html")).read_text()
    assert "Restart Reasons" in metrics and "print" in metrics


def test_recompile_limit_is_a_failed_compile(tracing):
    def f(x, n):
        return x * n

    compiled = ember.compile(f, dynamic=False)
    with ember.config.patch(recompile_limit=2), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in (2, 3, 4):
            torch.testing.assert_close(compiled(torch.ones(2), n), torch.ones(2) * n)
    m = [r.metadata for r in trace.records() if r.name == "compilation_metrics"]
    assert [x["compile_id"] for x in m] == ["0/0", "0/1", "0/2"]
    assert m[1]["fail_type"] is None and m[2]["fail_type"] == "RecompileLimitExceeded"
    reasons = [r.payload for r in trace.records() if r.name == "artifact" and r.metadata["name"] == "recompile_reasons"]
    assert len(reasons) == 2 and "L['n'] == 3" in reasons[1] and "(now: 4)" in reasons[1]
