"""Resume functions continue a frame from the middle and give the same result."""

from __future__ import annotations

import copy
import sys
import types

import pytest

from bytecode_helpers import eb, is_op


def run_capturing_locals(fn, offset, *args):
    """Run ``fn`` and capture its locals the first time it reaches ``offset``
    (the state a graph break there would hand to the resume function)."""
    captured = {}

    def tracer(frame, event, arg):
        if frame.f_code is not fn.__code__:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode" and frame.f_lasti == offset and "hit" not in captured:
            # deep copy: the rest of the run will mutate the objects in place
            captured["hit"] = copy.deepcopy(dict(frame.f_locals))
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = fn(*args)
    finally:
        sys.settrace(old)
    return captured.get("hit"), result


def resume_fn(fn, k, depth=0, live=None, insts=None, **kw):
    insts = insts or eb.decode(fn.__code__)
    if live is None:
        live = sorted(eb.live_locals(insts, k, fn.__code__.co_freevars))
    r = eb.make_resume_code(fn.__code__, k, depth, live, **kw)
    assert r.code.co_name == f"resume_at_{insts[k].offset}"
    return eb.make_resume_function(fn, r), r


def straight(a, b):
    c = a * 2
    d = c + b
    s = str(d) + "!"
    e = [a, b, c, d]
    return s, e, d - a


def looping(n):
    i = 0
    acc = []
    while i < n:
        if i % 2:
            acc.append(i * i)
        else:
            acc.append(-i)
        i += 1
    total = sum(acc)
    return total, acc


def guarded(a, b):
    x = a * 2
    try:
        y = x + 1
        z = y / b
    except ZeroDivisionError:
        return ("caught", x)
    return z


def make_closure(n):
    def scaled(xs):
        s = 0
        i = 0
        while i < len(xs):
            s = s + xs[i] * n
            i = i + 1
        return s

    return scaled


def cells(a):
    k = a + 1
    m = a * 10
    def inner():
        return k + m
    return inner()


CASES = [
    (straight, (3, 4)),
    (looping, (7,)),
    (guarded, (2, 4)),
    (guarded, (2, 0)),
    (make_closure(3), ([1, 2, 3],)),
    (cells, (5,)),
]


@pytest.mark.parametrize("fn, args", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_resume_at_every_depth0_point_matches_original(fn, args):
    insts = eb.decode(fn.__code__)
    depths = eb.stack_depths(insts)
    expected = fn(*args)
    tried = 0
    for k, instr in enumerate(insts):
        if depths[k] != 0 or instr.opname in ("RESUME", "MAKE_CELL", "COPY_FREE_VARS"):
            continue
        state, result = run_capturing_locals(fn, instr.offset, *args)
        assert result == expected
        if state is None:
            continue  # not executed with these inputs
        live = sorted(eb.live_locals(insts, k, fn.__code__.co_freevars))
        assert set(live) <= set(state), (instr, live, state)
        g, r = resume_fn(fn, k, live=live, insts=insts)
        assert r.live_locals == tuple(live)
        assert sorted(r.argnames) == live  # a method's first argument, when live, is passed first
        assert g(*[state[v] for v in r.argnames]) == expected, instr
        tried += 1
    assert tried >= 3


def doubled(xs):
    total = 0
    for x in xs:
        total += x * 2
    return total


def test_resume_inside_for_loop_with_iterator_on_stack():
    insts = eb.decode(doubled.__code__)
    k = next(k for k, i in enumerate(insts) if i.opname == "STORE_FAST" and i.argval == "x") + 1
    assert eb.stack_depths(insts)[k] == 1
    assert eb.live_locals(insts, k) == {"total", "x"}
    g, r = resume_fn(doubled, k, depth=1, live=["total", "x"])
    assert r.stack_args == ("___stack0",)
    xs = [1, 2, 3, 4]
    it = iter(xs)
    first = next(it)
    # state of the frame after the first iteration and the fetch of the second
    second = next(it)
    assert g(it, first * 2, second) == doubled(xs) == 20


class Recorder:
    def __init__(self, suppress=False):
        self.log, self.suppress = [], suppress

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, typ, val, tb):
        self.log.append(("exit", typ))
        return self.suppress


def in_with(cm, v):
    with cm:
        y = v + 1
        z = y * 2
    return "after", z


@pytest.mark.parametrize("value, suppress", [(1, False), ("bad", True), ("bad", False)])
def test_resume_inside_with_block_closes_it(value, suppress):
    insts = eb.decode(in_with.__code__)
    k = next(k for k, i in enumerate(insts) if is_op(i, "LOAD_FAST", "v"))
    assert eb.stack_depths(insts)[k] == 1  # the bound __exit__
    (block,) = eb.active_with_blocks(insts, k)
    assert block.depth == 1
    g, r = resume_fn(in_with, k, depth=1, live=["v"])
    cm = Recorder(suppress)
    cm.__enter__()  # what BEFORE_WITH did before the break
    if value == 1:
        assert g(cm.__exit__, value) == ("after", 4)
        assert cm.log == ["enter", ("exit", None)]
    elif suppress:
        # exception inside the block goes to the preserved handler; __exit__ swallows it
        with pytest.raises(UnboundLocalError):
            g(cm.__exit__, value)
        assert cm.log == ["enter", ("exit", TypeError)]
    else:
        with pytest.raises(TypeError):
            g(cm.__exit__, value)
        assert cm.log == ["enter", ("exit", TypeError)]


def helper(a, b):
    return ("helper", a, b)


def calls(a, b):
    return helper(a, b + 1)


def test_resume_in_middle_of_call_recreates_null():
    insts = eb.decode(calls.__code__)
    k = next(k for k, i in enumerate(insts) if i.opname == "LOAD_CONST" and i.argval == 1)  # the `1` of b + 1
    assert eb.stack_depths(insts)[k] == 4  # NULL, helper, a, b (3.13: helper, NULL, a, b)
    null = 0 if eb.versions.null_before_callable() else 1
    g, r = resume_fn(calls, k, depth=4, live=[], null_positions=[null])
    assert r.stack_args == tuple(f"___stack{p}" for p in range(4) if p != null) and r.null_positions == (null,)
    assert g(helper, 5, 7) == calls(5, 7) == ("helper", 5, 8)


def test_resume_rejects_bad_requests():
    def gen():
        yield 1

    with pytest.raises(NotImplementedError):
        eb.make_resume_code(gen.__code__, 3, 0, [])
    insts = eb.decode(doubled.__code__)
    k = next(k for k, i in enumerate(insts) if i.opname == "STORE_FAST" and i.argval == "x") + 1
    with pytest.raises(ValueError, match="stack depth"):
        eb.make_resume_code(doubled.__code__, k, 0, ["total", "x"])
    with pytest.raises(ValueError, match="not locals"):
        eb.make_resume_code(doubled.__code__, k, 1, ["nope"])


def test_resume_code_preserves_exception_table_entries():
    insts = eb.decode(guarded.__code__)
    k = next(k for k, i in enumerate(insts) if is_op(i, "LOAD_FAST", "y"))
    g, r = resume_fn(guarded, k, live=["b", "x", "y"])
    new = eb.decode(r.code)
    handlers = {i.exn_tab_entry.target.opname for i in new if i.exn_tab_entry is not None}
    assert "PUSH_EXC_INFO" in handlers
    assert len({id(i.exn_tab_entry) for i in new if i.exn_tab_entry}) == len(
        {id(i.exn_tab_entry) for i in insts if i.exn_tab_entry})
    assert g(0, 4, 5) == ("caught", 4)
    assert g(2, 4, 5) == 2.5


class _Base:
    def f(self, x):
        return x * 2


class _WithCellSelf(_Base):
    def f(self, x):
        get = lambda: self.k  # noqa: E731 - self is a cell of f
        self.k = 3
        y = x + 1
        return super().f(y) * get(), get


def test_resume_keeps_first_argument_first_and_takes_cells_by_reference():
    # Zero-argument super() reads the frame's first slot (here a cell holding self) and the
    # __class__ cell: the resume function keeps `self` first and receives the cell itself, which
    # a closure made before the resume point shares.
    code = _WithCellSelf.f.__code__
    insts = eb.decode(code)
    k = next(i for i, ins in enumerate(insts) if ins.opname == "BINARY_OP")  # y = x + 1
    depth = eb.stack_depths(insts)[k]
    live = sorted(set(eb.live_locals(insts, k, code.co_freevars)) | {"self"})
    r = eb.make_resume_code(code, k, depth, live, cells_by_reference=True)
    eb.validate_code(r.code)
    assert r.argnames[0] == "self" and r.cell_args == ("self",)
    g = eb.make_resume_function(_WithCellSelf.f, r)
    obj = _WithCellSelf()
    cell = types.CellType(obj)
    get = eval("lambda: cell.cell_contents.k", {"cell": cell})
    obj.k = 3
    args = {"self": cell, "get": get, "___stack0": 5, "___stack1": 1}
    out, got = g(*[args[a] for a in r.argnames])
    assert out == _WithCellSelf().f(5)[0] and got is get
    # A frame of it can be inspected (debuggers, pytest read f_locals).
    frames = []

    def tracer(frame, event, arg):
        if frame.f_code is r.code and event == "return":
            frames.append(dict(frame.f_locals))
        return tracer
    sys.settrace(tracer)
    try:
        g(*[args[a] for a in r.argnames])
    finally:
        sys.settrace(None)
    assert frames and "self" in frames[0]
