"""Edits: inserted instructions keep jumps, exception tables, line numbers
and stack sizes right."""

from __future__ import annotations

import dis
import sys
import traceback
import types

import pytest

from bytecode_helpers import eb, is_op, roundtrip

ci = eb.create_instruction

PY312 = sys.version_info >= (3, 12)
# 3.11 names the direction of a conditional jump; 3.12+ have forward-only ones.
IF_FALSE = "POP_JUMP_IF_FALSE" if PY312 else "POP_JUMP_FORWARD_IF_FALSE"


def rebuild(fn, insts, **kw):
    code = eb.assemble(insts, fn.__code__, **kw)
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def find(insts, opname, argval=None, nth=0):
    hits = [k for k, i in enumerate(insts) if is_op(i, opname, argval)]
    return hits[nth]


def add_to_local(name, amount):
    """``name += amount`` as instructions."""
    return [ci("LOAD_FAST", argval=name), ci("LOAD_CONST", argval=amount), ci("BINARY_OP", arg=13), ci("STORE_FAST", argval=name)]


# ---------------------------------------------------------------- jump targets


def branchy(x):
    y = 0
    if x > 0:
        y = 1
    else:
        y = 2
    y = y + 0  # (3.12+ would copy a merge block of return y alone into both branches)
    return y


@pytest.mark.parametrize("redirect, expected", [(False, (1, 12)), (True, (11, 12))])
def test_insert_before_jump_target(redirect, expected):
    # ``return y`` is the target of the then-branch's JUMP_FORWARD and the
    # fall-through of the else-branch.  Without redirecting, only the
    # fall-through path runs the inserted ``y += 10``.
    insts = eb.decode(branchy.__code__)
    k = find(insts, "LOAD_FAST", "y")
    assert any(i.target is insts[k] for i in insts)
    eb.insert_instructions(insts, k, add_to_local("y", 10), redirect_jumps=redirect)
    f = rebuild(branchy, insts)
    assert (f(1), f(-1)) == expected


def test_insert_before_conditional_jump_target_moves_offsets():
    insts = eb.decode(branchy.__code__)
    jump = insts[find(insts, IF_FALSE)]
    k = insts.index(jump.target)  # else branch: LOAD_CONST 2
    eb.insert_instructions(insts, k, add_to_local("y", 100) + [ci("NOP")] * 3, redirect_jumps=True)
    f = rebuild(branchy, insts)
    assert (f(1), f(-1)) == (1, 2)  # y += 100 happens before y = 2 is stored
    assert dis.get_instructions(f).__next__().opname == "RESUME"
    jump_out = next(i for i in dis.get_instructions(f) if i.opname == IF_FALSE)
    caches = eb.instructions.inline_cache_entries(jump_out.opcode)  # (3.13: one after a conditional jump)
    assert jump_out.argval == jump_out.offset + 2 + 2 * caches + 2 * 3  # past LOAD_CONST, STORE_FAST, JUMP_FORWARD


# ---------------------------------------------------------------- loops


def evens(xs):
    out = []
    for x in xs:
        if x % 2:
            continue
        out.append(x)
    return out


def test_insert_in_loop_body_with_new_local():
    insts = eb.decode(evens.__code__)
    # n = 0 right after RESUME; n += 1 at the top of the loop body;
    # return (out, n) instead of out.
    eb.insert_instructions(insts, find(insts, "RESUME") + 1, [ci("LOAD_CONST", argval=0), ci("STORE_FAST", argval="n")])
    eb.insert_instructions(insts, find(insts, "STORE_FAST", "x") + 1, add_to_local("n", 1))
    for k in reversed([k for k, i in enumerate(insts) if i.opname == "RETURN_VALUE"]):
        eb.insert_instructions(insts, k, [ci("LOAD_FAST", argval="n"), ci("BUILD_TUPLE", arg=2)])
    f = rebuild(evens, insts)
    assert "n" in f.__code__.co_varnames and f.__code__.co_nlocals == len(f.__code__.co_varnames)
    xs = list(range(11))
    assert f(xs) == (evens(xs), 11)
    assert f([]) == ([], 0)
    assert f.__code__.co_stacksize >= evens.__code__.co_stacksize


# ---------------------------------------------------------------- try / with


def guarded(a, b):
    try:
        r = a + b
    except ZeroDivisionError:
        return "caught"
    return r


def divide_by_zero(name):
    return [ci("LOAD_FAST", argval=name), ci("LOAD_CONST", argval=0), ci("BINARY_OP", arg=11), ci("POP_TOP")]


def test_insert_inside_try_body_is_protected():
    insts = eb.decode(guarded.__code__)
    k = find(insts, "STORE_FAST", "r")
    assert insts[k].exn_tab_entry is not None
    eb.insert_instructions(insts, k, divide_by_zero("a"))
    f = rebuild(guarded, insts)
    assert guarded(1, 2) == 3
    assert f(1, 2) == "caught"
    # the exception table was re-encoded with a longer protected range
    # ... and the protected range grew by the inserted 5 code units (10 bytes).
    new, old = dis._parse_exception_table(f.__code__)[0], dis._parse_exception_table(guarded.__code__)[0]
    assert new.end - new.start == old.end - old.start + 10


def test_insert_inside_except_handler_keeps_behaviour():
    insts = eb.decode(guarded.__code__)
    k = find(insts, "RETURN_CONST" if PY312 else "LOAD_CONST", "caught")
    eb.insert_instructions(insts, k, [ci("LOAD_CONST", argval="pad"), ci("POP_TOP")] * 3)
    f = rebuild(guarded, insts)
    assert f(1, 2) == 3

    class Zero:
        def __add__(self, other):
            raise ZeroDivisionError

    assert f(Zero(), 1) == "caught"  # runs the edited handler
    assert sys.exc_info() == (None, None, None)  # POP_EXCEPT still restored the state
    with pytest.raises(TypeError):
        f(1, None)
    assert sys.exc_info() == (None, None, None)


class Recorder:
    def __init__(self):
        self.log = []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, val, tb):
        self.log.append(("exit", typ))
        return False


def in_with(cm, a):
    with cm:
        r = a + 1
    return r


def test_insert_inside_with_block_calls_exit_and_points_at_line():
    insts = eb.decode(in_with.__code__)
    k = find(insts, "STORE_FAST", "r")
    eb.insert_instructions(insts, k, divide_by_zero("a"))
    f = rebuild(in_with, insts)
    cm = Recorder()
    with pytest.raises(ZeroDivisionError) as info:
        f(cm, 5)
    assert cm.log == ["enter", ("exit", ZeroDivisionError)]
    # New instructions inherit the source position of their neighbour.
    line = in_with.__code__.co_firstlineno + 2
    assert traceback.extract_tb(info.value.__traceback__)[-1].lineno == line
    ok = Recorder()
    assert in_with(ok, 5) == 6 and ok.log == ["enter", ("exit", None)]


# ---------------------------------------------------------------- EXTENDED_ARG


def _make(src, name):
    ns = {}
    exec(compile(src, f"<{name}>", "exec"), ns)
    return ns[name]


def test_long_function_with_extended_arg_jumps():
    body = "\n".join("            total += %d" % k for k in range(120))
    src = f"def big(x):\n    total = 0\n    for i in range(x):\n        if i % 3 == 0:\n{body}\n    return total\n"
    big = _make(src, "big")
    ops = [i.opname for i in dis.get_instructions(big)]
    assert "EXTENDED_ARG" in ops  # the loop's backward jump needs a prefix
    new = roundtrip(big.__code__)
    assert new.co_code == big.__code__.co_code and new.co_linetable == big.__code__.co_linetable
    insts = eb.decode(big.__code__)
    assert all(i.opname != "EXTENDED_ARG" for i in insts)
    k = find(insts, "STORE_FAST", "i") + 1
    eb.insert_instructions(insts, k, [ci("LOAD_FAST", argval="total"), ci("POP_TOP")] * 200)
    f = rebuild(big, insts)
    assert f(10) == big(10) == sum(range(120)) * 4


def test_insert_grows_forward_jump_past_255_units():
    # If-body of 48 ``total += k`` (5 code units each) = 240 units: no prefix.
    body = "\n".join("        total += %d" % k for k in range(48))
    src = f"def mid(x):\n    total = 0\n    if x:\n{body}\n    return total\n"
    mid = _make(src, "mid")
    assert "EXTENDED_ARG" not in [i.opname for i in dis.get_instructions(mid)]
    insts = eb.decode(mid.__code__)
    jump = next(i for i in insts if i.opname == IF_FALSE)
    eb.insert_instructions(insts, insts.index(jump) + 1, [ci("NOP")] * 40)
    f = rebuild(mid, insts)
    ops = [i for i in dis.get_instructions(f)]
    assert any(i.opname == "EXTENDED_ARG" for i in ops)
    j = next(i for i in ops if i.opname == IF_FALSE)
    assert j.arg > 255
    assert (f(1), f(0)) == (mid(1), mid(0)) == (sum(range(48)), 0)


def test_many_constants_and_names_need_extended_arg():
    # 300 locals and 300 constants: indices above 255 need EXTENDED_ARG.
    src = "def consts():\n" + "".join(f"    a{k} = {k}.5\n" for k in range(300)) + "    return a299\n"
    consts = _make(src, "consts")
    assert roundtrip(consts.__code__).co_code == consts.__code__.co_code
    insts = eb.decode(consts.__code__)
    k = find(insts, "RETURN_VALUE")
    eb.insert_instructions(insts, k, [ci("LOAD_CONST", argval="new"), ci("STORE_FAST", argval="extra"),
                                      ci("LOAD_FAST", argval="a3"), ci("LOAD_FAST", argval="extra"),
                                      ci("BUILD_TUPLE", arg=3)])
    f = rebuild(consts, insts)
    assert f.__code__.co_consts.index("new") > 255
    assert f.__code__.co_varnames.index("extra") == 300
    assert f() == (299.5, 3.5, "new")


# ---------------------------------------------------------------- jump direction, consts, stack size


def _template():
    pass


def test_generic_jump_becomes_backward_and_code_from_scratch_runs():
    loop = ci("LOAD_FAST", argval="i")
    insts = [
        ci("RESUME", arg=0),
        ci("LOAD_CONST", argval=0),
        ci("STORE_FAST", argval="i"),
        loop,
        ci("LOAD_CONST", argval=1),
        ci("BINARY_OP", arg=13),
        ci("STORE_FAST", argval="i"),
        ci("LOAD_FAST", argval="i"),
        ci("LOAD_CONST", argval=5),
        ci("COMPARE_OP", argval="<"),
        ci("POP_JUMP_IF_TRUE", target=loop),
        ci("LOAD_FAST", argval="i"),
        ci("RETURN_VALUE"),
    ]
    f = rebuild(_template, insts)
    assert f() == 5
    ops = [i.opname for i in dis.get_instructions(f)]
    if PY312:  # only forward conditional jumps: lowered to a test over a JUMP_BACKWARD
        assert ops[ops.index("POP_JUMP_IF_FALSE") + 1] == "JUMP_BACKWARD"
    else:
        assert "POP_JUMP_BACKWARD_IF_TRUE" in ops
    assert f.__code__.co_stacksize == 2


def test_wrong_direction_is_fixed_and_impossible_direction_raises():
    insts = eb.decode(evens.__code__)
    back = next(i for i in insts if i.opname == "JUMP_BACKWARD")
    back.opname, back.opcode = "JUMP_FORWARD", dis.opmap["JUMP_FORWARD"]
    f = rebuild(evens, insts)
    assert back.opname == "JUMP_BACKWARD"
    assert f([1, 2, 3, 4]) == [2, 4]
    insts = eb.decode(evens.__code__)
    for_iter = next(i for i in insts if i.opname == "FOR_ITER")
    for_iter.target = insts[0]
    with pytest.raises(ValueError, match="FOR_ITER can only jump forward"):
        eb.assemble(insts, evens.__code__)


def test_new_constants_keep_type_and_sign_distinct():
    values = [0.0, -0.0, 1, True, 1.0, (1, 2), (1.0, 2), None, "s", b"s"]
    insts = [ci("RESUME", arg=0)] + [ci("LOAD_CONST", argval=v) for v in values]
    insts += [ci("BUILD_TUPLE", arg=len(values)), ci("RETURN_VALUE")]
    f = rebuild(_template, insts)
    got = f()
    assert [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in values]
    assert f.__code__.co_stacksize == len(values)


def test_stack_depth_error_messages():
    insts = [ci("RESUME", arg=0), ci("POP_TOP"), ci("LOAD_CONST", argval=None), ci("RETURN_VALUE")]
    with pytest.raises(ValueError, match="stack underflow"):
        eb.assemble(insts, _template.__code__)


@pytest.mark.skipif(sys.version_info < (3, 13), reason="LOAD_FAST_LOAD_FAST-style pairs exist from 3.13 on")
def test_pair_of_locals_above_slot_15_is_split():
    def pairs(a, b):
        c = a + b
        return c

    insts = eb.decode(pairs.__code__)
    assert any(i.opname == "LOAD_FAST_LOAD_FAST" for i in insts)
    # 20 new leading parameters push a and b past the 4-bit slots a pair can name
    varnames = [f"p{k}" for k in range(20)] + list(pairs.__code__.co_varnames)
    code = eb.assemble(insts, pairs.__code__, varnames=varnames, co_argcount=22)
    f = types.FunctionType(code, globals())
    assert f(*range(20), 1, 2) == 3
    assert "LOAD_FAST_LOAD_FAST" not in [i.opname for i in dis.get_instructions(f)]
