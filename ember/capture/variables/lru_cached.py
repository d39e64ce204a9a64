"""Calls of ``functools.lru_cache``-wrapped functions with constant arguments.

Eager Python asks the cache at each call: a hit returns the stored result (the body does not
run), a miss runs the body and stores its result. The graph bakes in the answer the cache gives
at trace time, which is eager's answer for as long as the cache still holds that entry. So:

* the wrapper is guarded by identity (rebinding the name to another function recompiles);
* a guard looks the key up in the cache *without calling the wrapper* (`cached_result`: the
  real cache dict, reached through ``gc.get_referents``): once the entry is gone
  (``cache_clear()``, evicted from a bounded cache) or holds another result, the frame
  recompiles, and the new trace asks the cache again, as eager would at that call;
* the call itself is replayed after the graph (a hit, by the guard): the cache's hit count and,
  for a bounded cache, its recency order move as in eager.

At trace time the cache is asked by peeking first. On a miss the real wrapper is called then
(the body runs once, storing the result, as eager's first call does), unless the trace has
side effects waiting to be replayed after the graph: the body could observe or reorder them, so
the call is a graph break and runs eagerly in its place. A cache whose layout ember does not
recognise, ``maxsize=0`` (no caching: each call runs the body), a wrapper ember cannot name for
a guard, or non-constant arguments are graph breaks.

Known difference left: on the call that compiles after a miss, the replay adds one hit to
``cache_info()`` that eager does not count.

torch.compile instead inlines ``__wrapped__`` (ignoring the cache, with a warning), which gives a
different answer than eager when the cached result is stale (the body reads state changed since).
"""
from __future__ import annotations

import gc

from ember.capture.variables.base import VariableTracker, unsupported

_IMMUTABLE = (int, float, bool, str, bytes, complex, type(None))
MISSING = object()  # not in the cache
UNKNOWN = object()  # the cache's layout is not the one this module reads


def immutable(value) -> bool:
    """Safe to bake into the graph's code and to use as a cache key: scalars, tuples of them, classes
    and the typing module's aliases (``List[int]``: cached, never changed)."""
    return isinstance(value, _IMMUTABLE) or isinstance(value, type) or type(value).__module__ == "typing" \
        or (type(value) is tuple and all(immutable(v) for v in value))


def _parts(wrapper):
    """(cache dict, keyword marker, referents) of a C ``_lru_cache_wrapper``, or None."""
    own = getattr(wrapper, "__dict__", None)
    refs = gc.get_referents(wrapper)
    dicts = [r for r in refs if type(r) is dict and r is not own]
    marks = [r for r in refs if type(r) is object]
    if not dicts or len(marks) != 1:
        return None
    return dicts[-1], marks[0], refs


def cache_key(wrapper, args: tuple, kwargs: dict):
    """The key functools' C cache stores for ``wrapper(*args, **kwargs)`` (``lru_cache_make_key``),
    or UNKNOWN."""
    parts = _parts(wrapper)
    if parts is None:
        return UNKNOWN
    typed = wrapper.cache_parameters().get("typed", False)
    if not typed and not kwargs:
        if len(args) == 1 and type(args[0]) in (int, str):
            return args[0]
        return tuple(args)
    key = tuple(args)
    if kwargs:
        key += (parts[1],)
        for item in kwargs.items():
            key += item
    if typed:
        key += tuple(type(a) for a in args)
        if kwargs:
            key += tuple(type(v) for v in kwargs.values())
    return key


def cached_result(wrapper, key):
    """What ``wrapper`` holds for ``key``, without calling it (no hit counted, no body run):
    the result, MISSING, or UNKNOWN. Unbounded caches map keys to results; bounded ones map
    keys to list links, whose keys and results the wrapper's referents list link by link
    (key, result, link type), oldest first, just before the cache dict."""
    parts = _parts(wrapper)
    if parts is None:
        return UNKNOWN
    cache, _mark, refs = parts
    try:
        entry = cache.get(key, MISSING)
    except TypeError:  # (unhashable: the wrapper would raise too)
        return UNKNOWN
    if entry is MISSING:
        return MISSING
    if wrapper.cache_parameters().get("maxsize") is None:
        return entry
    link_type = type(entry)
    n = len(cache)
    at = next((i for i, r in enumerate(refs) if r is cache), None)
    if at is None or at < 3 * n:
        return UNKNOWN
    links = refs[at - 3 * n:at]
    if any(links[i + 2] is not link_type for i in range(0, 3 * n, 3)):
        return UNKNOWN
    for i in range(0, 3 * n, 3):
        k = links[i]
        if k is key or (type(k) is type(key) and k == key):
            return links[i + 1]
    return UNKNOWN


def holds(wrapper, key, value) -> bool:
    """The guard: the cache still answers ``value`` for ``key``."""
    got = cached_result(wrapper, key)
    return got is value or (type(got) is type(value) and got == value)


class _Replay:
    """A call of the wrapper replayed after the graph (a hit: the guard saw the entry)."""

    def __init__(self, wrapper, args: tuple, kwargs: dict):
        self.wrapper, self.args, self.kwargs = wrapper, args, kwargs

    def call(self):
        self.wrapper(*self.args, **self.kwargs)


class _ReplayTarget(VariableTracker):
    def __init__(self, replay: _Replay):
        from ember.capture.sources import ConstSource
        self.source = ConstSource(replay, "lru_cache call")

    def describe(self):
        return "an lru_cache call replayed after the graph"


def call_lru_cached(tx, wrapper, wrapper_source, args, kwargs):
    """A call to an ``lru_cache``-wrapped function: the cached answer (see the module docstring)."""
    from ember.capture.builder import pin_identity
    from ember.capture.variables.containers import TupleVariable
    name = getattr(wrapper, "__qualname__", wrapper)
    missing = object()

    def value_of(a):
        if a.is_constant() and immutable(a.as_constant()):
            return a.as_constant()
        if type(a).__name__ == "UserObjectVariable" and immutable(a.obj):
            if a.source is not None:
                pin_identity(tx, a)  # e.g. `typing.List` as `self` of its cached __getitem__
                return a.obj
            if type(a.obj).__module__ == "typing":  # (an alias or TypeVar the trace passed on)
                return a.obj
        if type(a) is TupleVariable and a.tuple_type in (None, tuple):  # (`Callable[[T], T]`'s parameters)
            items = [value_of(i) for i in a.items]
            return missing if any(i is missing for i in items) else tuple(items)
        return missing

    values = [value_of(a) for a in [*args, *kwargs.values()]]
    if any(v is missing for v in values):
        raise unsupported("EB0036", f"calling lru_cache-wrapped {name} with non-constant arguments")
    pos, kw = tuple(values[:len(args)]), dict(zip(kwargs, values[len(args):]))
    if wrapper_source is None:
        raise unsupported("EB0056", f"lru_cache-wrapped {name} reached where ember cannot name it for a guard")
    if wrapper.cache_parameters().get("maxsize") == 0:
        raise unsupported("EB0056", f"lru_cache-wrapped {name} has maxsize=0 (every call runs its body)")
    key = cache_key(wrapper, pos, kw)
    value = UNKNOWN if key is UNKNOWN else cached_result(wrapper, key)
    if value is UNKNOWN:
        raise unsupported("EB0056", f"lru_cache-wrapped {name}: its cache cannot be read without calling it")
    if value is MISSING:
        if tx.side_effects:
            raise unsupported("EB0056", f"lru_cache-wrapped {name} is not cached yet for {pos!r} and the frame "
                              "has side effects to replay: its body runs eagerly at the call")
        value = wrapper(*pos, **kw)  # (eager's first call: runs the body, stores the result)
        if cached_result(wrapper, key) is not value:
            raise unsupported("EB0056", f"lru_cache-wrapped {name} did not keep its result for {pos!r}")
    if not immutable(value):
        raise unsupported("EB0042", f"lru_cache-wrapped {name} returned a {type(value).__name__}")
    tx.guards.id_match(wrapper_source, wrapper)
    tx.guards.lru_cached(wrapper_source, wrapper, key, value)
    tx.side_effects.replay_call(_ReplayTarget(_Replay(wrapper, pos, kw)), "call")
    from ember.capture.variables.builtins import wrap_constant
    return wrap_constant(value)

