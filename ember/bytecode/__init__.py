"""ember.bytecode: code objects <-> editable instruction lists.

Standard library only (no torch).  See docs/bytecode.md.

    from ember.bytecode import decode, assemble, create_instruction
    insts = decode(fn.__code__)            # list[Instruction], jumps by reference
    ...edit...
    fn.__code__ = assemble(insts, fn.__code__)

Layers: ``instructions`` (decode, Instruction), ``tables`` (exception and
location table encoders), ``assemble``, ``analysis`` (stack depth, liveness,
exception blocks), ``versions`` (how calls are spelled on 3.11/3.12/3.13),
``resume`` (resume functions for graph breaks).
"""

from .instructions import (
    ExnTabEntry,
    Instruction,
    copy_instructions,
    create_instruction,
    decode,
    insert_instructions,
    localsplus_names,
)
from .assemble import assemble, fix_jump_directions
from .analysis import (
    active_exception_entries,
    active_with_blocks,
    live_locals,
    live_locals_at_all,
    max_stack_depth,
    reachable,
    stack_depths,
)
from .resume import ResumeCode, find_offset, leading_argument, make_resume_code, make_resume_function
from . import versions
from .validate import CodeValidationError, check_generated, validate_code
from .versions import (
    call,
    call_function,
    call_global,
    call_method,
    load_global,
    load_method,
    push_null_and_callable,
)

__all__ = [
    "Instruction",
    "ExnTabEntry",
    "decode",
    "assemble",
    "create_instruction",
    "copy_instructions",
    "insert_instructions",
    "localsplus_names",
    "fix_jump_directions",
    "stack_depths",
    "max_stack_depth",
    "reachable",
    "live_locals",
    "live_locals_at_all",
    "active_exception_entries",
    "active_with_blocks",
    "ResumeCode",
    "make_resume_code",
    "leading_argument",
    "make_resume_function",
    "find_offset",
    "versions",
    "CodeValidationError",
    "check_generated",
    "validate_code",
    "push_null_and_callable",
    "load_global",
    "load_method",
    "call",
    "call_function",
    "call_global",
    "call_method",
]
