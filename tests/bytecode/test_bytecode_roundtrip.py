"""decode -> assemble must reproduce the compiler's output exactly, and the
reassembled code must run identically."""

from __future__ import annotations

import argparse
import dis
import importlib
import inspect
import json
import json.decoder
import json.encoder
import json.scanner
import pkgutil
import textwrap

import pytest

from bytecode_helpers import (
    EXACT_FIELDS,
    dis_signature,
    eb,
    module_code_objects,
    roundtrip,
    swapped_code,
)

STDLIB_MODULES = [
    "inspect",
    "typing",
    "argparse",
    "collections",
    "json.decoder",
    "email.message",
    "dataclasses",
    "textwrap",
    "asyncio.base_events",  # async defs, await, async with
]


def _check_exact(codes):
    assert codes, "no code objects collected"
    mismatches = []
    for co in codes:
        new = roundtrip(co)
        bad = [f for f in EXACT_FIELDS if getattr(new, f) != getattr(co, f)]
        if list(new.co_positions()) != list(co.co_positions()):
            bad.append("co_positions")
        if bad:
            mismatches.append((co.co_qualname, co.co_firstlineno, bad))
    assert not mismatches, mismatches[:10]


@pytest.mark.parametrize("module_name", STDLIB_MODULES)
def test_stdlib_roundtrip_is_byte_identical(module_name):
    # Byte equality of co_code / co_exceptiontable / co_linetable /
    # co_stacksize is achievable because the encoders follow CPython 3.11's
    # compile.c choice by choice (see ember/bytecode/tables.py).
    codes = module_code_objects(module_name)
    assert len(codes) > 10
    _check_exact(codes)


@pytest.mark.parametrize("module_name", ["inspect", "argparse", "dataclasses"])
def test_dis_shows_same_instruction_sequence(module_name):
    for co in module_code_objects(module_name):
        assert dis_signature(roundtrip(co)) == dis_signature(co), co.co_qualname


def test_decoded_fields_match_dis():
    # Every field of Instruction that dis also reports must agree with dis.
    for co in module_code_objects("json.decoder") + module_code_objects("textwrap"):
        ours = eb.decode(co)
        theirs = [i for i in dis.get_instructions(co) if i.opname != "EXTENDED_ARG"]
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            assert (a.opname, a.opcode, a.arg, a.offset, a.positions) == (
                b.opname, b.opcode, b.arg, b.offset, b.positions)
            if a.opname == "KW_NAMES":
                # 3.11's dis shows KW_NAMES' constant as <unknown>; check it directly.
                assert a.argval == co.co_consts[a.arg]
            elif a.target is None:
                assert a.argval == b.argval or a.argval != a.argval
            else:
                # dis reports the raw target offset, which may be an EXTENDED_ARG prefix
                assert a.target.offset in (b.argval, b.argval + 2, b.argval + 4, b.argval + 6)
        # localsplus naming agrees with CPython's own mapping
        names = eb.localsplus_names(co)
        assert names == [co._varname_from_oparg(k) for k in range(len(names))]


def test_torch_nn_modules_roundtrip():
    torch = pytest.importorskip("torch", reason="torch is needed for the torch.nn.modules corpus")
    import torch.nn.modules as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + ".")]
    assert len(names) > 20
    codes = []
    for name in names:
        codes += module_code_objects(name)
    assert len(codes) > 900  # (3.12+ inline comprehensions: fewer code objects than 3.11's ~1200)
    _check_exact(codes)


def test_swapped_code_runs_stdlib_identically():
    data = {"a": [1, 2.5, None, True, "x\u00e9\n"], "b": {"c": [], "d": {}}, "e": -0.0}
    text = json.dumps(data, indent=2, sort_keys=True)
    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("files", nargs="*")
    parser.add_argument("-v", action="count", default=0)
    para = "The quick brown fox jumps over the lazy dog. " * 8

    def workload():
        # Pure-Python JSON paths are forced so the swapped code actually runs.
        decoder = json.JSONDecoder()
        decoder.scan_once = json.scanner.py_make_scanner(decoder)
        encoder = json.JSONEncoder(indent=1, sort_keys=True)
        return (
            decoder.decode(text),
            "".join(encoder.iterencode(data, _one_shot=False)),
            json.decoder.py_scanstring('"ab\\u00e9c"', 1),
            str(inspect.signature(json.dumps)),
            str(inspect.signature(argparse.ArgumentParser.add_argument)),
            [p.kind for p in inspect.signature(textwrap.fill).parameters.values()],
            vars(parser.parse_args(["--n", "7", "a", "b", "-vv"])),
            textwrap.fill(para, width=30),
            textwrap.dedent("    a\n      b\n"),
            textwrap.shorten(para, 40),
        )

    expected = workload()
    with swapped_code([json.decoder, json.encoder, json.scanner, inspect, argparse, textwrap]) as swapped:
        assert len(swapped) > 250
        got = workload()
    assert got == expected

    # Errors and their messages survive too (exception tables, line numbers).
    def failing():
        try:
            parser.parse_args(["--n", "x"])
        except SystemExit as e:
            return ("exit", e.code)

    with swapped_code([argparse]):
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stderr(buf):
            assert failing() == ("exit", 2)
        assert "invalid int value" in buf.getvalue()


def test_swapped_code_runs_torch_linear_identically():
    torch = pytest.importorskip("torch", reason="torch is needed for the nn.Linear check")
    import torch.nn.modules.linear as linear_mod
    import torch.nn.modules.module as module_mod

    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    x = torch.randn(5, 4)
    expected = lin(x)
    with swapped_code([linear_mod, module_mod]) as swapped:
        assert any(fn is torch.nn.Linear.forward for fn, _ in swapped)
        assert any(fn.__name__ == "_call_impl" for fn, _ in swapped)
        got = lin(x)
        assert repr(lin) == "Linear(in_features=4, out_features=3, bias=True)"
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_stack_size_matches_compiler_for_generated_code():
    # Deep nesting, big literals, comprehensions, try/finally and with.
    src = textwrap.dedent(
        """
        def f(a, b):
            x = [(a, (b, (a, (b, [a, b, {a: b, b: (a, b, [a])}])))) for _ in range(2)]
            try:
                with open(__file__) as fh:
                    y = {k: (v, (v, (v,))) for k, v in zip(a, b)}
            finally:
                z = f(a, f(b, f(a, f(b, 1 + (2 * (3 - (4 / (a + b))))))))
            return g(*x, **y, k=(a, b, (a, b, (a, b))))
        """
    )
    ns = {}
    exec(compile(src, "<gen>", "exec"), ns)
    for co in [ns["f"].__code__] + [c for c in ns["f"].__code__.co_consts if hasattr(c, "co_code")]:
        assert eb.max_stack_depth(eb.decode(co)) == co.co_stacksize
        assert roundtrip(co).co_stacksize == co.co_stacksize
