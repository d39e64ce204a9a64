"""The code validator accepts what CPython compiles and what ember generates, and rejects each
kind of malformed code object that would crash or mislead the interpreter, a debugger or traceback."""

from __future__ import annotations

import dis
import importlib
import json
import textwrap
import traceback
import types

import pytest

from bytecode_helpers import eb

V = importlib.import_module("ember.bytecode.validate")


def _sample_functions():
    def simple(a, b=2):
        return a + b

    def loops(xs):
        total = 0
        for x in xs:
            if x % 2:
                continue
            total += x
        return total

    def tries(x):
        try:
            return 1 / x
        except ZeroDivisionError as e:
            return str(e)
        finally:
            x = None

    def with_cells(a):
        def inner(b):
            return a + b
        return inner

    def gen(n):
        yield from range(n)

    return [simple, loops, tries, with_cells, with_cells(1), gen, json.dumps, json.loads,
            traceback.format_exc, dis.dis, textwrap.dedent]


@pytest.mark.parametrize("fn", _sample_functions(), ids=lambda f: f.__qualname__)
def test_cpython_code_passes(fn):
    V.validate_code(fn.__code__)


def test_resume_code_passes():
    def f(xs, scale):
        total = 0
        for x in xs:
            total += x * scale
        return total

    insts = eb.decode(f.__code__)
    k = next(i for i, ins in enumerate(insts) if ins.opname == "BINARY_OP")
    depths = eb.stack_depths(insts)
    live = sorted(eb.live_locals(insts, k))
    rc = eb.make_resume_code(f.__code__, k, depths[k], live)
    V.validate_code(rc.code)


def _free_var_function():
    y = 3

    def uses_free(x):
        return x + y
    return uses_free


def test_rejects_free_variables_without_copy_free_vars():
    # The residual of a graph break once had co_freevars but no COPY_FREE_VARS: its frame's free
    # slot held garbage and reading frame.f_locals (pytest does) crashed the interpreter.
    fn = _free_var_function()
    insts = [i for i in eb.decode(fn.__code__) if i.opname != "COPY_FREE_VARS"]
    bad = eb.assemble(insts, fn.__code__)
    with pytest.raises(V.CodeValidationError, match="COPY_FREE_VARS"):
        V.validate_code(bad)


def test_rejects_missing_make_cell():
    def outer():
        a = 1

        def inner():
            return a
        return inner
    insts = [i for i in eb.decode(outer.__code__) if i.opname != "MAKE_CELL"]
    bad = eb.assemble(insts, outer.__code__)
    with pytest.raises(V.CodeValidationError, match="MAKE_CELL"):
        V.validate_code(bad)


def test_rejects_small_stacksize():
    def f(a, b, c):
        return (a, b, c)
    bad = f.__code__.replace(co_stacksize=1)
    with pytest.raises(V.CodeValidationError, match="co_stacksize"):
        V.validate_code(bad)


def test_rejects_bad_position_table():
    def f(a):
        return a + 1
    # end line before the start line in every entry (long form, negative end delta cannot be
    # produced by the encoder: build the table by hand).
    n_units = len(f.__code__.co_code) // 2
    table = bytearray()
    first = True
    for _ in range(n_units):
        table.append(0x80 | (14 << 3) | 0)       # long form, 1 code unit
        table.append(0 if not first else 2)      # line delta (svarint): +1 first, then 0
        first = False
        table.append(0)                          # end line delta 0
        table.append(10)                         # col + 1
        table.append(3)                          # end col + 1: before col on the same line
    bad = f.__code__.replace(co_linetable=bytes(table))
    with pytest.raises(V.CodeValidationError, match="column range"):
        V.validate_code(bad)


def test_rejects_bad_exception_table():
    def f(x):
        try:
            return 1 / x
        except ZeroDivisionError:
            return 0
    table = bytearray(f.__code__.co_exceptiontable)
    # Point the first handler into the middle of an instruction's cache entries.
    entries = dis._parse_exception_table(f.__code__)
    assert entries
    bad_target = next(o for o in range(2, len(f.__code__.co_code), 2)
                      if o not in {i.offset for i in dis.get_instructions(f.__code__)})
    out = bytearray()
    for k, e in enumerate(entries):
        target = bad_target if k == 0 else e.target
        out += eb.tables.encode_exception_table([(e.start, e.end, target, e.depth, e.lasti)])
    bad = f.__code__.replace(co_exceptiontable=bytes(out))
    assert bytes(out) != bytes(table)
    with pytest.raises(V.CodeValidationError, match="handler is not an instruction"):
        V.validate_code(bad)


def test_check_generated_only_when_enabled(monkeypatch):
    fn = _free_var_function()
    insts = [i for i in eb.decode(fn.__code__) if i.opname != "COPY_FREE_VARS"]
    bad = eb.assemble(insts, fn.__code__)
    monkeypatch.setattr(V, "enabled", False)
    assert V.check_generated(bad) is bad
    monkeypatch.setattr(V, "enabled", True)
    with pytest.raises(V.CodeValidationError):
        V.check_generated(bad)
