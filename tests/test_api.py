"""ember.compile takes what PyTorch's compile takes, and the compiled module behaves like the module:
partials, callable objects, bound/static/class methods, builtins, classes, lambdas, decorators,
already-compiled functions and modules (no double wrapping), pickling, attribute forwarding,
compiled functions called inside compiled functions (one graph)."""
import copy
import functools
import pickle

import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import REFERENCE, CompileCounter, assert_same

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's own API objects")


def x_(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def add_scale(a, b, scale=1.0):
    return (a + b).sin() * scale


@ember.compile
def decorated_at_module_level(a):
    return a.cos() + 1


class Scaler:
    def __init__(self, w):
        self.w = w

    def __call__(self, a):
        return a * self.w + 1

    def method(self, a):
        return a.relu() - self.w


class WithDecorators:
    @ember.compile
    @staticmethod
    def static_outer(a):
        return a * 5

    @staticmethod
    @ember.compile
    def static_inner(a):
        return a * 6

    @ember.compile
    @classmethod
    def klass(cls, a):
        return a * 7 + cls.K

    K = 2

    @ember.compile(backend="aot_eager")
    def method(self, a):
        return a - 1


def test_partial():
    counter = CompileCounter()
    a, b = x_(3), x_(3, seed=1)
    p = functools.partial(add_scale, b=b, scale=2.0)
    assert_same(ember.compile(p, backend=counter)(a), p(a))
    p2 = functools.partial(add_scale, a, scale=3.0)
    assert_same(ember.compile(p2, backend=counter)(b), p2(b))
    assert_same(ember.compile(p2, backend=counter)(b, scale=4.0), p2(b, scale=4.0))  # caller's keyword wins
    # (the three share add_scale's code: scale changed 2.0 -> 3.0, so the second compile made it a
    # symbolic float, which serves 4.0)
    assert counter.frame_count == 2


def test_already_compiled_is_compiled_again_not_wrapped_twice():
    first = CompileCounter()
    second = CompileCounter()
    cf = ember.compile(add_scale, backend=first)
    again = ember.compile(cf, backend=second)
    a = x_(3)
    assert_same(again(a, a), add_scale(a, a))
    assert (first.frame_count, second.frame_count) == (0, 1)
    assert again._orig_fn is add_scale

    m = nn.Linear(3, 2)
    cm = ember.compile(m)
    cm2 = ember.compile(cm)
    assert cm2._orig_mod is m
    assert_same(cm2(a), m(a))


def test_callables_of_every_kind():
    a = x_(4)
    counter = CompileCounter()
    obj = Scaler(3.0)
    assert_same(ember.compile(obj, backend=counter)(a), obj(a))
    assert_same(ember.compile(obj.method, backend=counter)(a), obj.method(a))
    assert_same(ember.compile(lambda t: t * 2 + 1, backend=counter)(a), a * 2 + 1)
    assert_same(ember.compile(staticmethod(add_scale), backend=counter)(a, a), add_scale(a, a))
    assert counter.frame_count == 4
    # C functions get a Python frame that calls them (one graph each, as torch.compile makes)
    assert_same(ember.compile(torch.relu, backend=counter)(a), torch.relu(a))
    assert_same(ember.compile(abs, backend=counter)(a), abs(a))
    assert counter.frame_count == 6
    # a class: it constructs as before; its instances' calls are compiled (as torch.compile does:
    # tests/test_api_classes_and_global_hooks.py)
    class Lin(nn.Linear):
        pass
    lin = ember.compile(Lin, backend=counter)(4, 2)
    assert isinstance(lin, Lin) and lin.out_features == 2
    assert counter.frame_count == 6
    assert_same(lin(x_(4)), nn.Linear.forward(lin, x_(4)))
    assert counter.frame_count == 7
    with pytest.raises(TypeError, match="callable"):
        ember.compile("not callable")


def test_decorators_in_a_class_body():
    a = x_(3)
    w = WithDecorators()
    assert_same(w.static_outer(a), a * 5)
    assert_same(WithDecorators.static_outer(a), a * 5)
    assert_same(w.static_inner(a), a * 6)
    assert_same(WithDecorators.klass(a), a * 7 + 2)
    assert_same(w.klass(a), a * 7 + 2)
    assert_same(w.method(a), a - 1)
    assert_same(decorated_at_module_level(a), a.cos() + 1)
    assert ember.stats()["graphs"] == 5 and ember.stats()["fallbacks"] == 0


def test_unknown_backend_fails_at_compile():
    with pytest.raises(ValueError, match="unknown ember backend"):
        ember.compile(add_scale, backend="no_such_backend")


def test_compiled_function_pickles_by_name_or_by_value():
    a = x_(3)
    again = pickle.loads(pickle.dumps(decorated_at_module_level))
    assert again is decorated_at_module_level
    cf = ember.compile(add_scale, backend="aot_eager", fullgraph=True)
    copy_ = pickle.loads(pickle.dumps(cf))
    assert copy_._settings == cf._settings and copy_._orig_fn is add_scale
    assert_same(copy_(a, a), add_scale(a, a))


def test_compiled_module_pickles_and_deepcopies_before_any_call():
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    cm = ember.compile(m, backend="aot_eager")
    a = x_(2, 3)
    for clone in (pickle.loads(pickle.dumps(cm)), copy.deepcopy(cm)):
        assert type(clone).__name__ == "CompiledModule" and clone._orig_mod is not m
        assert clone._ember_settings == cm._ember_settings
        assert_same(clone(a), m(a))
    cm(a)  # and after a call (the caches are not pickled)
    assert_same(pickle.loads(pickle.dumps(cm))(a), m(a))
    blob = torch.save(cm, __import__("io").BytesIO())
    assert blob is None


def test_compiled_module_forwards_like_the_module():
    m = nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 2))
    cm = ember.compile(m)
    a = x_(2, 3)
    assert cm.eval() is cm and not cm.training and not m.training
    assert cm.train() is cm and cm.training and m.training
    cm.training = False  # assignment reaches the module
    assert not m.training
    m.eval()
    assert len(cm) == 3
    assert list(cm.state_dict()) == list(m.state_dict())
    assert [p is q for p, q in zip(cm.parameters(), m.parameters())] == [True] * 4
    assert [n for n, _ in cm.named_parameters()] == ["_orig_mod." + n for n, _ in m.named_parameters()]
    assert "Linear" in repr(cm)
    cm.extra = 5
    assert m.extra == 5 and cm.extra == 5
    del cm.extra
    assert not hasattr(m, "extra")
    with pytest.raises(AttributeError, match="no_such"):
        cm.no_such
    assert_same(cm.forward(a), m(a))
    assert_same(cm(a), m(a))
    cm.to(torch.float64)
    assert m[0].weight.dtype is torch.float64
    assert_same(cm(a.double()), m(a.double()))


def test_lazy_module_is_initialised_then_compiled():
    m = nn.LazyLinear(2)
    cm = ember.compile(m)
    a = x_(3, 5)
    out = cm(a)
    assert m.weight.shape == (2, 5)
    assert_same(out, m(a))
    assert_same(cm(a), m(a))
    assert ember.stats()["graphs"] == 1 and ember.stats()["fallbacks"] == 0  # compiled once initialised


def test_compiled_functions_called_inside_compiled_functions_make_one_graph():
    inner = ember.compile(lambda t: t.sin() * 2, backend="aot_eager")
    inner_module = ember.compile(nn.Linear(3, 3))

    def outer(t):
        return inner_module(inner(t)).relu() + 1

    counter = CompileCounter()
    a = x_(3)
    expected = inner_module._orig_mod(a.sin() * 2).relu() + 1
    assert_same(ember.compile(outer, backend=counter)(a), expected)
    assert counter.frame_count == 1 and ember.stats()["graph_breaks"] == 0


def test_disable_inside_and_outside():
    @torch.compiler.disable
    def opaque(t):
        return t * 100

    def uses(t):
        return opaque(t + 1) - 1

    a = x_(3)
    assert_same(ember.compile(uses)(a), uses(a))
    assert_same(ember.compile(opaque)(a), opaque(a))
    assert_same(ember.compile(add_scale, disable=True)(a, a), add_scale(a, a))
    assert ember.stats()["graphs"] <= 2


def test_modules_whose_forward_is_not_a_plain_function():
    class DecoratedForward(nn.Module):
        @ember.compile
        def forward(self, a):
            return a * 2

    class PartialForward(nn.Module):
        def _fwd(self, a, k):
            return a * k
        forward = functools.partialmethod(_fwd, k=3)

    a = x_(3)
    for m in (DecoratedForward(), PartialForward()):
        assert_same(ember.compile(m)(a), m(a))


def test_compiling_a_compiled_modules_forward():
    m = nn.Linear(3, 2)
    cm = ember.compile(m)
    counter = CompileCounter()
    a = x_(3)
    assert_same(ember.compile(cm.forward, backend=counter)(a), m(a))
    assert counter.frame_count == 1 and ember.stats()["fallbacks"] == 0


def test_explain_of_a_builtin():
    out = ember.explain(torch.relu)(x_(3))
    assert out.graph_count == 1 and out.op_count == 1  # (the call of torch.relu)


def test_hooks_on_the_compiled_wrapper_run():
    """Hooks registered on what ember.compile returned run around it, as on any module (directly,
    and when the compiled module is called inside another compiled frame)."""
    m = nn.Linear(2, 2)
    cm = ember.compile(m)
    calls = []
    a = x_(2)

    def outer(t):
        return cm(t) + 1

    compiled_outer = ember.compile(outer)
    assert_same(compiled_outer(a), m(a) + 1)
    handles = [cm.register_forward_pre_hook(lambda mod, i: calls.append("pre")),
               cm.register_forward_hook(lambda mod, i, o: o * 0)]
    assert_same(cm(a), m(a) * 0)
    assert_same(compiled_outer(a), m(a) * 0 + 1)
    assert calls == ["pre", "pre"]
    for h in handles:
        h.remove()
    assert_same(cm(a), m(a))
    assert_same(compiled_outer(a), m(a) + 1)


def test_module_with_its_own_call():
    """A module class that overrides __call__ (around Module.__call__): the compiled module runs
    that __call__, like the module (before, only forward was compiled and __call__ skipped)."""
    class Doubling(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, t):
            return self.lin(t)

        def __call__(self, t, scale=2.0):
            return super().__call__(t) * scale

    m = Doubling()
    cm = ember.compile(m)
    a = x_(2)
    assert_same(cm(a), m(a))
    assert_same(cm(a, scale=3.0), m(a, scale=3.0))


def test_top_module_with_hooks_or_instance_forward_is_compiled():
    """Hooks on the compiled module itself and an instance-level forward are compiled with the
    module's call (as any module called in a traced frame), not run eagerly."""
    m = nn.Linear(2, 2)
    cm = ember.compile(m)
    counter_before = ember.stats()["graphs"]
    a = x_(2)
    handle = m.register_forward_hook(lambda mod, i, o: o * 2)
    pre = m.register_forward_pre_hook(lambda mod, i: (i[0] + 1,))
    assert_same(cm(a), m(a))
    assert ember.stats()["graphs"] == counter_before + 1 and ember.stats()["fallbacks"] == 0
    handle.remove()
    pre.remove()
    assert_same(cm(a), m(a))
    m.forward = lambda t: t * 5
    assert_same(cm(a), a * 5)
    assert ember.stats()["fallbacks"] == 0


def test_pickling_keeps_the_backend_object():
    import threading

    class LockedBackend:  # not deep-copyable (a lock), but picklable by reference to its class
        def __init__(self):
            self.lock = threading.Lock()

        def __call__(self, gm, example_inputs):
            return gm.forward

        def __reduce__(self):
            return LockedBackend, ()

    backend = LockedBackend()
    cf = ember.compile(add_scale, backend=backend)
    assert cf.__reduce__()[1][1]["backend"] is backend
    cm = ember.compile(nn.Linear(2, 2), backend=backend)
    assert cm.__reduce__()[1][1]["backend"] is backend


def test_keyword_argument_named_self():
    # torch._foreach_pow(self=..., exponent=...): the compiled wrapper takes `self` only positionally
    def foreach_pow(**kwargs):
        return torch._foreach_pow(**kwargs)

    def g(x, self=1):
        return x + self

    xs = [torch.ones(2, 2)]
    assert_same(ember.compile(foreach_pow)(self=xs, exponent=2.7), foreach_pow(self=xs, exponent=2.7))
    assert_same(ember.compile(g)(torch.ones(1), self=3), g(torch.ones(1), self=3))


def test_compiling_a_builtin_function_makes_one_graph():
    """``ember.compile(torch.sin)``: a C function gets a Python frame that calls it (torch.compile
    makes one graph of it too)."""
    from ember_test_helpers import CompileCounter, assert_same
    counter = CompileCounter()
    compiled = ember.compile(torch.sin, backend=counter, fullgraph=True)
    x = torch.randn(5, 10)
    assert_same(compiled(x), torch.sin(x))
    assert counter.frame_count == 1 and counter.op_count == 1
    assert_same(ember.compile(torch.add)(x, 1, alpha=2), torch.add(x, 1, alpha=2))
