"""The version layer: call sequences that hide where NULL goes."""

from __future__ import annotations

import dis
import sys
import types

import pytest

from bytecode_helpers import eb

V = eb.versions
ci = eb.create_instruction


def helper(a, b=0, *, c=0):
    return ("helper", a, b, c)


class Box:
    def __init__(self, v):
        self.v = v

    def get(self, k, scale=1):
        return (self.v, k, scale)


def _template(box):
    pass


def _build(insts):
    code = eb.assemble(insts, _template.__code__)
    return types.FunctionType(code, globals(), "generated")


def const(v):
    return [ci("LOAD_CONST", argval=v)]


def test_generated_calls_run_on_this_python():
    insts = [ci("RESUME", arg=0)]
    # helper(1, b=2), helper(3), box.get(4), box.get(5, scale=6), len((1, 2)) via
    # push_null_and_callable around a plain LOAD_GLOBAL.
    insts += V.call_global("helper", [const(1)], {"b": const(2)})
    insts += V.call_global("helper", [const(3)])
    insts += V.call_method([ci("LOAD_FAST", argval="box")], "get", [const(4)])
    insts += V.call_method([ci("LOAD_FAST", argval="box")], "get", [const(5)], {"scale": const(6)})
    insts += V.call_function(V.load_global("len"), [const((1, 2))])
    insts += V.call_function([ci("LOAD_FAST", argval="box"), ci("LOAD_ATTR", argval="get")], [const(7)], {"scale": const(8)})
    insts += [ci("BUILD_TUPLE", arg=6)] + V.return_value()
    f = _build(insts)
    assert f(Box(9)) == (
        ("helper", 1, 2, 0),
        ("helper", 3, 0, 0),
        (9, 4, 1),
        (9, 5, 6),
        2,
        (9, 7, 8),
    )
    ops = [i.opname for i in dis.get_instructions(f)]
    if sys.version_info < (3, 12):
        assert {"PRECALL", "KW_NAMES", "LOAD_METHOD", "PUSH_NULL"} <= set(ops)
    else:  # 3.12: no PRECALL; a method load is LOAD_ATTR with its low bit set; 3.13: CALL_KW
        kw_call = "KW_NAMES" if sys.version_info < (3, 13) else "CALL_KW"
        assert {kw_call, "PUSH_NULL"} <= set(ops) and "PRECALL" not in ops
        assert any(i.opname == "LOAD_ATTR" and i.arg & 1 for i in dis.get_instructions(f))
    # The NULL bit rides on LOAD_GLOBAL for globals.
    lg = [i for i in dis.get_instructions(f) if i.opname == "LOAD_GLOBAL"]
    assert [i.arg & 1 for i in lg] == [1, 1, 0]
    assert [i.argval for i in lg] == ["helper", "helper", "len"]


def test_return_const_and_jump_helpers_run():
    end = ci("NOP")
    insts = [ci("RESUME", arg=0)] + V.jump(end) + const("skipped") + [ci("POP_TOP"), end] + V.return_const("done")
    assert _build(insts)(None) == "done"


def _names(insts):
    return [i.opname for i in insts]


@pytest.mark.parametrize(
    "version, null_first, expected_call, expected_kw_call, method_op",
    [
        ((3, 11), True, ["PRECALL", "CALL"], ["KW_NAMES", "PRECALL", "CALL"], "LOAD_METHOD"),
        ((3, 12), True, ["CALL"], ["KW_NAMES", "CALL"], "LOAD_ATTR"),
        ((3, 13), False, ["CALL"], ["LOAD_CONST", "CALL_KW"], "LOAD_ATTR"),
    ],
)
def test_call_sequences_per_version(monkeypatch, version, null_first, expected_call, expected_kw_call, method_op):
    monkeypatch.setattr(V, "PY_VERSION", version)
    assert V.null_before_callable() is null_first
    load = [ci("LOAD_FAST", argval="box")]
    seq = V.push_null_and_callable(load)
    assert _names(seq) == (["PUSH_NULL", "LOAD_FAST"] if null_first else ["LOAD_FAST", "PUSH_NULL"])
    assert seq[1 if null_first else 0] is load[0]
    assert _names(V.call(2)) == expected_call
    kw = V.call(3, ["a", "b"])
    assert _names(kw) == expected_kw_call
    assert kw[0].argval == ("a", "b")
    assert kw[-1].arg == 3  # keyword values count in nargs on every version
    m = V.load_method("get")
    assert _names(m) == [method_op] and m[0].argval == "get"
    if method_op == "LOAD_ATTR":
        assert m[0].arg == 1  # the "method" flag bit; the name index comes at assembly
    assert V.load_global("len", push_null=True)[0].arg == 1
    ret = V.return_const(None)
    assert _names(ret) == (["LOAD_CONST", "RETURN_VALUE"] if version < (3, 12) else ["RETURN_CONST"])
    # Instructions for another version cannot be assembled here, loudly.
    if version != sys.version_info[:2]:
        assert all(i.opcode is None for i in V.call(1))
        with pytest.raises(ValueError, match="does not exist"):
            eb.assemble([ci("RESUME", arg=0)] + V.call_global("helper") + V.return_value(), _template.__code__)


def test_too_many_keywords_rejected():
    with pytest.raises(ValueError):
        V.call(1, ["a", "b"])
