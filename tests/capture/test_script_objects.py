"""TorchScript (torchbind) objects in the frame (ember/capture/variables/script_objects.py).

Uses the torchbind test classes that ship with torch (libtorchbind_test.so: _Foo, _TensorQueue,
_ReLUClass, ...; fake classes for _Foo and _TensorQueue registered by
torch.testing._internal.torchbind_impls). Compared with eager: outputs, the object's state after
the call, graph and break counts, recompiles.
"""
from __future__ import annotations

import logging

import pytest
import torch

import ember
from ember_test_helpers import CompileCounter, assert_same, reset, stats


def _load():
    """The library and torch's fake classes/kernels for it, without torchbind_impls'
    load_torchbind_test_lib: that imports torch.testing._internal.common_utils, which disables
    setting torch.backends flags for every later test in the process."""
    try:
        from pathlib import Path

        from torch.testing._internal import torchbind_impls
        if not _loaded():
            torch.ops.load_library(str(Path(torch.__file__).parent / "lib" / "libtorchbind_test.so"))
            torchbind_impls.register_fake_operators()
            torchbind_impls.register_fake_classes()
        return torch.classes._TorchScriptTesting
    except Exception as e:  # noqa: BLE001
        pytest.skip(f"torch's torchbind test library is not available: {type(e).__name__}: {e}",
                    allow_module_level=True)


def _loaded() -> bool:
    try:
        torch.classes._TorchScriptTesting._Foo
        return True
    except RuntimeError:
        return False


T = _load()
logging.getLogger("torch._library.fake_class_registry").setLevel(logging.ERROR)


def _queue(*tensors):
    q = T._TensorQueue(torch.full((2,), -1.0))
    for t in tensors:
        q.push(t.clone())
    return q


def _queue_state(q):
    return [q.pop() for _ in range(q.size())]


def _run(fn, make_args, backend="eager", calls=2):
    """fn eagerly and compiled on equal fresh arguments, ``calls`` times; outputs and the queue
    objects' contents afterwards compared."""
    counter = CompileCounter() if backend == "eager" else backend
    compiled = ember.compile(fn, backend=counter)
    for i in range(calls):
        torch.manual_seed(i)
        e_args = make_args()
        torch.manual_seed(i)
        c_args = make_args()
        expected, actual = fn(*e_args), compiled(*c_args)
        assert_same(actual, expected)
        for a, b in zip(c_args, e_args):
            if isinstance(a, torch.ScriptObject) and a._has_method("size"):
                assert_same(_queue_state(a), _queue_state(b), "queue after call")
            elif isinstance(a, torch.ScriptObject) and a._has_method("__obj_flatten__"):
                assert a.__obj_flatten__() == b.__obj_flatten__()
    return counter


def test_method_with_fake_class_is_traced_into_the_graph():
    def f(x, o):
        return o.add_tensor(x) + 1, o
    reset()
    counter = _run(f, lambda: (torch.arange(3.), T._Foo(2, 5)))
    # a new object each call, of the same class and state: the graph takes it as an input
    assert counter.frame_count == 1 and stats()["graph_breaks"] == 0 and stats()["recompiles"] == 0


def test_same_object_no_recompile_and_torchbind_op():
    foo = T._Foo(2, 5)

    def f(x):
        return torch.ops._TorchScriptTesting.takes_foo(foo, x) * 2 + foo.add_tensor(x)
    reset()
    counter = CompileCounter()
    compiled = ember.compile(f, backend=counter)
    for _ in range(3):
        x = torch.randn(4)
        assert_same(compiled(x), f(x))
    assert counter.frame_count == 1 and stats()["graph_breaks"] == 0 and stats()["recompiles"] == 0


def test_mutating_methods_run_in_the_graph_in_order():
    def f(x, q):
        q.push(x * 2)
        q.push(x + 1)
        a = q.pop()
        return a * 3, q.size()
    reset()
    _run(f, lambda: (torch.ones(2), _queue(torch.zeros(2))), calls=3)
    assert stats()["graph_breaks"] == 0


def test_size_is_a_constant_only_under_the_state_guard():
    q = _queue(torch.zeros(2))
    twin = _queue(torch.zeros(2))

    def f(x, q):
        q.push(x)          # changes the state every call: the next call's state guard fails
        return x * q.size()
    reset()
    counter = CompileCounter()
    compiled = ember.compile(f, backend=counter)
    for _ in range(3):
        x = torch.randn(2)
        assert_same(compiled(x, q), f(x.clone(), twin))   # x * 2, x * 3, x * 4 as in eager
    assert _queue_state(q) and True
    assert stats()["recompiles"] >= 2  # never a stale constant size


def test_torchbind_ops_on_a_queue():
    def f(x, q):
        torch.ops._TorchScriptTesting.queue_push(q, x.sin())
        y = torch.ops._TorchScriptTesting.queue_pop(q)
        return y + torch.ops._TorchScriptTesting.queue_size(q)
    reset()
    _run(f, lambda: (torch.randn(2), _queue(torch.ones(2), torch.zeros(2))))
    assert stats()["graph_breaks"] == 0


def test_method_without_fake_implementation_breaks_naming_the_class():
    def f(x, o):
        return x + o.add(3)   # _Foo's fake class has no `add`
    reset()
    _run(f, lambda: (torch.ones(2), T._Foo(1, 2)))
    assert stats()["graph_breaks"] >= 1 and stats()["fallbacks"] == 0
    text = str(ember.explain(f)(torch.ones(2), T._Foo(1, 2)))
    assert "EB0054" in text and "_TorchScriptTesting::_Foo" in text and "add()" in text


def test_class_without_fake_class_breaks_naming_the_class():
    def f(x, r):
        return r.run(x) * 2   # _ReLUClass: no fake class, not declared safe with the real object
    reset()
    _run(f, lambda: (torch.randn(5), T._ReLUClass()))
    assert stats()["graph_breaks"] >= 1 and stats()["fallbacks"] == 0
    text = str(ember.explain(f)(torch.randn(5), T._ReLUClass()))
    assert "_TorchScriptTesting::_ReLUClass" in text and "no fake class registered" in text


def test_class_declaring_itself_safe_with_the_real_object(monkeypatch):
    """torch's convention is a C++ ``tracing_mode()`` method answering "real"; no shipped class has
    one, so torch's predicate is patched to say it for _ReLUClass."""
    from torch._library import fake_class_registry
    original = fake_class_registry.tracing_with_real
    monkeypatch.setattr(fake_class_registry, "tracing_with_real",
                        lambda x: "_ReLUClass" in x._type().qualified_name() or original(x))

    def f(x, r):
        return r.run(x) * 2
    reset()
    counter = _run(f, lambda: (torch.randn(5), T._ReLUClass()))
    assert counter.frame_count == 1 and stats()["graph_breaks"] == 0


def test_passing_through_is_fine_and_returns_the_same_object():
    def f(x, o):
        return x * 2, o, [o]
    reset()
    o = T._Foo(1, 2)
    out = ember.compile(f, backend="eager")(torch.ones(2), o)
    assert out[1] is o and out[2][0] is o and stats()["graph_breaks"] == 0


def test_tensor_that_requires_grad_breaks():
    def f(x, o):
        return o.add_tensor(x).sum()
    reset()
    x = torch.randn(3, requires_grad=True)
    e = f(x, T._Foo(1, 2))
    c = ember.compile(f, backend="eager")(x, T._Foo(1, 2))
    assert_same(c, e)
    e.backward()
    g = x.grad.clone()
    x.grad = None
    c.backward()
    assert_same(x.grad, g)
    assert stats()["graph_breaks"] >= 1


def test_inside_cond_branch_breaks():
    foo = T._Foo(1, 2)

    def f(x):
        return torch.cond(x.sum() > 0, lambda a: foo.add_tensor(a), lambda a: a - 1, (x,))
    reset()
    x = torch.randn(3).abs()
    with pytest.raises(Exception) as eager:  # eager's cond compiles its branches itself
        f(x)
    try:
        got = ember.compile(f, backend="eager")(x)
    except Exception as e:  # noqa: BLE001
        assert type(e) is type(eager.value)
    else:
        assert_same(got, foo.add_tensor(x))


@pytest.mark.parametrize("backend", ["aot_eager", pytest.param("inductor", marks=pytest.mark.slow)])
def test_backends_that_trace_again_break_at_the_use(backend):
    def f(x, q):
        y = x.cos()
        q.push(y)
        return q.pop() + 1
    reset()
    _run(f, lambda: (torch.randn(3), _queue()), backend=backend)
    assert stats()["fallbacks"] == 0 and stats()["graph_breaks"] >= 1


def test_a_callable_backend_that_retraces_never_runs_the_object():
    """A user backend that runs the graph's nodes at compile time sees a stand-in that refuses:
    the compile fails (the frame runs eagerly in non-strict mode) instead of pushing into the queue."""
    touched = []

    def retracing_backend(gm, example_inputs):
        try:
            gm(*example_inputs)
        except Exception as e:  # noqa: BLE001
            touched.append(type(e).__name__)
            raise
        return gm.forward

    def f(x, q):
        q.push(x)
        return x + 1
    reset()
    q = _queue()
    with pytest.raises(Exception):
        ember.compile(f, backend=retracing_backend)(torch.ones(2), q)
    assert touched and q.size() == 0  # nothing was pushed at compile time


def test_scripted_module_object_breaks_naming_its_class():
    lin = torch.jit.script(torch.nn.Linear(3, 2))

    def f(x, c):
        return c.forward(x) + 1
    reset()
    x = torch.randn(4, 3)
    got = ember.compile(f, backend="eager")(x, lin._c)
    assert_same(got, f(x, lin._c))
    assert stats()["graph_breaks"] >= 1
    assert "Linear" in str(ember.explain(f)(x, lin._c))


def test_module_attribute_aliases_and_a_break_in_between():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.q = _queue(torch.ones(2))

        def forward(self, x):
            self.q.push(x * 2)
            return self.q.pop() + x

    reset()
    m_eager, m_comp = M(), M()
    compiled = ember.compile(m_comp, backend="eager")
    for _ in range(3):
        x = torch.randn(2)
        assert_same(compiled(x), m_eager(x))
    assert_same(_queue_state(m_comp.q), _queue_state(m_eager.q), "module queue")
    assert stats()["graph_breaks"] == 0 and stats()["recompiles"] == 0

    def two(x, a, b):
        a.push(x)
        return b.pop() * 2

    def same(x):  # one object passed twice: one input, guarded `is`
        q = _queue(torch.zeros(2))
        return x, q, q

    def distinct(x):
        return x, _queue(torch.zeros(2)), _queue(torch.ones(2))
    reset()
    compiled = ember.compile(two, backend="eager")
    for make in (same, distinct, same):
        torch.manual_seed(0)
        e_args = make(torch.randn(2))
        torch.manual_seed(0)
        c_args = make(torch.randn(2))
        assert_same(compiled(*c_args), two(*e_args))
        for a, b in zip(c_args[1:], e_args[1:]):
            assert_same(_queue_state(a), _queue_state(b), "queues")
    assert stats()["recompiles"] == 1  # aliased vs distinct: the guards tell them apart

    def broken(x, q):
        q.push(x + 1)
        torch._dynamo.graph_break()
        return q.pop() * 3
    reset()
    _run(broken, lambda: (torch.randn(2), _queue(torch.zeros(2))), calls=3)
    assert stats()["graph_breaks"] == 1 and stats()["fallbacks"] == 0


@torch.jit.script
class _ScriptedAcc:
    def __init__(self, n: int):
        self.n = n

    def add(self, k: int) -> int:
        self.n += k
        return self.n


def test_scripted_python_class_is_a_python_object_traced_as_python():
    """A @torch.jit.script class's instance (even one a scripted function returns) is an instance of
    the Python class, not a ScriptObject: traced like any object, its mutation replayed."""
    assert not isinstance(_ScriptedAcc(1), torch.ScriptObject)

    def f(x, o):
        return x * o.add(2)
    reset()
    o_eager, o_comp = _ScriptedAcc(1), _ScriptedAcc(1)
    compiled = ember.compile(f, backend="eager")
    for _ in range(3):
        x = torch.ones(2)
        assert_same(compiled(x, o_comp), f(x, o_eager))
    assert o_comp.n == o_eager.n == 7 and stats()["fallbacks"] == 0
