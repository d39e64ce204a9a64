"""ember's command line: ``python -m ember <command>``.

    python -m ember demo                      # nanoGPT training step, backend aot_eager
    python -m ember demo --backend inductor   # or eager
    python -m ember report script.py [args]   # run a script, write ember_report.html
"""
from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ember",
                                description="ember: a JIT compiler frontend for PyTorch")
    sub = p.add_subparsers(dest="command", metavar="command")
    d = sub.add_parser("demo", help="compile a small GPT's training step and compare with eager",
                       description="Compile the built-in nanoGPT's training step with "
                                   "ember.compile and show graphs, breaks, guards, compile "
                                   "time, speed and differences from eager.")
    d.add_argument("--backend", default="aot_eager", choices=["aot_eager", "eager", "inductor"])
    d.add_argument("--target", default="auto", choices=["auto", "step", "model"],
                   help="compile the training step function, the model, or the step and "
                        "fall back to the model if the step runs eagerly (default)")
    d.add_argument("--steps", type=int, default=5, help="SGD steps to run side by side")
    d.add_argument("--batch-size", type=int, default=4)
    d.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: steadier timings on a busy machine; "
                        "0 keeps torch's default)")
    r = sub.add_parser("report", help="run a script and write one HTML report of what ember compiled",
                       description="Run SCRIPT as `python SCRIPT ARGS` would (its __name__ is "
                                   "'__main__', sys.argv is [SCRIPT, *ARGS]) and write one "
                                   "self-contained HTML file: per compiled function its graphs, "
                                   "guards with provenance, graph breaks, recompiles, compile "
                                   "times and resume functions' code. Options go before SCRIPT.")
    r.add_argument("-o", "--output", default="ember_report.html", help="the HTML file (default: %(default)s)")
    r.add_argument("script")
    r.add_argument("args", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    p = _parser()
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command is None:
        p.print_help()
        return 2
    if args.command == "demo":
        import warnings

        from ember.report.demo import run_demo
        warnings.filterwarnings("ignore", category=UserWarning, module="torch")
        if args.threads:
            import torch
            torch.set_num_threads(args.threads)
        return run_demo(backend=args.backend, steps=args.steps, target=args.target,
                        batch_size=args.batch_size)
    if args.command == "report":
        from ember.report.run_script import report_script
        return report_script(args.script, args.args, args.output)
    p.error(f"unknown command {args.command!r}")
    return 2
