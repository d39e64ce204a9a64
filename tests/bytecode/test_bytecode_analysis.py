"""Stack depth, reachability, liveness and exception-block analysis."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from bytecode_helpers import eb, is_op, module_code_objects

ci = eb.create_instruction


def idx(insts, opname, argval=None, nth=0):
    return [k for k, i in enumerate(insts) if is_op(i, opname, argval)][nth]


def test_max_stack_depth_equals_compiler_stacksize_on_stdlib():
    for name in ("inspect", "typing", "email.message"):
        for co in module_code_objects(name):
            assert eb.max_stack_depth(eb.decode(co)) == co.co_stacksize, co.co_qualname


def loop_with(xs, cm):
    acc = 0
    for x in xs:
        with cm:
            acc = acc + x
    return acc


def test_stack_depths_inside_for_and_with():
    insts = eb.decode(loop_with.__code__)
    depths = eb.stack_depths(insts)
    assert depths[0] == 0
    assert depths[idx(insts, "FOR_ITER")] == 1  # the iterator
    store_x = idx(insts, "STORE_FAST", "x")
    assert depths[store_x] == 2  # iterator + next item
    # inside the with body: iterator + bound __exit__
    body = idx(insts, "LOAD_FAST", "acc", 0)
    assert depths[body] == 2
    (with_block,) = eb.active_with_blocks(insts, body)
    assert with_block.depth == 2  # __exit__ is stack item depth-1 = 1, above the iterator
    assert depths[idx(insts, "RETURN_VALUE")] == 1


def test_reachable_marks_dead_code():
    end = ci("LOAD_CONST", argval=1)
    insts = [ci("RESUME", arg=0), ci("JUMP", target=end), ci("LOAD_CONST", argval=2), ci("RETURN_VALUE"), end, ci("RETURN_VALUE")]
    assert eb.reachable(insts) == [True, True, False, False, True, True]
    assert eb.stack_depths(insts) == [0, 0, None, None, 0, 1]


def liveness_example(a, b, flag):
    c = a + 1          # a read, c written
    d = 0              # d dead: overwritten before any read
    d = c * 2
    try:
        e = b / d
    except ZeroDivisionError:
        return flag    # flag read only by the handler
    del a              # deleting reads a (unbound would raise)
    return e


def test_liveness():
    insts = eb.decode(liveness_example.__code__)
    live = eb.live_locals_at_all(insts)
    at = lambda k: live[k]  # noqa: E731
    assert at(idx(insts, "RESUME")) == {"a", "b", "flag"}
    assert at(idx(insts, "LOAD_CONST", 0)) == {"a", "b", "flag", "c"}  # before d = 0: d dead
    assert "d" not in at(idx(insts, "LOAD_CONST", 0))
    try_body = idx(insts, "LOAD_FAST", "b")
    assert at(try_body) == {"a", "b", "d", "flag"}  # flag via the exception edge
    ret = idx(insts, "LOAD_FAST", "e", 0)
    assert at(ret) == {"e"}


def counter_loop(n):
    i = 0
    total = 0
    while i < n:
        total = total + i
        i = i + 1
    return total


def test_liveness_loop_carried_and_cells():
    insts = eb.decode(counter_loop.__code__)
    loop_test = idx(insts, "LOAD_FAST", "i", 0)
    assert eb.live_locals(insts, loop_test) == {"i", "n", "total"}

    def with_cell(x):
        y = x + 1
        def inner():
            return y
        return inner()

    insts = eb.decode(with_cell.__code__)
    # y is a cell read by the closure: live until MAKE_FUNCTION captures it.
    k = idx(insts, "LOAD_CLOSURE", "y")
    assert "y" in eb.live_locals(insts, k, with_cell.__code__.co_freevars)
    assert eb.live_locals(insts, idx(insts, "RETURN_VALUE")) == frozenset()


def nested_blocks(cm1, cm2):
    with cm1:
        try:
            with cm2:
                x = 1
        except ValueError:
            x = 2
    return x


def test_active_exception_entries_and_with_blocks():
    insts = eb.decode(nested_blocks.__code__)
    k = idx(insts, "STORE_FAST", "x", 0)
    entries = eb.active_exception_entries(insts, k)
    assert len(entries) >= 3  # cm2's with, the try, cm1's with (+ cleanups)
    withs = eb.active_with_blocks(insts, k)
    assert len(withs) == 2
    depths = eb.stack_depths(insts)
    # the two __exit__s sit below the current stack
    assert [w.depth for w in withs] == [2, 1]
    assert depths[k] >= 2
    assert eb.active_with_blocks(insts, idx(insts, "RETURN_VALUE")) == []


def test_library_imports_only_stdlib_and_never_torch():
    pkg = Path(__file__).resolve().parents[2] / "ember" / "bytecode"
    files = sorted(pkg.glob("*.py"))
    assert len(files) >= 6
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = [node.module.split(".")[0]]
            else:
                continue
            for root in roots:
                assert root in sys.stdlib_module_names or root == "__future__", (path.name, root)
    here = Path(__file__).resolve().parent
    code = (
        f"import sys; sys.path.insert(0, {str(here)!r}); "
        "from _ember_import import import_bytecode_package as i; i(bare=True); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
