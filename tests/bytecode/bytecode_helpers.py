"""Shared helpers for the ember.bytecode tests."""

from __future__ import annotations

import contextlib
import dis
import importlib
import sys
import types

from _ember_import import import_bytecode_package

eb = import_bytecode_package()

# Fields that must be identical when nothing was edited.
EXACT_FIELDS = (
    "co_code",
    "co_exceptiontable",
    "co_linetable",
    "co_stacksize",
    "co_consts",
    "co_names",
    "co_varnames",
    "co_cellvars",
    "co_freevars",
    "co_flags",
    "co_argcount",
)


def is_op(instr, opname: str, argval=None) -> bool:
    """``instr`` is ``opname`` (with ``argval``), allowing for 3.13's spellings: a
    ``LOAD_FAST_LOAD_FAST`` pair starts with a load of its first name, and
    ``LOAD_CLOSURE`` became ``LOAD_FAST``."""
    if instr.opname == opname and (argval is None or instr.argval == argval):
        return True
    if opname == "LOAD_FAST" and instr.opname == "LOAD_FAST_LOAD_FAST":
        return argval is None or instr.argval[0] == argval
    if opname == "LOAD_CLOSURE" and sys.version_info >= (3, 13) and instr.opname == "LOAD_FAST":
        return argval is None or instr.argval == argval
    return False


def all_code_objects(root: types.CodeType) -> list[types.CodeType]:
    out, stack = [], [root]
    while stack:
        co = stack.pop()
        out.append(co)
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return out


def module_code_objects(module_name: str) -> list[types.CodeType]:
    """Fresh code objects compiled from the module's source (the loaded
    functions' code may have been specialised in place; co_code hides that,
    but fresh objects keep the test independent of it)."""
    mod = importlib.import_module(module_name)
    return all_code_objects(mod.__loader__.get_code(mod.__name__))


def dis_signature(co: types.CodeType) -> list[tuple]:
    """(opname, argval) per instruction, ignoring CACHE/EXTENDED_ARG and the
    absolute jump offsets (compared through the jump target's index)."""
    insts = [i for i in dis.get_instructions(co) if i.opname not in ("CACHE", "EXTENDED_ARG")]
    start_of = {}
    # A jump may land on an EXTENDED_ARG prefix; map it to the real instruction.
    pending = []
    index = 0
    for i in dis.get_instructions(co):
        if i.opname == "CACHE":
            continue
        pending.append(i.offset)
        if i.opname != "EXTENDED_ARG":
            for off in pending:
                start_of[off] = index
            pending = []
            index += 1
    sig = []
    for i in insts:
        if i.opcode in dis.hasjrel or i.opcode in dis.hasjabs:
            sig.append((i.opname, "->", start_of[i.argval]))
        else:
            sig.append((i.opname, i.argval if i.argval == i.argval else "nan"))
    return sig


def roundtrip(co: types.CodeType) -> types.CodeType:
    return eb.assemble(eb.decode(co), co)


def roundtrip_deep(co: types.CodeType) -> types.CodeType:
    """Round trip ``co`` and, recursively, the code objects in its co_consts
    (lambdas, comprehensions, nested functions), so running the result
    exercises reassembled code all the way down."""
    mapping = {id(c): roundtrip_deep(c) for c in co.co_consts if isinstance(c, types.CodeType)}
    insts = eb.decode(co)
    for instr in insts:
        if instr.opcode in dis.hasconst and id(instr.argval) in mapping:
            instr.argval = mapping[id(instr.argval)]
    consts = [mapping.get(id(c), c) for c in co.co_consts]
    return eb.assemble(insts, co, consts=consts)


def functions_of(module) -> list[types.FunctionType]:
    """Plain Python functions and methods defined in ``module``."""
    seen, out = set(), []

    def add(obj):
        obj = getattr(obj, "__func__", obj)
        if isinstance(obj, types.FunctionType) and obj.__module__ == module.__name__ and id(obj) not in seen:
            seen.add(id(obj))
            out.append(obj)

    for value in vars(module).values():
        add(value)
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr in vars(value).values():
                if isinstance(attr, property):
                    for f in (attr.fget, attr.fset, attr.fdel):
                        add(f)
                else:
                    add(attr)
    return out


@contextlib.contextmanager
def swapped_code(modules):
    """Replace ``__code__`` of every function in ``modules`` with its
    deep decode+assemble round trip (nested code objects reassembled too);
    restore afterwards."""
    saved = []
    try:
        for mod in modules:
            for fn in functions_of(mod):
                new = roundtrip_deep(fn.__code__)
                assert new is not fn.__code__
                saved.append((fn, fn.__code__))
                fn.__code__ = new
        yield saved
    finally:
        for fn, code in saved:
            fn.__code__ = code
