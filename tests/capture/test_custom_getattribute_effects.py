"""A Python ``__getattribute__`` with effects of its own (capture/variables/objects.py): it is
inlined, so what it does runs once per read, as in eager. The trace used to read the attribute for
real (running the method while tracing) and the guard re-read it on every call: a counter kept in
``__getattribute__`` stood one ahead of eager after the first call."""
import torch

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile


class Counting:
    def __init__(self):
        self.reads = 0

    def __getattribute__(self, name):
        if name == "scale":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
            return 3.0
        return object.__getattribute__(self, name)


class Memo:
    """Computes an attribute once, on first read, and caches it in the instance dict."""

    def __init__(self):
        self.computed = []

    def __getattribute__(self, name):
        d = object.__getattribute__(self, "__dict__")
        if name == "table" and "table" not in d:
            object.__getattribute__(self, "computed").append(name)
            d["table"] = torch.arange(3.0)
        return object.__getattribute__(self, name)


def _calls(fn, make_obj, n=3):
    ref_obj, got_obj = make_obj(), make_obj()
    counter = CompileCounter()
    compiled = compile(lambda x: fn(got_obj, x), backend=counter)
    for i in range(n):
        x = torch.full((3,), float(i))
        assert_same(compiled(x.clone()), fn(ref_obj, x.clone()), f"call {i}")
        assert vars(got_obj).keys() == vars(ref_obj).keys()
        for k in vars(ref_obj):
            assert_same(vars(got_obj)[k], vars(ref_obj)[k], f"{k} after call {i}")
    return counter


def test_counter_in_getattribute_runs_once_per_read():
    def fn(obj, x):
        return x * obj.scale + obj.scale, obj.reads

    counter = _calls(fn, Counting, n=4)
    # `reads` changes every call: one recompile, then it is dynamic (Dynamo 2.13 runs the frame
    # eagerly: no graph)
    assert counter.frame_count == (0 if REFERENCE else 2)


def test_cache_filled_by_getattribute():
    def fn(obj, x):
        return x + obj.table, list(obj.computed)

    _calls(fn, Memo)
