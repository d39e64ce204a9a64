"""Handlers for opcodes that CPython 3.12 added (and 3.13 kept), mixed into the Translator.

The spellings that merely changed between versions (conditional jumps, method loads, FOR_ITER's
exit, intrinsics with a 3.11 opcode of their own) are folded by
`ember.bytecode.normalize.interpreter_instructions`, so the existing handlers serve them; what is
here has no 3.11 counterpart of one instruction. None of it tests the version: on 3.11 these
opnames never occur.
"""
from __future__ import annotations

import dis

from ember.capture.variables.base import NULL, ConstantVariable, unsupported
from ember.exc import PythonException

_END_FOR_POPS = -dis.stack_effect(dis.opmap["END_FOR"]) if "END_FOR" in dis.opmap else 2


class Py312OpcodeMixin:
    def RETURN_CONST(self, inst):
        self.result = ConstantVariable(inst.argval)

    # -- slices: `a[i:j]` / `a[i:j] = v` without BUILD_SLICE ------------------------------------------
    def BINARY_SLICE(self, inst):
        # [container, start, stop] -> container[start:stop]
        stop, start = self.pop(), self.pop()
        self.push(start)
        self.push(stop)
        self.BUILD_SLICE(_Arg(2))
        self.BINARY_SUBSCR(inst)

    def STORE_SLICE(self, inst):
        # [value, container, start, stop] -> container[start:stop] = value
        stop, start = self.pop(), self.pop()
        self.push(start)
        self.push(stop)
        self.BUILD_SLICE(_Arg(2))
        self.STORE_SUBSCR(inst)

    # -- loops: FOR_ITER's exit already skips END_FOR (see normalize); a jump to it pops as CPython
    def END_FOR(self, inst):
        for _ in range(_END_FOR_POPS):
            self.release_references(self.pop())

    def END_SEND(self, inst):
        # [sub-iterator, value] -> value (SEND's return path already skips it: see normalize)
        value = self.pop()
        self.release_references(self.pop())
        self.push(value)

    def CLEANUP_THROW(self, inst):
        # Handler of a `yield from` whose sub-iterator raised on throw()/close():
        # [sub-iterator, last sent, exception] -> [None, its value] for a StopIteration (END_SEND
        # follows), else the exception propagates.
        from ember.capture.interpreter import _exception_value
        exc = _exception_value(self.pop())
        self.pop()
        self.pop()
        if not isinstance(exc, StopIteration):
            raise PythonException(exc)
        self.push(ConstantVariable(None))
        self.push(ConstantVariable(exc.value))

    # -- inlined comprehensions (PEP 709) ---------------------------------------------------------
    def LOAD_FAST_AND_CLEAR(self, inst):
        # Saves the outer binding of a comprehension variable (NULL when unbound) and unbinds it;
        # the STORE_FAST after the comprehension puts it back (a NULL there unbinds again).
        self.push(self.locals.pop(inst.argval, NULL))

    # -- zero- and two-argument super() ---------------------------------------------------------------
    def LOAD_SUPER_ATTR(self, inst):
        # [global super, class, self] -> attribute (with the method bit: NULL, attribute)
        obj, cls, sup = self.pop(), self.pop(), self.pop()
        builtin = getattr(sup, "fn", None) is super or getattr(sup, "value", None) is super
        if not inst.arg & 2 and not builtin:
            raise unsupported("EB0001", "zero-argument super() through a global `super` that is not the builtin")
        # CPython passes the class and the first argument explicitly for super() too.
        bound = sup.call(self, [cls, obj], {})
        attr = self.getattr(bound, inst.argval)
        if inst.arg & 1:
            self.push(NULL)
        self.push(attr)

    # -- intrinsics without a 3.11 opcode (normalize names them INTRINSIC_<NAME>) ---------------------
    def INTRINSIC_STOPITERATION_ERROR(self, inst):
        # A generator's StopIteration escaping its body becomes RuntimeError (PEP 479); the handler
        # then re-raises what this leaves on the stack.
        exc = self.stack[-1].as_constant() if self.stack[-1].is_constant() else None
        if isinstance(exc, StopIteration):
            err = RuntimeError("generator raised StopIteration")
            err.__cause__ = err.__context__ = exc
            self.stack[-1] = ConstantVariable(err)

    def INTRINSIC_PRINT(self, inst):
        raise unsupported("EB0026", "print of an interactive expression statement")


class _Arg:
    """A stand-in instruction carrying only ``arg`` (reusing a handler with a fixed count)."""

    def __init__(self, arg):
        self.arg = arg
