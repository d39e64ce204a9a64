"""Measure decode+assemble round trips: ember.bytecode vs the PyPI ``bytecode`` package.

    .venv/bin/python tests/bytecode/measure_roundtrip.py [--repeat 3] [modules...]

For every code object (module body, functions, methods, nested code in
co_consts) of a few large stdlib modules, time ``decode -> assemble`` and
count how many results differ from the original in co_code,
co_exceptiontable, co_linetable, co_stacksize or the tables.  The numbers
and the decision taken from them are in docs/bytecode.md.

This is a script, not a test (pytest collects only ``test_*.py``).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _ember_import import import_bytecode_package  # noqa: E402

eb = import_bytecode_package()

DEFAULT_MODULES = [
    "inspect",
    "typing",
    "argparse",
    "collections",
    "json.decoder",
    "email.message",
    "dataclasses",
    "difflib",
    "pydoc",
    "tarfile",
]

FIELDS = ("co_code", "co_exceptiontable", "co_linetable", "co_stacksize", "co_consts", "co_names", "co_varnames")


def code_objects(module_name: str) -> list[types.CodeType]:
    """All code objects compiled from a module's source (fresh, unspecialised)."""
    mod = importlib.import_module(module_name)
    top = mod.__loader__.get_code(mod.__name__)
    out, stack = [], [top]
    while stack:
        co = stack.pop()
        out.append(co)
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return out


def diff_fields(a: types.CodeType, b: types.CodeType) -> list[str]:
    return [f for f in FIELDS if getattr(a, f) != getattr(b, f)]


def run_ember(codes):
    return [eb.assemble(eb.decode(co), co) for co in codes]


def run_bytecode_abstract(codes):
    import bytecode

    return [bytecode.Bytecode.from_code(co).to_code() for co in codes]


def run_bytecode_concrete(codes):
    import bytecode

    return [bytecode.ConcreteBytecode.from_code(co).to_code() for co in codes]


def run_dis_only(codes):
    import dis

    return [list(dis.get_instructions(co)) for co in codes]


def measure(fn, codes, repeat):
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn(codes)
        best = min(best, time.perf_counter() - t0)
    return best, result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("modules", nargs="*", default=DEFAULT_MODULES)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)

    codes = [co for m in args.modules for co in code_objects(m)]
    n_instr = sum(len(co.co_code) // 2 for co in codes)
    print(f"Python {sys.version.split()[0]}; {len(codes)} code objects, {n_instr} code units "
          f"from {', '.join(args.modules)}; best of {args.repeat}")
    print(f"{'implementation':38} {'time (s)':>9} {'us/code':>8}  differing code objects by field")
    rows = [
        ("ember.bytecode decode+assemble", run_ember, True),
        ("bytecode.Bytecode (abstract, labels)", run_bytecode_abstract, True),
        ("bytecode.ConcreteBytecode (offsets)", run_bytecode_concrete, True),
        ("dis.get_instructions only (reference)", run_dis_only, False),
    ]
    for label, fn, compare in rows:
        try:
            seconds, results = measure(fn, codes, args.repeat)
        except Exception as exc:  # report, do not hide, a crash of a candidate
            print(f"{label:38} FAILED: {exc!r}")
            continue
        summary = ""
        if compare:
            counts: dict[str, int] = {}
            for old, new in zip(codes, results):
                for f in diff_fields(old, new):
                    counts[f] = counts.get(f, 0) + 1
            summary = ", ".join(f"{k}: {v}" for k, v in counts.items()) or "none (all identical)"
        print(f"{label:38} {seconds:9.3f} {1e6 * seconds / len(codes):8.0f}  {summary}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
