"""Symbolic sizes: fake tensors with dynamic dimensions, and the ShapeEnv's guards as Python.

A dynamic dimension of a graph input is a symbol of the frame's ``ShapeEnv``
(``s0``); everything the trace computes from it stays an expression in that
symbol, and every time the trace needs a concrete answer (a branch on
``x.size(0) > 3``, an ``int()``, a list index) the ShapeEnv records a guard
(``4 <= s0``) or specialises the symbol. At the end of the trace those guards
are rendered as Python expressions over the frame's arguments
(``x.size()[0] == y.size()[0]``, ``2 <= x.size()[0]``) and join the entry's
other guards. Sizes 0 and 1 are never symbols (duck sizing, as torch does),
and two dimensions of equal size share a symbol until a call tells them apart.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
import threading

import torch
from torch._guards import GuardSource
from torch._guards import Source as _ShapeSource

from ember.compat import fake_from_real


@dataclasses.dataclass(frozen=True)
class ExprSource(_ShapeSource):
    """Names a graph input for the ShapeEnv by its expression in the entry's guard function."""

    expr: str

    @property
    def _name_template(self) -> str:
        return self.expr

    @property
    def guard_source(self) -> GuardSource:
        return GuardSource.LOCAL


_ONE_GRAPH = threading.local()


@contextlib.contextmanager
def one_graph(on: bool):
    """A ``fullgraph=True`` trace: as in torch.compile, ``.item()`` / ``.tolist()`` of a computed
    tensor are unbacked symbols of the graph (``capture_scalar_outputs`` on), and so are the sizes
    of data-dependent outputs (``capture_dynamic_output_shape_ops``), since a graph break there
    could only be an error."""
    prev = getattr(_ONE_GRAPH, "on", False)
    _ONE_GRAPH.on = on
    try:
        yield
    finally:
        _ONE_GRAPH.on = prev


def scalar_outputs_captured() -> bool:
    """Whether ``.item()`` of a computed tensor is an unbacked symbol (config.capture_scalar_outputs,
    or a fullgraph trace) rather than a graph break."""
    from ember.torch_config import capture_scalar_outputs
    return capture_scalar_outputs() or getattr(_ONE_GRAPH, "on", False)


def dynamic_output_shapes_captured() -> bool:
    """Whether an op whose output size depends on data (``x[x > 0]``, ``nonzero``) gets an unbacked
    size (config.capture_dynamic_output_shape_ops, or a fullgraph trace, as torch.compile) rather
    than a graph break."""
    from ember.torch_config import capture_dynamic_output_shape_ops
    return capture_dynamic_output_shape_ops() or getattr(_ONE_GRAPH, "on", False)


def data_dependent_capture() -> bool:
    """Whether traces put data-dependent values in the graph as unbacked symbols (a config flag)."""
    return scalar_outputs_captured() or dynamic_output_shapes_captured()


def is_data_dependent_guard(error: BaseException) -> bool:
    """Whether ``error`` is the ShapeEnv refusing to decide something about an unbacked symbol
    (a branch on ``.item()``'s value): the trace cannot go on, a graph break can."""
    module = sys.modules.get("torch.fx.experimental.symbolic_shapes")
    return module is not None and isinstance(error, module.GuardOnDataDependentSymNode)


def data_dependent_reason(error: BaseException) -> str:
    import re
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    match = re.search(r"expression (.*?) \(unhinted", first)
    return (f"a branch or conversion on a data-dependent value ({match.group(1) if match else first}): "
            "the trace cannot decide it (.item(), .tolist(), nonzero() results are unknown while tracing)")


def has_unbacked(value) -> bool:
    """Whether a SymInt/SymFloat/SymBool depends on an unbacked (data-dependent) symbol."""
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return False
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    return bool(free_unbacked_symbols(value))


def new_shape_env():
    """A ShapeEnv for one trace. Data-dependent scalars (``.item()``) and sizes (``nonzero``) are
    unbacked symbols where ``config.capture_scalar_outputs`` / ``capture_dynamic_output_shape_ops``
    say so (fake tensors raise otherwise: a graph break, as in static tracing)."""
    return _shape_env_class()(allow_scalar_outputs=scalar_outputs_captured(),
                              allow_dynamic_output_shape_ops=dynamic_output_shapes_captured())


_SHAPE_ENV_CLASS = None


def _shape_env_class():
    """torch's ShapeEnv, except where it finds the "user frame" for its log lines and the source
    locations of its guards: it walks the stack past a set of torch's files, which it computes once
    by importing torch's export, Inductor and frame-evaluation modules (about a second of the first
    symbolic compile). ember records the user's line of each guard itself: ``ember_locate`` (set by
    the trace, see ember/capture/provenance.py) names the instruction being traced, and the guard's
    location holds a marker ``<ember:N>`` for ``ember_provenance[N]`` (read by `shape_guard_code`)."""
    global _SHAPE_ENV_CLASS
    if _SHAPE_ENV_CLASS is None:
        from torch.fx.experimental.symbolic_shapes import SLoc, ShapeEnv

        class EmberShapeEnv(ShapeEnv):
            ember_locate = None  # () -> the provenance of the traced instruction (compile time)

            def _get_stack_summary(self, is_debug: bool = False, framework_loc=None):
                if framework_loc is None:
                    from ember.compat import NO_FRAMEWORK_LOC
                    framework_loc = NO_FRAMEWORK_LOC
                locate = self.ember_locate
                prov = locate() if locate is not None else None
                if prov is None:
                    return SLoc(framework_loc, None), ""
                provs = self.__dict__.setdefault("ember_provenance", [])
                if not provs or provs[-1] != prov:
                    provs.append(prov)
                return SLoc(framework_loc, f"<ember:{len(provs) - 1}>"), ""

        # importable by name (pickle finds it through the module's __getattr__ below), so that
        # Inductor's FX-graph cache can pickle a graph's key (it refused: "Failed to pickle cache
        # key", a warning with a traceback on every symbolic compile)
        EmberShapeEnv.__module__ = __name__
        EmberShapeEnv.__qualname__ = "EmberShapeEnv"
        _SHAPE_ENV_CLASS = EmberShapeEnv
    return _SHAPE_ENV_CLASS


def __getattr__(name: str):
    if name == "EmberShapeEnv":
        return _shape_env_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def symbolic_fake(mode, real: torch.Tensor, expr: str, dims: frozenset, constraints: list | None = None,
                  unbacked: frozenset = frozenset(), strides: frozenset = frozenset()):
    """The fake twin of ``real`` whose dimensions ``dims`` are symbols (the others static), and its
    symbolic context; ``constraints``: per dimension, a ShapeEnv constraint the trace must keep
    (or None), checked by `shape_guard_code` given the context. Dimensions in ``unbacked`` are
    unbacked symbols (no hint: nothing is guarded on them, sizes 0 and 1 included; a branch on
    one cannot be decided by the trace). Dimensions in ``strides`` get a stride symbol of their own
    (the others' strides are inferred from the sizes)."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext
    sizes = [DimDynamic.UNBACKED if i in unbacked else DimDynamic.DYNAMIC if i in dims else DimDynamic.STATIC
             for i in range(real.dim())]
    context = StatelessSymbolicContext(dynamic_sizes=sizes, constraint_sizes=constraints or [None] * real.dim(),
                                       dynamic_strides=[DimDynamic.DYNAMIC if i in strides else DimDynamic.INFER_STRIDE
                                                        for i in range(real.dim())])
    if unbacked and mode.shape_env is not None:
        # (a graph input's unbacked sizes are bound by the input itself, not by an op's output)
        with mode.shape_env.ignore_fresh_unbacked_symbols():
            return fake_from_real(mode, real, source=ExprSource(expr), symbolic_context=context), context
    return fake_from_real(mode, real, source=ExprSource(expr), symbolic_context=context), context


def symbolic_int(shape_env, value: int, expr: str):
    """A SymInt for an int graph input, of any sign; 0 and 1 are symbols too (torch's unspecified
    ints: a flag's branch guards it, ``Eq(s0, 0)``, rather than a graph per value)."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    return shape_env.create_unspecified_symint_and_symbol(value, ExprSource(expr), DimDynamic.DYNAMIC)


def symbolic_float(shape_env, value: float, expr: str):
    """A backed SymFloat for a float graph input (its value is the hint; a branch on it guards)."""
    from torch.fx.experimental.symbolic_shapes import DimDynamic
    source = ExprSource(expr)
    symbol = shape_env.create_unspecified_symbol(value, source=source, dynamic_dim=DimDynamic.DYNAMIC)
    return shape_env.create_symfloatnode(symbol, hint=value, source=source)


def plain(value):
    """``value`` with every SymInt/SymFloat/SymBool in it (through tuples, lists and torch.Size)
    as a Python int/float/bool. A symbol's value is read through the ShapeEnv, which records it as
    an assumption; most are constants already (a size that was specialised)."""
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    if type(value) in (tuple, list, torch.Size) and any(
            isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool, tuple, list)) for v in value):
        return type(value)(plain(v) for v in value)
    return value


def dynamic_dims(fake) -> frozenset:
    """The dimensions of a fake tensor whose size is a symbol."""
    return frozenset(i for i, d in enumerate(fake.shape) if has_symbols(d))


def has_symbols(value) -> bool:
    """Whether ``value`` (a SymInt/SymFloat/SymBool, or a tuple/list of them) is not a constant."""
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value.node.maybe_as_int() is None if isinstance(value, torch.SymInt) else not value.node.is_constant()
    if isinstance(value, (tuple, list)):
        return any(has_symbols(v) for v in value)
    return False


def entry_metadata(fake) -> tuple:
    """Size, stride and offset of a fake tensor (compare them with `same_metadata`)."""
    return (*fake.shape, "|", *fake.stride(), "|", fake.storage_offset())


def same_metadata(shape_env, a: tuple, b: tuple) -> bool:
    """Whether two `entry_metadata` are the same expressions, under the ShapeEnv's current
    substitutions (a symbol specialised since stays equal to itself; comparing the SymInts
    themselves would add guards)."""
    def norm(v):
        return str(shape_env.simplify(v.node.expr)) if isinstance(v, torch.SymInt) else str(v)
    return len(a) == len(b) and all(norm(x) == norm(y) for x, y in zip(a, b))


def view_bases(shape_env, fakes: list, exprs: list[str], inputs: list) -> list:
    """``(base fake, expression, name, view's source)`` per distinct base of a view input whose
    symbols a guard mentions. Faking a view fakes its ``_base`` too, with symbols of its own (sources
    ``x._base.size()[i]``); a guard over them (the view's extent within its base) names them only
    if the base is among the inputs given to the guard code (else: no source for the symbol)."""
    in_guards = set()
    for g in shape_env.guards:
        in_guards |= g.expr.free_symbols
    if not in_guards:
        return []
    seen, out = {id(f) for f in fakes}, []  # (a base that is an input itself has its sources)
    for fake, expr, entry in zip(fakes, exprs, inputs):
        base = getattr(fake, "_base", None) if isinstance(fake, torch.Tensor) else None
        if base is None or id(base) in seen:
            continue
        symbols = set()
        for v in (*base.shape, *base.stride(), base.storage_offset()):
            if isinstance(v, torch.SymInt):
                symbols |= v.node.expr.free_symbols
        if symbols & in_guards:
            seen.add(id(base))
            source = entry[3]
            out.append((base, f"{expr}._base", f"{source.name()}._base", source))
    return out


def shape_guard_code(shape_env, fakes: list, exprs: list[str], contexts: list) -> tuple[list[str], list]:
    """Python expressions over the inputs (named by ``exprs``) that hold exactly when a call's
    sizes satisfy everything the trace assumed: static sizes and strides of these inputs,
    equalities between dimensions that share a symbol, value ranges, and the guards the trace
    added (branches on sizes, specialisations); and per expression, the provenance of the guard
    (where the trace added it: see `_shape_env_class`), or None (from the inputs themselves)."""
    import re
    helpers = shape_env.produce_guards_verbose(fakes, [ExprSource(e) for e in exprs], ignore_static=False,
                                               input_contexts=contexts, langs=("python", "verbose_python"))
    codes, verbose = helpers[0].exprs, helpers[1].exprs
    provs = shape_env.__dict__.get("ember_provenance", [])
    if len(verbose) != len(codes):
        return codes, [None] * len(codes)
    where = []
    for line in verbose:
        m = re.search(r"<ember:(\d+)>", line)
        where.append(provs[int(m.group(1))] if m and int(m.group(1)) < len(provs) else None)
    return codes, where
