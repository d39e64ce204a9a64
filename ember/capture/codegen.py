"""Generated Python for a cache entry: guards + graph call + return value, in one function.

The generated function has the *same signature* as the user's function, so
binding arguments costs nothing extra and a call with the wrong arguments
raises exactly eager's ``TypeError``. Its body checks every guard (returning
``MISS`` on failure), calls the compiled graph with the graph inputs read from
their sources, and rebuilds the return value around the graph's outputs.
"""
from __future__ import annotations

import inspect
import types
from typing import Any

from ember.bytecode.validate import check_generated

MISS = object()  # returned by an entry whose guards do not hold


def parameter_text(code: types.CodeType) -> str:
    """The parameter list of ``code`` as source text, without defaults."""
    names = code.co_varnames
    argc, posonly, kwonly = code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount
    parts = list(names[:argc])
    if posonly:
        parts.insert(posonly, "/")
    i = argc + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        parts.append("*" + names[i])
        i += 1
    elif kwonly:
        parts.append("*")
    parts.extend(names[argc:argc + kwonly])
    if code.co_flags & inspect.CO_VARKEYWORDS:
        parts.append("**" + names[i])
    return ", ".join(parts)


def parameter_names(code: types.CodeType) -> list[str]:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return list(code.co_varnames[:n])


# Names through which a frame can read its locals without LOAD_FAST: `locals()`, `vars()`, `dir()`,
# `eval`/`exec`, frame objects. Zero-argument `super()` reads the first argument from the frame.
_FRAME_READERS = frozenset({"locals", "vars", "dir", "eval", "exec", "_getframe", "currentframe", "stack",
                            "f_locals", "getframeinfo", "signature", "breakpoint"})


def unread_parameters(code: types.CodeType) -> frozenset:
    """Parameters the frame never reads (dead on entry: never loaded, or stored before any load).

    The trace does not wrap them, so they add no guards: a tensor argument the function ignores
    may change shape or dtype without a recompile, as torch.compile, which wraps arguments lazily.
    """
    names = set(code.co_names)
    if names & _FRAME_READERS:
        return frozenset()
    from ember.bytecode.analysis import live_locals
    from ember.bytecode.instructions import decode
    live = live_locals(decode(code), 0, code.co_freevars)
    params = parameter_names(code)
    dead = {n for n in params if n not in live and n not in code.co_cellvars}
    if "super" in names and params:
        dead.discard(params[0])
    return frozenset(dead)


# Generated source -> (its module code, the checked function code): the same guards, binders and
# entries are generated again on every recompile, reset and new function of the same shape. The
# code holds only literals (objects come from the namespace), so keeping it keeps nothing alive.
_COMPILED: dict[tuple, tuple] = {}


def make_function(fn: types.FunctionType, body: list[str], scope: dict[str, Any], label: str):
    """Compile ``def <fn's name>(<fn's parameters>): <body>`` in ``scope``, with fn's defaults."""
    code = fn.__code__
    src = f"def ___generated({parameter_text(code)}):\n" + "".join(f"    {line}\n" for line in body)
    namespace = dict(scope)
    key = (src, label, fn.__qualname__, code.co_name)
    hit = _COMPILED.get(key)
    if hit is None:
        module = compile(src, f"<ember {label} for {fn.__qualname__}>", "exec")
        exec(module, namespace)
        made = namespace["___generated"].__code__
        hit = _COMPILED[key] = (module, check_generated(made.replace(co_name=code.co_name,
                                                                      co_qualname=fn.__qualname__),
                                                         from_source=True))
        if len(_COMPILED) > 1024:
            _COMPILED.pop(next(iter(_COMPILED)))
    else:
        exec(hit[0], namespace)
    gen = namespace["___generated"]
    gen.__code__ = hit[1]
    gen.__name__, gen.__qualname__ = fn.__name__, fn.__qualname__
    gen.__defaults__ = fn.__defaults__
    gen.__kwdefaults__ = fn.__kwdefaults__
    gen.__ember_source__ = src
    return gen


def call_bound(gen, code: types.CodeType, bound: dict[str, Any]):
    """Call ``gen`` (a generated function with ``code``'s signature) with the arguments in ``bound``
    (parameter name -> value, as ``make_binder`` returns them), for any signature: ordinary and
    positional-only parameters go positionally, then ``*args`` spread, keyword-only parameters as
    keywords, then ``**kwargs`` spread (its keys cannot clash: they were not parameters when bound,
    or only positional-only ones, which are passed positionally here)."""
    argc, kwonly = code.co_argcount, code.co_kwonlyargcount
    names = code.co_varnames
    args = [bound[n] for n in names[:argc]]
    i = argc + kwonly
    if code.co_flags & inspect.CO_VARARGS:
        args.extend(bound[names[i]])
        i += 1
    kwargs = {n: bound[n] for n in names[argc:argc + kwonly]}
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(bound[names[i]])
    return gen(*args, **kwargs)


def make_binder(fn: types.FunctionType):
    """A function with fn's signature that returns its bound arguments as a dict."""
    names = parameter_names(fn.__code__)
    body = ["return {" + ", ".join(f"{n!r}: {n}" for n in names) + "}"]
    return make_function(fn, body, {}, "binder")


def literal(value, scope: dict[str, Any], bind) -> str:
    """Source text for a constant in generated code (bound into scope if not a plain literal)."""
    from ember.capture.sources import is_plain_literal
    from ember.fake.symbolic import plain
    value = plain(value)  # (a size the trace computed as a SymInt reaches the program as an int)
    if is_plain_literal(value):  # (not an enum member that subclasses str or int: its repr is no source)
        return repr(value)
    return bind(scope, value, "value")
