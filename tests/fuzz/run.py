"""Long fuzz runs: ``python -m tests.fuzz.run --n 20000 --seed 0 [--jobs 1] [--out report.json]``.

Prints one line per failing program (seed, config, status, first difference) and
a summary: programs, wrong answers, crashes (strict internal errors), fallbacks
that also went wrong, exception-message-only differences, graph breaks and
fallbacks counted by ember. ``--show SEED`` prints a program's text.
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import signal
import sys
import time
import warnings

from .gen import generate
from .harness import CONFIGS, check_program


class ProgramTimeout(BaseException):  # not caught by the harness's `except Exception`
    pass


def _on_alarm(signum, frame):
    raise ProgramTimeout()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0, help="first seed; programs use seed, seed+1, ...")
    ap.add_argument("--show", type=int, help="print the program for this seed and exit")
    ap.add_argument("--configs", default="all", help="all, or comma list like eager:0,aot_eager:1")
    ap.add_argument("--out", help="write failures as JSON here")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--progress", action="store_true", help="print a line as each program starts")
    ap.add_argument("--program-timeout", type=int, default=120, help="seconds per program (all configs)")
    ap.add_argument("--time-limit", type=float, default=0, help="stop after this many seconds")
    args = ap.parse_args(argv)
    if args.show is not None:
        print(generate(args.show))
        return 0
    configs = CONFIGS if args.configs == "all" else [
        (c.split(":")[0], c.split(":")[1] == "1") for c in args.configs.split(",")]
    warnings.simplefilter("ignore")
    # fake tensors log the torch errors a program catches on purpose
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    summary = collections.Counter()
    failures = []
    t0 = time.time()
    for seed in range(args.seed, args.seed + args.n):
        if args.time_limit and time.time() - t0 > args.time_limit:
            break
        src = generate(seed)
        summary["programs"] += 1
        if args.progress:
            print(f"# seed {seed} ({int(time.time() - t0)}s)", flush=True)
        signal.signal(signal.SIGALRM, _on_alarm)
        signal.alarm(args.program_timeout)
        try:
            outcomes = check_program(src, f"seed {seed}", configs)
        except ProgramTimeout:
            summary["programs_hang"] += 1
            failures.append({"seed": seed, "status": "hang"})
            print(f"seed {seed}: hang (over {args.program_timeout}s)", flush=True)
            continue
        except Exception as e:  # a fault in the harness itself
            summary["harness_error"] += 1
            print(f"seed {seed}: harness error {type(e).__name__}: {e}", flush=True)
            continue
        finally:
            signal.alarm(0)
        worst = None
        for o in outcomes:
            summary[f"runs_{o.status}"] += 1
            summary["graph_breaks"] += o.stats.get("graph_breaks", 0)
            summary["fallbacks"] += o.stats.get("fallbacks", 0)
            if o.status != "ok":
                first = o.diffs[0][1] if o.diffs else o.detail.strip().splitlines()[-1:] 
                failures.append({"seed": seed, "backend": o.backend, "grad": o.grad, "status": o.status,
                                 "diffs": o.diffs, "detail": o.detail[-3000:]})
                if not args.quiet:
                    print(f"seed {seed} {o.backend} grad={int(o.grad)}: {o.status}: {str(first)[:300]}", flush=True)
                worst = worst or o.status
        for status in ("wrong", "crash_fallback_wrong", "crash", "exc_message"):
            if any(o.status == status for o in outcomes):
                summary[f"programs_{status}"] += 1
    summary["seconds"] = int(time.time() - t0)
    print("\n== summary")
    for k in sorted(summary):
        print(f"  {k:28s} {summary[k]}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"summary": summary, "failures": failures}, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
