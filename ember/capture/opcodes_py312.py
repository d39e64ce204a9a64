"""Handlers for opcodes that CPython 3.12 and 3.13 added, mixed into the Translator.

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
        from ember.capture.interpreter import _reraised
        exc_vt = self.pop()
        exc = _exception_value(exc_vt)
        self.pop()
        self.pop()
        if not isinstance(exc, StopIteration):
            raise _reraised(exc_vt)
        self.push(ConstantVariable(None))
        self.push(exc_vt.value if getattr(exc_vt, "real_exception", None) is not None else ConstantVariable(exc.value))

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
            self.push_callable(attr)
        else:
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


    # -- 3.13 -----------------------------------------------------------------------------------------
    def LOAD_FAST_LOAD_FAST(self, inst):
        first, second = inst.argval
        self.LOAD_FAST(_Arg(None, first))
        self.LOAD_FAST(_Arg(None, second))

    def STORE_FAST_STORE_FAST(self, inst):
        first, second = inst.argval  # the top of the stack goes to the first name
        self.STORE_FAST(_Arg(None, first))
        self.STORE_FAST(_Arg(None, second))

    def STORE_FAST_LOAD_FAST(self, inst):
        stored, loaded = inst.argval
        self.STORE_FAST(_Arg(None, stored))
        self.LOAD_FAST(_Arg(None, loaded))

    def TO_BOOL(self, inst):
        # (before a conditional jump normalize makes it a NOP: the jump decides truth there)
        self.push(ConstantVariable(bool(self.pop().truth(self))))

    def CALL_KW(self, inst):
        # [callable, self or NULL, args..., kwarg values..., names] -> result
        self.kw_names = self.pop().as_constant()
        self.CALL(inst)

    def SET_FUNCTION_ATTRIBUTE(self, inst):
        # [value, function] -> function; 3.11's MAKE_FUNCTION flags, one at a time
        fn = self.pop()
        value = self.pop()
        if inst.arg == 0x01:
            fn.defaults_vts = tuple(value.unpack(self))
        elif inst.arg == 0x02:
            fn.kwdefaults_vts = dict(value.items)
        elif inst.arg == 0x04:
            fn.annotations = tuple(value.unpack(self))
        elif inst.arg == 0x08:
            fn.closure_cells = tuple(value.items)
        else:
            raise unsupported("EB0001", f"SET_FUNCTION_ATTRIBUTE {inst.arg}")
        self.push(fn)


class _Arg:
    """A stand-in instruction carrying only ``arg``/``argval`` (reusing a handler)."""

    def __init__(self, arg, argval=None):
        self.arg = arg
        self.argval = argval
