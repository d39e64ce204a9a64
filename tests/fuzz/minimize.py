"""Shrink a failing fuzz program: ``python -m tests.fuzz.minimize SEED [--config aot_eager:1]``.

Greedy statement deletion over ``f``'s body (and the bodies nested in it), plus
replacing a compound statement by one of its bodies, kept while the failure
keeps its signature (same status, same first kind of difference, same exception
type) and eager still runs without a NameError. Prints the shortest program.
"""
from __future__ import annotations

import argparse
import ast
import logging
import sys
import warnings

from .gen import PRELUDE, generate
from .harness import check_program, run_program


def signature(src: str, config) -> tuple | None:
    try:
        compile(src, "<min>", "exec")
    except SyntaxError:
        return None
    try:
        ref = run_program(src, "min", backend=None, grad=config[1])
    except Exception:  # noqa: BLE001
        return None
    if any(c.exc and c.exc[0] in ("NameError", "UnboundLocalError") for c in ref.calls):
        return None
    try:
        (o,) = check_program(src, "min", [config], refs={config[1]: ref})
    except Exception:  # noqa: BLE001
        return None
    if o.status == "ok":
        return None
    kind = o.diffs[0][0] if o.diffs else ""
    last = o.detail.strip().splitlines()[-1:] or [""]
    exc_type = last[0].split(":")[0]
    return (o.status, kind, exc_type)


def _bodies(node):
    for field in ("body", "orelse", "finalbody"):
        b = getattr(node, field, None)
        if isinstance(b, list) and b and isinstance(b[0], ast.stmt):
            yield b
    for h in getattr(node, "handlers", []) or []:
        yield h.body


def _all_bodies(fn):
    out = []
    stack = [fn]
    while stack:
        n = stack.pop()
        for b in _bodies(n):
            out.append(b)
            stack.extend(b)
    return out


def minimize(src: str, config, max_rounds: int = 20) -> str:
    target = signature(src, config)
    if target is None:
        return src
    head, _, body = src.partition("def f(")
    tree = ast.parse("def f(" + body)
    changed, rounds = True, 0
    while changed and rounds < max_rounds:
        changed, rounds = False, rounds + 1
        fn = tree.body[0]
        for b in _all_bodies(fn):
            i = 0
            while i < len(b):
                stmt = b[i]
                candidates = [[]]
                for sub in _bodies(stmt):
                    candidates.append(list(sub))
                for repl in candidates:
                    saved = b[i:i + 1]
                    new = repl if (repl or len(b) > 1) else [ast.Pass()]
                    b[i:i + 1] = new
                    text = head + ast.unparse(tree) + "\n"
                    if signature(text, config) == target:
                        changed = True
                        break
                    b[i:i + len(new)] = saved
                else:
                    i += 1
        if not changed:
            break
    return head + ast.unparse(tree) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("seed", type=int)
    ap.add_argument("--config", default="aot_eager:1")
    ap.add_argument("--file", help="minimize this program text instead of a seed's")
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    logging.getLogger("torch._subclasses.fake_tensor").setLevel(logging.CRITICAL)
    backend, grad = args.config.split(":")
    config = (backend, grad == "1")
    src = open(args.file).read() if args.file else generate(args.seed)
    print("signature:", signature(src, config), file=sys.stderr)
    small = minimize(src, config)
    print(small[len(PRELUDE):] if small.startswith(PRELUDE) else small)
    print("signature:", signature(small, config), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
