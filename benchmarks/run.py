"""The zoo benchmark: ember vs torch.compile, one fresh subprocess per measurement.

    python -m benchmarks.run                                  # all models, eager+aot_eager, train
    python -m benchmarks.run --models nanogpt,gpt2 --backends inductor --mode train,infer
    python -m benchmarks.run --compilers torch --json /tmp/out.json

Each row (model × mode × backend × compiler) runs ``benchmarks.measure`` in a
new Python process with ``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`` and its own
empty ``TORCHINDUCTOR_CACHE_DIR``, so no compiler reuses another's work. A
process that fails or times out becomes a row with the reason. Prints one
table (ember next to torch, with ember/torch ratios) and writes all rows as JSON
to ``benchmarks/results/`` (or ``--json``). Columns: docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import pathlib
import platform
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_BACKENDS = "eager,aot_eager"


def fresh_env(cache_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    env["TRITON_CACHE_DIR"] = os.path.join(cache_dir, "triton")
    env["PYTHONWARNINGS"] = "ignore"
    env["TRANSFORMERS_VERBOSITY"] = "error"
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def run_module_fresh(module: str, args: list[str], timeout: float) -> tuple[dict | None, str]:
    """Run ``python -m module args --out F`` in a fresh process with fresh caches.

    Returns (the JSON the process wrote, or None; a failure reason or "").
    """
    with tempfile.TemporaryDirectory(prefix="ember-bench-") as tmp:
        out = os.path.join(tmp, "row.json")
        cmd = [sys.executable, "-m", module, *args, "--out", out]
        proc = subprocess.Popen(cmd, cwd=str(ROOT), env=fresh_env(os.path.join(tmp, "cache")),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the child and any compile workers it started
            proc.communicate()
            return None, f"timeout after {timeout:g}s"
        if os.path.exists(out):
            with open(out) as f:
                return json.load(f), ""
        tail = [line for line in (err or "").strip().splitlines() if line.strip()][-3:]
        return None, f"exit code {proc.returncode}: " + " | ".join(tail)[-400:]


def run_row(model: str, compiler: str, backend: str, mode: str, *, target: str = "model",
            iters: int = 20, warmup: int = 3, timeout: float = 300.0,
            threads: int = 1, device: str = "cpu", batch_size: int | None = None) -> dict[str, Any]:
    args = ["--device", device, *(["--batch-size", str(batch_size)] if batch_size else []),"--model", model, "--compiler", compiler, "--backend", backend, "--mode", mode,
            "--target", target, "--iters", str(iters), "--warmup", str(warmup),
            "--threads", str(threads)]
    t = time.perf_counter()
    row, why = run_module_fresh("benchmarks.measure", args, timeout)
    if row is None:
        row = {"model": model, "compiler": compiler, "backend": backend, "mode": mode,
               "target": target, "status": "timeout" if why.startswith("timeout") else "failed",
               "phase": "process", "reason": why}
    row["wall_s"] = round(time.perf_counter() - t, 2)
    return row


# ---------------------------------------------------------------------------- table

def _fmt(v, spec: str = ".3g") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        return format(v, spec)
    return str(v)


def _ratio(e, t) -> str:
    if isinstance(e, (int, float)) and isinstance(t, (int, float)) and t > 0:
        return format(e / t, ".2f")
    return "-"


def format_table(rows: list[dict[str, Any]]) -> str:
    """One line per (model, mode, backend): ember | torch | ember/torch for each metric."""
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        groups.setdefault((r["model"], r["mode"], r["backend"]), {})[r["compiler"]] = r
    cols = [("compile_s", "compile s", ".3g", True), ("step_ms", "step ms", ".3g", True),
            ("speedup", "speedup", ".2f", False), ("graphs", "graphs", "", False),
            ("graph_breaks", "breaks", "", False), ("recompiles", "recomp", "", False),
            ("peak_rss_mb", "peak MB", ".0f", True), ("max_diff", "max diff", ".1e", False)]
    head1 = f"{'model':<13}{'mode':<6}{'backend':<10}"
    head2 = " " * len(head1)
    for key, title, _, ratio in cols:
        cw = 8 if key == "max_diff" else 6
        w = 3 * cw + 2 if ratio else 2 * cw + 2
        head1 += f"| {title:<{w - 2}}"
        head2 += "| " + (f"{'ember':>{cw}}{'torch':>{cw}}{'e/t':>{cw}}" if ratio else
                         f"{'ember':>{cw}}{'torch':>{cw}}").ljust(w - 2)
    lines = [head1 + "| ok", head2 + "| e/t", "-" * (len(head1) + 6)]
    notes: list[str] = []
    ok_ratios: dict[str, list[float]] = {"compile_s": [], "step_ms": []}
    for (model, mode, backend), by in groups.items():
        e, t = by.get("ember", {}), by.get("torch", {})
        for r in (e, t):
            if r:
                r["max_diff"] = max(r.get("max_diff_out", 0) or 0, r.get("max_diff_grad", 0) or 0,
                                    r.get("max_diff_buffers", 0) or 0) if r.get("status") == "ok" else None
        line = f"{model:<13}{mode:<6}{backend:<10}"
        for key, _, spec, ratio in cols:
            def cell(r):
                if not r:
                    return "."
                if r.get("status") != "ok":
                    return ({"fallback": "FB", "timeout": "T/O"}.get(r.get("status"), "FAIL")
                            if key == "compile_s" else "")
                return _fmt(r.get(key), spec) if spec else _fmt(r.get(key))
            cw = 8 if key == "max_diff" else 6
            w = 3 * cw + 2 if ratio else 2 * cw + 2
            text = f"{cell(e):>{cw}}{cell(t):>{cw}}"
            if ratio:
                both = e.get("status") == "ok" and t.get("status") == "ok"
                rt = _ratio(e.get(key), t.get(key)) if both else "-"
                text += f"{rt:>{cw}}"
                if both and key in ok_ratios and rt != "-":
                    ok_ratios[key].append(float(e[key]) / float(t[key]) if t[key] else float("nan"))
            line += "| " + text.ljust(w - 2)
        oks = []
        for r in (e, t):
            if not r:
                oks.append(".")
            elif r.get("status") != "ok":
                oks.append({"fallback": "fb"}.get(r.get("status"), "x"))
                notes.append(f"{r['compiler']} {model} {mode} {backend}: {r.get('status')} in "
                             f"{r.get('phase', '?')}: {r.get('reason', '')}")
            else:
                oks.append("y" if r.get("correct") else "WRONG")
                if not r.get("correct"):
                    notes.append(f"{r['compiler']} {model} {mode} {backend}: differs from eager "
                                 f"(out {_fmt(r.get('max_diff_out'))}, grad "
                                 f"{_fmt(r.get('max_diff_grad'))}, buffers "
                                 f"{_fmt(r.get('max_diff_buffers'))})")
                if r.get("note"):
                    notes.append(f"{r['compiler']} {model} {mode} {backend}: {r['note']}")
        lines.append(line + "| " + "/".join(oks))
    for key, vals in ok_ratios.items():
        vals = [v for v in vals if v > 0 and not math.isnan(v)]
        if vals:
            gm = math.exp(sum(math.log(v) for v in vals) / len(vals))
            lines.append(f"geomean ember/torch {key}: {gm:.2f} over {len(vals)} row(s)")
    if notes:
        lines.append("")
        lines.extend(f"[{i + 1}] {n}" for i, n in enumerate(notes))
    return "\n".join(lines)


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=str(ROOT),
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        return ""


def main(argv: list[str] | None = None) -> int:
    from benchmarks.zoo import list_models
    p = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(list_models()),
                   help=f"comma-separated zoo models (default: all: {','.join(list_models())})")
    p.add_argument("--backends", default=DEFAULT_BACKENDS, help="eager,aot_eager,inductor")
    p.add_argument("--mode", default="train", help="train, infer or train,infer")
    p.add_argument("--compilers", default="ember,torch", help="ember,torch")
    p.add_argument("--target", default="model", choices=["model", "step"],
                   help="compile the module (default) or the whole train/infer step function")
    p.add_argument("--iters", type=int, default=20, help="timed calls per measurement")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads in each measurement (0: torch's default)")
    p.add_argument("--device", default="cpu", help="cpu or cuda (timed calls end with a synchronize)")
    p.add_argument("--batch-size", type=int, default=None, help="instead of each model's own")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per subprocess")
    p.add_argument("--json", default=None, help="write rows here (default benchmarks/results/)")
    a = p.parse_args(argv)

    split = lambda s: [x.strip() for x in s.split(",") if x.strip()]  # noqa: E731
    models, backends, modes, compilers = split(a.models), split(a.backends), split(a.mode), split(a.compilers)
    for m in models:
        if m not in list_models():
            p.error(f"unknown model {m!r}; known: {','.join(list_models())}")
    for c in compilers:
        if c not in ("ember", "torch"):
            p.error(f"unknown compiler {c!r}")
    plan = [(m, mode, b, c) for m in models for mode in modes for b in backends for c in compilers]
    print(f"ember benchmarks: {len(plan)} measurement(s), each in a fresh process "
          f"(timeout {a.timeout:g}s)", flush=True)
    rows = []
    start = time.perf_counter()
    for i, (m, mode, b, c) in enumerate(plan):
        row = run_row(m, c, b, mode, target=a.target, iters=a.iters, warmup=a.warmup,
                      timeout=a.timeout, threads=a.threads, device=a.device,
                      batch_size=a.batch_size)
        rows.append(row)
        status = row["status"]
        detail = (f"compile {row.get('compile_s')}s, step {row.get('step_ms')}ms, "
                  f"correct={row.get('correct')}") if status == "ok" else row.get("reason", "")
        if status == "ok" and not row.get("correct"):
            detail += (f" (max diff out {row.get('max_diff_out')}, grad {row.get('max_diff_grad')}, "
                       f"buffers {row.get('max_diff_buffers')})")
        if row.get("warnings"):
            detail += f"; {len(row['warnings'])} warning(s): " + " | ".join(row["warnings"][:3])[:400]
        print(f"[{i + 1}/{len(plan)}] {m} {mode} {b} {c}: {status} ({row['wall_s']}s) {detail}",
              flush=True)
    print()
    print(format_table(rows))
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "git": _git_commit(), "python": platform.python_version(),
            "cpus": os.cpu_count(), "argv": sys.argv[1:] if argv is None else argv,
            "total_s": round(time.perf_counter() - start, 1)}
    try:
        import torch
        meta["torch"] = torch.__version__
        if a.device.startswith("cuda") and torch.cuda.is_available():
            meta["gpu"] = torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001
        pass
    path = pathlib.Path(a.json) if a.json else RESULTS / (
        "bench-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S") + ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"\nwrote {path} ({meta['total_s']}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
