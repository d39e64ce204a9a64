"""Which dimensions of a frame's tensor inputs are symbols: automatic dynamic shapes.

The policy is torch.compile's:

* ``dynamic=None`` (the default): a frame compiles with static shapes first. When it
  recompiles, every dimension of an input that has had two different sizes at that
  source becomes a symbol, so one graph serves every later size (the last batch of
  an epoch, a KV cache growing by one token per step) instead of one graph per size.
* ``dynamic=True``: every dimension is a symbol from the first compile.
* ``dynamic=False``: every dimension is static.
* In every mode, ``mark_dynamic(t, dim)`` / ``maybe_mark_dynamic`` make a dimension a
  symbol and ``mark_static`` keeps it static (the marks torch's own ``mark_dynamic``
  marks are the same attributes and are honoured too); parameters are static unless
  marked (``force_parameter_static_shapes``).

Sizes 0 and 1 are never symbols: the ShapeEnv specialises them (a graph for size 1 and
a graph for every size from 2 up). A frame whose symbolic trace fails for an internal
reason compiles with static shapes from then on (see ``FrameCache._capture``).
"""
from __future__ import annotations

import dataclasses
import functools
import re

import torch


# Compiler collectives (ember/distributed/collectives.py, wired by ember.api: capture does not
# import distributed): an object with ``active()`` and ``exchange(sizes, values)``, or None.
collectives = None


class StaticRetry(Exception):
    """A symbolic trace that cannot be finished soundly: the frame is traced again, static."""


_DYNAMIC = "_dynamo_dynamic_indices"
_MAYBE = "_dynamo_weak_dynamic_indices"
_STATIC = "_dynamo_static_indices"
_RANGES = "_dynamo_dynamic_range"
_UNBACKED = "_dynamo_unbacked_indices"  # torch's mark_unbacked
# torch's mark_unbacked(strict=True): torch 2.13 traces such a dimension as a backed symbol that must
# stay one (as mark_dynamic), not as an unbacked one: a program that specialises it is an error.
_STRICT_UNBACKED = "_dynamo_strict_unbacked_indices"
_SOFT = "_ember_soft_dynamic_indices"  # marked by ember.mark_dynamic: a warning outside fullgraph


@functools.lru_cache(maxsize=16)
def _source_entries(text: str) -> tuple:
    """``torch.compiler.config.dynamic_sources`` / ``unbacked_sources`` parsed: (pattern, dim or
    None) per comma-separated entry; an entry is a source name or a regex (``re.match``), with an
    optional ``:N`` naming one dimension of a tensor."""
    out = []
    for entry in text.replace(" ", "").split(","):
        if not entry:
            continue
        m = re.match(r"^(.+):(\d+)$", entry)
        out.append((m.group(1), int(m.group(2))) if m else (entry, None))
    return tuple(out)


def _config_text(name: str) -> str:
    cfg = getattr(torch.compiler, "config", None)
    text = getattr(cfg, name, "") if cfg is not None else ""
    return text if isinstance(text, str) else ""


def _matches(pattern: str, name: str) -> bool:
    if pattern == name:
        return True
    try:
        return re.match(pattern, name) is not None
    except re.error:
        return False


def config_marked(kind: str, name: str, dim: int | None = None) -> bool:
    """Whether ``torch.compiler.config.<kind>_sources`` (kind "dynamic" or "unbacked") names the
    source ``name`` (in torch's spelling, `ember.capture.sources.config_name`), for dimension ``dim``
    (None: any dimension, or a scalar source). These lists win over ``dynamic=False``, static marks
    and parameters' static shapes, as in torch."""
    text = _config_text(f"{kind}_sources")
    if not text:
        return False
    return any(_matches(p, name) and (dim is None or d is None or d == dim) for p, d in _source_entries(text))


def config_dynamic_value(value: int) -> bool:
    """Whether ``torch.compiler.config.dynamic_values`` lists ``value`` (an int or a size equal to
    it is a symbol)."""
    text = _config_text("dynamic_values")
    if not text:
        return False
    try:
        return value in {int(v) for v in text.replace(" ", "").split(",") if v}
    except ValueError:
        return False


def config_sources_set() -> bool:
    """Whether any source or value is named dynamic/unbacked by torch.compiler.config (traces then
    use a ShapeEnv from the first compile)."""
    return bool(_config_text("dynamic_sources") or _config_text("unbacked_sources")
                or _config_text("dynamic_values"))


def named_dynamic(source, value: int) -> bool:
    """Whether torch.compiler.config makes the scalar at ``source`` a symbol (dynamic_sources,
    unbacked_sources — an unbacked int is traced as a backed symbol: no guard on its value either
    way for a program that only computes with it — or dynamic_values)."""
    if not config_sources_set():
        return False
    from ember.capture.sources import config_name
    name = config_name(source)
    return config_marked("dynamic", name) or config_marked("unbacked", name) or \
        (type(value) is int and config_dynamic_value(value))


def named_dynamic_dims(source, real: torch.Tensor) -> frozenset:
    """The dimensions of the tensor at ``source`` that torch.compiler.config makes symbols."""
    if not config_sources_set() or not isinstance(real, torch.Tensor):
        return frozenset()
    from ember.capture.sources import config_name
    name = config_name(source)
    return frozenset(d for d in range(real.dim())
                     if config_marked("dynamic", name, d) or config_marked("unbacked", name, d)
                     or config_dynamic_value(real.shape[d]))


def unbacked_dims(source, real: torch.Tensor) -> frozenset:
    """The dimensions of the tensor at ``source`` to trace as unbacked symbols: marked by torch's
    ``mark_unbacked`` (not its strict form: see _STRICT_UNBACKED), or named by
    torch.compiler.config.unbacked_sources."""
    if not isinstance(real, torch.Tensor) or type(real) not in (torch.Tensor, torch.nn.Parameter):
        return frozenset()
    marked = _marked(real, _UNBACKED)
    if _config_text("unbacked_sources"):
        from ember.capture.sources import config_name
        name = config_name(source)
        marked |= {d for d in range(real.dim()) if config_marked("unbacked", name, d)}
    return frozenset(d for d in marked if 0 <= d < real.dim())


def _mark(t: torch.Tensor, attr: str, index) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"expected a tensor, got {type(t).__name__}")
    dims = [index] if isinstance(index, int) else list(index)
    for d in dims:
        if not -t.dim() <= d < max(t.dim(), 1):
            raise IndexError(f"dimension {d} out of range for a {t.dim()}-d tensor")
    marks = getattr(t, attr, None)
    if marks is None:
        marks = set()
        setattr(t, attr, marks)
    marks.update(d % t.dim() for d in dims)


@dataclasses.dataclass(frozen=True)
class DimRange:
    """What ``mark_dynamic(t, dim, min=, max=)`` records (torch's ``_DimRange`` has the same fields)."""
    dim: int
    min: int | None
    max: int | None


def mark_dynamic(t: torch.Tensor, index, min: int | None = None, max: int | None = None) -> None:  # noqa: A002
    """Compile ``t``'s dimension(s) ``index`` as symbols from the first compile on. A trace that
    specialises such a dimension (or needs it outside ``min``..``max``) raises torch's
    ``ConstraintViolationError`` naming the lines that did, under ``fullgraph=True``; otherwise
    ember warns once for the frame and specialises it. (A mark made with torch's own
    ``mark_dynamic`` keeps torch's contract: the error, with or without ``fullgraph``.)"""
    _mark(t, _DYNAMIC, index)
    _mark(t, _SOFT, index)
    ranges = getattr(t, _RANGES, None)
    if ranges is None:
        ranges = set()
        setattr(t, _RANGES, ranges)
    for d in ([index] if isinstance(index, int) else list(index)):
        ranges.add(DimRange(d % t.dim(), min, max))


def maybe_mark_dynamic(t: torch.Tensor, index) -> None:
    """Like `mark_dynamic`, as a hint (torch: no error if the program specialises it)."""
    _mark(t, _MAYBE, index)


def mark_static(t: torch.Tensor, index=None) -> None:
    """Keep ``t``'s dimension(s) ``index`` (all when None) static, even under ``dynamic=True``."""
    _mark(t, _STATIC, range(t.dim()) if index is None else index)


def _marked(t: torch.Tensor, attr: str) -> set:
    marks = getattr(t, attr, None) if type(t) in (torch.Tensor, torch.nn.Parameter) else None
    return set(marks) if isinstance(marks, (set, frozenset, list, tuple)) else set()


def _hard_marks(t: torch.Tensor) -> set:
    """The dimensions that must be symbols: ``mark_dynamic``, ``mark_unbacked(strict=True)``."""
    return _marked(t, _DYNAMIC) | _marked(t, _STRICT_UNBACKED)


def has_marks(values) -> bool:
    """Whether a tensor among ``values`` (and the lists, tuples and dicts among them) is marked."""
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            if _marked(v, _DYNAMIC) or _marked(v, _MAYBE) or _marked(v, _UNBACKED) or _marked(v, _STRICT_UNBACKED):
                return True
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return False


def constraints(real: torch.Tensor, dims: frozenset, relaxed: bool = False) -> list:
    """ShapeEnv constraints per dimension: a dimension marked with ``mark_dynamic`` must stay a
    symbol (in its range); automatic and hinted ones may be specialised, and so may ones
    ``ember.mark_dynamic`` marked when ``relaxed`` (a trace broke the mark, ember warned)."""
    marked = _hard_marks(real)
    if relaxed:
        marked = marked - _marked(real, _SOFT)
    if not marked:
        return [None] * real.dim()
    from torch.fx.experimental.symbolic_shapes import RelaxedUnspecConstraint, StrictMinMaxConstraint
    from torch.utils._sympy.value_ranges import ValueRanges
    ranges = {r.dim: r for r in getattr(real, _RANGES, ()) if hasattr(r, "dim")}
    out = []
    for d in range(real.dim()):
        r = ranges.get(d)
        if d not in marked or d not in dims:
            out.append(None)
        elif r is not None and (r.min is not None or r.max is not None):
            out.append(StrictMinMaxConstraint(vr=ValueRanges(lower=r.min if r.min is not None else 0,
                                                             upper=r.max if r.max is not None else int(1e18)),
                                              warn_only=False))
        else:
            out.append(RelaxedUnspecConstraint(warn_only=False))
    return out


def name_violation(error: Exception, output) -> None:
    """Add to the ShapeEnv's ConstraintViolationError the user's lines that specialised the marked
    dimensions it names."""
    import linecache
    import re
    m = re.search(r"Constraints violated \((.*?)\)!", str(error))
    names = [n.strip() for n in m.group(1).split(",")] if m else []
    lines = output.lines_specialising(names) if names else []
    if not lines:
        return
    where = []
    for loc in lines:
        file, _, line = loc.rpartition(":")
        code = linecache.getline(file, int(line)).strip() if line.isdigit() else ""
        where.append(f"  - {loc}" + (f": {code}" if code else ""))
    error.args = (f"{error.args[0] if error.args else ''}\nSpecialised by:\n" + "\n".join(where),
                  *error.args[1:])


def marked_dynamic(real: torch.Tensor) -> frozenset:
    """The dimensions ``mark_dynamic`` marked (an entry made without them as symbols does not serve
    a tensor marked so: it recompiles)."""
    return frozenset(_hard_marks(real))


def _numpy_int_argument(values) -> bool:
    """A NumPy int or float scalar among the arguments: ``int(n)`` / ``float(v)`` of it, or it
    passed to a torch function, is a symbol from the first compile (as torch.compile keeps such
    arguments unspecialized), so that trace needs a ShapeEnv."""
    import sys
    np = sys.modules.get("numpy")
    return np is not None and any(isinstance(v, (np.integer, np.floating)) for v in values)


class FrameSizes:
    """Sizes seen at each tensor source of one frame, across its compiles."""

    def __init__(self, dynamic) -> None:
        self.requested_dynamic = dynamic  # (compile's argument; `dynamic` reads torch's settings too)
        self.seen: dict[str, tuple] = {}   # source name -> sizes, None where two calls differed
        self.ints: dict[str, int | None] = {}  # source name -> int value, None once it changed
        self.strides: dict[str, tuple] = {}  # source name -> strides, None where two calls differed
        self.traces = 0
        self.static_only: str | None = None  # why symbolic traces are off for this frame

    @property
    def dynamic(self):
        from ember.torch_config import effective_dynamic
        return effective_dynamic(self.requested_dynamic)

    symbolic = False  # whether the current compile traces with a ShapeEnv
    floats = True  # whether float arguments may be symbols (False once the backend refused them)
    float_symbols = 0  # float symbols the current trace made
    relaxed_marks = False  # ember.mark_dynamic marks a trace specialised: hints from now on
    catch_breaks = False  # an op a try may catch breaks the graph (capture/caught_ops.py: undo failed)

    def begin(self, bound: dict) -> None:
        """A compile of the frame starts (its traces, a graph break's re-trace included, agree on
        whether some dimension may be a symbol: then they trace with a ShapeEnv)."""
        self.symbolic = self.static_only is None and (
            self.dynamic is True or (self.dynamic is None and self.traces > 0) or has_marks(bound.values())
            or config_sources_set() or self.dynamic is None and _numpy_int_argument(bound.values()))
        self.traces += 1

    def agree_with_other_ranks(self) -> bool:
        """After the frame's first trace, under compiler collectives: adopt the merge of every rank's
        observations. True when that marks something changed the trace took as fixed (trace again)."""
        if self.traces != 1 or collectives is None or not collectives.active():
            return False
        seen, ints = collectives.exchange(dict(self.seen), dict(self.ints))
        again = seen != self.seen or ints != self.ints
        self.seen, self.ints = seen, ints
        return again and self.dynamic is not False and self.static_only is None

    def int_is_dynamic(self, name: str, value: int, forced: bool = False) -> bool:
        """Whether the int read at source ``name`` is a symbol in this trace: it had another value
        when the frame compiled before (or ``dynamic=True``), or ``forced`` (torch.compiler.config
        names it); and record it."""
        prev = self.ints.get(name, value)
        changed = prev is None or prev != value
        self.ints[name] = None if changed else value
        return self.symbolic and (forced or self.dynamic is not False and (changed or self.dynamic is True))

    def dims(self, name: str, real: torch.Tensor, forced: frozenset = frozenset(), record: list | None = None,
             buffer: bool = False, param_static: bool = True) -> frozenset:
        """The dimensions of the input ``real`` at source ``name`` to make symbols (and record its
        sizes for the next compile; with ``record``, appended to it to run once the trace uses the
        input: an input never used is not recorded, as torch.compile wraps only what it uses);
        ``forced``: ones torch.compiler.config names, symbols whatever else says (dynamic=False,
        mark_static, a parameter). ``buffer``: a module's buffer, static as a parameter is (torch's
        force_parameter_static_shapes covers both: a buffer of another size compiles again);
        ``param_static`` False: that setting is off, parameters and buffers size as other tensors)."""
        shape = tuple(real.shape)
        known = name in self.seen
        prev = self.seen.get(name)
        # None: the input had different numbers of dimensions across calls. Every dimension is a
        # symbol from then on, whatever its rank (torch's automatic dynamic: the whole size is
        # dynamic once the rank changed), so a third rank does not recompile once more per size.
        any_rank = known and (prev is None or len(prev) != len(shape))
        if any_rank:
            seen = None
        elif prev is None:
            seen = shape
        else:
            seen = tuple(None if p is None or p != s else s for p, s in zip(prev, shape))
        if record is None:
            self.seen[name] = seen
        else:
            record.append(functools.partial(self.seen.__setitem__, name, seen))
        if not self.symbolic or type(real) not in (torch.Tensor, torch.nn.Parameter) \
                or real.layout is not torch.strided:
            return frozenset()
        n = real.dim()
        static = (buffer or isinstance(real, torch.nn.Parameter)) and param_static
        if self.dynamic is True and not static:
            auto = set(range(n))
        elif self.dynamic is None and not static and any_rank:
            auto = set(range(n))
        elif self.dynamic is None and not static and prev is not None and len(prev) == n:
            auto = {i for i in range(n) if prev[i] is None or prev[i] != shape[i]}
        else:
            auto = set()
        marked = _hard_marks(real) | _marked(real, _MAYBE)
        return frozenset(d for d in ((auto | marked) - _marked(real, _STATIC)) | forced if 0 <= d < n)

    def stride_dims(self, name: str, real: torch.Tensor, record: list | None = None,
                    buffer: bool = False, param_static: bool = True) -> frozenset:
        """The dimensions of the input ``real`` at source ``name`` whose stride is a symbol of its own
        (and record its strides, or append that to ``record``, as in `dims`): under automatic
        dynamic, one whose stride changed while the rank stayed (``x[:, :1]`` of inputs of different
        widths), as torch does; other strides follow the sizes (contiguous ones are products of them)."""
        if type(real) not in (torch.Tensor, torch.nn.Parameter) or real.layout is not torch.strided:
            return frozenset()
        stride = tuple(real.stride())
        prev = self.strides.get(name)
        put = self.strides.__setitem__ if record is None else \
            (lambda k, v: record.append(functools.partial(self.strides.__setitem__, k, v)))
        if prev is None or len(prev) != len(stride):
            put(name, stride)
            return frozenset()
        now = tuple(None if p is None or p != s else s for p, s in zip(prev, stride))
        put(name, now)
        if not self.symbolic or self.dynamic is not None or (isinstance(real, torch.nn.Parameter) or buffer) \
                and param_static or _marked(real, _STATIC):
            return frozenset()
        return frozenset(i for i, p in enumerate(now) if p is None)
