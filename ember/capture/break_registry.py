"""The graph-break registry: every reason ember can give for a graph break, with a stable id.

Each ``unsupported("EB0016", detail)`` call in ``ember/capture`` names one entry of `BREAKS`;
the detail (which value, which call) stays part of the message, the entry adds what kind of
break it is and what the user can change::

    EB0016: data-dependent branch: the truth value of a tensor depends on its data
      — hint: use torch.where / torch.cond, or move the branch out of the compiled function

Ids are stable: an entry is never renumbered or reused (a retired one keeps its id, marked so).
``docs/graph_breaks.md`` is generated from this table (``python -m ember.report.break_docs``),
and a test checks that every call site names a registered id and every id is used.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class BreakKind:
    id: str            # "EB0016"
    title: str         # a few words, e.g. "data-dependent branch"
    explanation: str   # one line: what ember could not put in a graph, and why
    hint: str          # what the user can change


def _k(id: str, title: str, explanation: str, hint: str) -> BreakKind:
    return BreakKind(id, title, explanation, hint)


#: The table. One entry per class of reason (several call sites share one).
BREAKS: dict[str, BreakKind] = {k.id: k for k in (
    _k("EB0000", "unclassified",
       "A reason raised without a registry id (outside the capture layer's call sites, e.g. compiled "
       "autograd, or an `Unsupported` made directly): the message says what happened.",
       "See the message; if it is a graph break in ember's capture, please report it (it should name an id)."),
    _k("EB0001", "unsupported bytecode",
       "The frame uses a bytecode instruction ember's interpreter does not model.",
       "Move that code into a function decorated with torch.compiler.disable, or report the opcode."),
    _k("EB0002", "the program raises here",
       "The traced code raises a Python exception that nothing in the compiled frame catches; eager "
       "raises it at the same instruction.",
       "Nothing to change for ember: the frame runs eagerly from here and raises as eager does. Fix "
       "the error, or catch it inside the compiled function."),
    _k("EB0003", "inlining depth limit",
       "ember inlines Python calls; a call chain deeper than the limit (usually recursion) stops the trace.",
       "Make the recursion shallower, or decorate the recursive function with torch.compiler.disable."),
    _k("EB0004", "generator or coroutine function",
       "A coroutine, async generator, or a generator function compiled directly cannot be traced.",
       "Compile the function that iterates the generator instead; keep async code out of the compiled region."),
    _k("EB0005", "generator protocol",
       "A generator operation ember does not model (yield from over a non-generator, send/throw, "
       "StopIteration carrying a tensor).",
       "Iterate the generator with a plain for loop inside the compiled function."),
    _k("EB0006", "iterator live across a break",
       "An iterator or generator made in the frame escapes it, or is still in use across a graph "
       "break, and ember cannot rebuild its position.",
       "Materialise it first (list(...)), or move the code that breaks out of the loop."),
    _k("EB0007", "endless iterator",
       "An iterator produced more items than ember unrolls (an infinite iterator?).",
       "Bound the iteration (itertools.islice, a range), or loop over a finite container."),
    _k("EB0008", "deleting a global, nonlocal or attribute",
       "The frame deletes a global, a nonlocal or an attribute in a way ember cannot replay.",
       "Do the deletion outside the compiled function."),
    _k("EB0009", "closure cell",
       "Assigning a nonlocal variable, or a closure cell ember does not know.",
       "Return the new value instead of assigning a nonlocal, or hold it in a mutable object "
       "(a list or dict) that the closure reads."),
    _k("EB0010", "import in the compiled region",
       "An import statement runs inside the compiled region.",
       "Import at module level."),
    _k("EB0011", "exception state",
       "An exception operation ember cannot model (raising a non-exception, raise ... from a tensor, "
       "reading a traceback, an except block entered before the trace).",
       "Keep the exception handling outside the compiled function, or decorate the function that "
       "raises with torch.compiler.disable."),
    _k("EB0012", "break inside try/except",
       "A graph break at a point the resume code cannot reproduce (inside an except block, a handler "
       "deeper than the stack, a pending call around a try block).",
       "Move the call that breaks the graph out of the try block, or disable the function holding it."),
    _k("EB0013", "break inside a with block",
       "A graph break inside a `with` block whose context manager ember cannot exit and re-enter "
       "around the break.",
       "Move the call that breaks the graph out of the with block."),
    _k("EB0014", "context manager",
       "A `with` on a context manager ember does not model (or used in a way it does not model).",
       "Enter it outside the compiled function, or use one ember supports (no_grad, enable_grad, "
       "autocast with a device_type, catch_warnings)."),
    _k("EB0015", "value escapes the frame",
       "The frame returns (or leaves behind) a value ember cannot rebuild after the graph "
       "(an object that refers to itself, a module built in the frame).",
       "Return tensors, Python constants, or containers of them; build such objects outside "
       "the compiled function."),
    _k("EB0016", "data-dependent branch",
       "Python control flow (if, bool(), ==, in, min/max) on a value that depends on a tensor's data: "
       "the trace cannot know which way it goes.",
       "Use torch.where / torch.cond instead of Python control flow on tensor values, or move the "
       "branch out of the compiled function."),
    _k("EB0017", "reading tensor data into Python",
       "A tensor's data read into a Python value (.item(), .tolist(), int(), float(), str.format).",
       "Set ember.config.capture_scalar_outputs = True to keep .item() / .tolist() in the graph, "
       "or move the read after the compiled function."),
    _k("EB0018", "decision on a data-dependent value",
       "A branch or conversion on an unbacked (data-dependent) symbol, e.g. the value of .item() "
       "under capture_scalar_outputs: the trace cannot decide it.",
       "Move the branch out of the compiled function, use torch.cond, or state what holds with "
       "torch._check (e.g. torch._check(n >= 0))."),
    _k("EB0019", "data-dependent output shape",
       "An operation whose output shape depends on the data (nonzero, unique, masked_select, "
       "repeat_interleave with a tensor).",
       "Set ember.config.capture_dynamic_output_shape_ops = True (and capture_scalar_outputs), or "
       "move the operation out of the compiled function."),
    _k("EB0020", "operation ember cannot trace",
       "A torch operation failed or gave something unexpected on fake tensors (no fake/meta "
       "implementation, an error while tracing).",
       "For a custom op, register a fake implementation (torch.library.register_fake); otherwise "
       "decorate the calling function with torch.compiler.disable and report it."),
    _k("EB0021", "write a functional graph cannot express",
       "An in-place operation whose effect a functional graph cannot express (a write into an "
       "expanded tensor, a write over memory it reads, a mask write that needs grad, a new leaf "
       "that requires grad, an out= tensor that is not contiguous or is resized to a dynamic shape).",
       "Use the out-of-place form (x = x.add(y) rather than x.add_(y)), or .clone() the target first."),
    _k("EB0022", "non-strided tensor",
       "A sparse (or other non-strided layout) tensor: ember's graphs hold strided tensors only.",
       "Convert with .to_dense() before the compiled function, or keep sparse code outside it."),
    _k("EB0023", "tensor leaves torch",
       "A tensor operation that leaves torch's ops (storage, data_ptr, pickling, .numpy(), "
       "__dlpack__, set_).",
       "Do it outside the compiled function."),
    _k("EB0024", "autograd inside the frame",
       "The frame drives autograd itself (backward(), torch.autograd.grad, hooks, retain_grad, "
       ".grad of a computed tensor, requires_grad_(), grad_fn).",
       "Compile the forward (and loss) only and call backward() outside the compiled function."),
    _k("EB0025", "global torch state",
       "The frame changes process-wide torch state (RNG seed, default dtype, deterministic "
       "algorithms, other set_* calls).",
       "Set global state outside the compiled function."),
    _k("EB0026", "print, I/O or logging",
       "A call with a side effect outside the graph (print, torch.save/load, logging with the stack).",
       "Remove it from the compiled region, or guard it with `if not torch.compiler.is_compiling():`."),
    _k("EB0027", "torch function not supported",
       "A torch function ember runs eagerly (not supported yet, or another compiler's internals).",
       "Decorate the calling function with torch.compiler.disable to make the break explicit, "
       "and report the function."),
    _k("EB0028", "graph_break() requested",
       "The program asked for a graph break.",
       "Remove the graph_break() call to get one graph."),
    _k("EB0029", "torch.compiler.disable callee",
       "The callee is marked torch.compiler.disable: it runs eagerly.",
       "Remove the decorator if the callee should be compiled."),
    _k("EB0030", "argument a torch op cannot take",
       "A value passed to a torch operation that cannot be a graph argument (a Python object, "
       "a NumPy scalar).",
       "Pass tensors or Python numbers (torch.as_tensor(...) outside the compiled function)."),
    _k("EB0031", "attribute ember cannot read",
       "Reading an attribute ember cannot model (a descriptor, a C-level slot, an attribute of a "
       "value it cannot name).",
       "Read the attribute outside the compiled function and pass the value in."),
    _k("EB0032", "mutation ember cannot replay",
       "Assigning an attribute or mutating an object in a way ember cannot replay after the graph "
       "(a custom __setattr__, a descriptor, an object it cannot name, __dict__ after writes).",
       "Move the mutation outside the compiled function, or mutate a plain attribute of an input or module."),
    _k("EB0033", "call ember does not trace",
       "A call into a C function or a library ember does not trace into, or a value it cannot call.",
       "Replace it with torch operations, or decorate the caller with torch.compiler.disable."),
    _k("EB0034", "iteration or truth of an unsupported object",
       "Iterating, or taking the truth value of, an object ember does not model.",
       "Iterate a list, tuple, dict or tensor instead, or move the loop out of the compiled function."),
    _k("EB0035", "unhashable or unsupported key",
       "A value used as a dict key or set element that ember cannot hash as Python would "
       "(its own __eq__/__hash__, a tensor-dependent value).",
       "Key the dict by strings or ints, or by objects with default identity hashing."),
    _k("EB0036", "non-constant where a constant is needed",
       "A value that is not a Python constant during the trace (a tensor, a symbolic size) used "
       "where ember needs a constant (slice bounds, math.*, a type, an argument of a builtin).",
       "Compute it from Python numbers, or use the torch equivalent (torch.sqrt rather than math.sqrt)."),
    _k("EB0037", "builtin call ember cannot model",
       "A builtin (isinstance, id, next, type, inspect.signature, ...) called with arguments ember "
       "does not model.",
       "Call it outside the compiled function, or on plain Python values."),
    _k("EB0038", "operator on unsupported operands",
       "A Python operator (+, |, ==, <, **, match) on operands ember does not model, or a "
       "user operator returning a non-constant.",
       "Use tensors or plain Python values as operands, or move the code out of the compiled function."),
    _k("EB0039", "container operation",
       "A container method or indexing that ember does not model (deque, dict view, OrderedDict, "
       "set, module lists).",
       "Use a plain list/dict/tuple operation, or do it outside the compiled function."),
    _k("EB0040", "string formatting",
       "Formatting a value ember cannot format at trace time into a string.",
       "Format constants only, or build the string outside the compiled function."),
    _k("EB0041", "copy / deepcopy",
       "copy.copy / copy.deepcopy of a value ember cannot copy like eager (a view, a tensor with "
       "a .grad, a custom copy protocol).",
       "Copy outside the compiled function, or use tensor.clone()."),
    _k("EB0042", "constructing an object",
       "Constructing an object in the frame that ember cannot build (a C __new__/__init__, a "
       "stateful module, __new__ returning another object).",
       "Construct it outside the compiled function and pass it in."),
    _k("EB0043", "module hooks",
       "Module hooks ember does not trace (backward hooks, always-called forward hooks, hooks on a "
       "module it cannot name).",
       "Remove the hook during compilation, or register it on the compiled module's callers."),
    _k("EB0044", "lazy module",
       "A lazy module (nn.LazyLinear) initialised in the frame where ember cannot build its "
       "parameters at trace time.",
       "Run the model once eagerly before compiling it (it initialises the lazy modules)."),
    _k("EB0045", "autograd.Function.apply arguments",
       "autograd.Function.apply called with arguments ember cannot bind to forward (keywords, "
       "missing arguments, an unknown class).",
       "Pass forward's arguments positionally."),
    _k("EB0046", "autograd.Function ctx",
       "A use of the Function's ctx ember does not model (attributes holding non-tensors, "
       "mark_non_differentiable of a non-output, save_for_backward of a non-tensor).",
       "Save tensors with ctx.save_for_backward and plain Python values as ctx attributes."),
    _k("EB0047", "autograd.Function mark_dirty",
       "ctx.mark_dirty in a case ember does not model (a view, a leaf, an input resized or "
       "not returned).",
       "Mark only inputs that forward modifies in place and returns."),
    _k("EB0048", "autograd.Function backward",
       "A custom autograd.Function whose backward ember cannot trace (reads outside tensors, branches "
       "on a tensor's value, wrong number or shape of gradients, no backward, a jvp (forward-mode AD) "
       "where a node is recorded, a saved tensor changed later, an in-place write to a tensor on ctx "
       "that the program holds).",
       "Make backward a function of ctx's saved tensors and grad outputs only, returning one "
       "gradient per forward input."),
    _k("EB0049", "activation checkpoint",
       "torch.utils.checkpoint used in a way ember does not trace (no use_reentrant, context_fn, "
       "debug, side effects in the checkpointed function).",
       "Pass use_reentrant=False and keep the checkpointed function free of Python side effects."),
    _k("EB0050", "torch.cond",
       "torch.cond called in a way ember does not trace (branches returning different structures, "
       "aliasing outputs, a non-tensor predicate).",
       "Give both branches the same operands and outputs of the same structure, shapes and dtypes."),
    _k("EB0051", "side effects in a traced region",
       "A region traced as its own subgraph (a cond branch, a checkpointed function) has side "
       "effects, mutates an input or lets a value escape.",
       "Keep such regions pure: return what they compute."),
    _k("EB0052", "NumPy array input",
       "An np.ndarray ember cannot bring into the graph (a subclass, an unsupported dtype or "
       "strides, read-only, shared memory with another input).",
       "Convert it with torch.from_numpy (or np.ascontiguousarray) before the compiled function."),
    _k("EB0053", "NumPy call",
       "A NumPy call or attribute without a torch._numpy equivalent, or whose traced result "
       "would differ from NumPy's (RNG, warnings, dtypes).",
       "Use the torch equivalent, or call NumPy outside the compiled function."),
    _k("EB0054", "TorchScript object",
       "A method call on, or a torch op given, a TorchScript (torchbind) object ember cannot trace: "
       "its class has no registered fake class and does not declare itself safe to trace with the "
       "real object, the fake class lacks that method, or the use needs what a graph cannot give "
       "(autograd, a rollback, an unguarded non-tensor answer, a backend that traces the graph again).",
       "Register a fake class with torch._library.register_fake_class('ns::Cls') implementing the "
       "methods used (and __obj_unflatten__), or call the object outside the compiled function."),
    _k("EB0055", "associative_scan",
       "torch's associative_scan called in a way ember does not trace (a combine_mode other than "
       "'generic', a combine_fn that reads tensors from outside its arguments or returns other "
       "shapes, leaves that are not a tensor or a flat tuple/list of tensors).",
       "Use combine_mode='generic', pass every tensor combine_fn needs through xs, and return the "
       "inputs' structure."),
    _k("EB0056", "lru_cache-wrapped call",
       "A call of a functools.lru_cache-wrapped function whose answer ember cannot take from the "
       "cache and guard: the wrapper has no name ember can guard, maxsize=0, a cache ember cannot "
       "read without calling it, or a first call (a miss) while side effects wait to be replayed "
       "(the body runs eagerly at the call instead).",
       "Call the function once before the compiled code runs (warming its cache), or pass its "
       "result in as an argument."),
)}


def lookup(id: str | None) -> BreakKind:
    """The entry for ``id`` (the unclassified one for an unknown id)."""
    return BREAKS.get(id or "EB0000", BREAKS["EB0000"])


def render_markdown() -> str:
    """``docs/graph_breaks.md``: the table as a page, one section per id."""
    lines = ["# Graph breaks", "",
             "<!-- generated by `python -m ember.report.break_docs` from ember/capture/break_registry.py;"
             " do not edit by hand -->", "",
             "Every reason ember gives for a graph break (or, under `fullgraph=True`, an "
             "`ember.Unsupported` error) names one of these ids. The message reads",
             "", "    EB0016: <what happened, with the values involved> — hint: <what to change>", "",
             "`ember.explain(fn)(*args)` lists each break with its id and hint, and `Unsupported` "
             "exceptions carry `.id`, `.explanation` and `.hint`.", "",
             "| id | kind |", "| --- | --- |"]
    lines += [f"| [{k.id}](#{k.id.lower()}) | {k.title} |" for k in BREAKS.values()]
    for k in BREAKS.values():
        lines += ["", f"## {k.id}", "", f"**{k.title}.** {k.explanation}", "", f"Hint: {k.hint}"]
    return "\n".join(lines) + "\n"
