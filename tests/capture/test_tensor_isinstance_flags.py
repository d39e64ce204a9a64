"""``isinstance(t, nn.Parameter)`` / ``isinstance(t, nn.Buffer)`` follow the tensor's flag.

Their metaclasses answer True for any tensor with ``_is_param`` / ``_is_buffer`` set, whatever
its type: ``nn.Buffer(t)`` is a plain Tensor with ``_is_buffer``, ``nn.Parameter(TwoTensor(..))``
a TwoTensor with ``_is_param``. ember answered from the type alone (a wrong branch taken), and
did not guard the flag.
"""
import torch
from torch.testing._internal.two_tensor import TwoTensor

from ember_test_helpers import CompileCounter, assert_same, compile


def _branch(b):
    if isinstance(b, torch.nn.Buffer):
        return b + 1
    return b + 2


def test_buffer_flag_input():
    buf = torch.nn.Buffer(torch.ones(5))
    assert type(buf) is torch.Tensor
    assert_same(compile(_branch, backend="aot_eager", fullgraph=True)(buf), _branch(buf))


def test_buffer_flag_is_guarded():
    cnt = CompileCounter()
    c = compile(_branch, backend=cnt)
    t = torch.ones(5)
    buf = torch.nn.Buffer(torch.ones(5))
    for x in (t, buf, t, buf):
        assert_same(c(x), _branch(x))
    assert cnt.frame_count == 2
    # the flag cleared on the same object: a recompile, not the stale branch
    buf._is_buffer = False
    assert_same(c(buf), _branch(buf))


def test_wrapper_subclass_parameter():
    inner = torch.randn(3, 3)
    m = torch.nn.Linear(3, 3)
    m.weight = torch.nn.Parameter(TwoTensor(inner, inner.clone()))
    assert type(m.weight) is TwoTensor and isinstance(m.weight, torch.nn.Parameter)

    def fn(x):
        w = m.weight
        if isinstance(w, torch.nn.Parameter):
            return x + w.sum()
        return x - w.sum()

    x = torch.randn(3)
    with torch.no_grad():
        assert_same(compile(fn, backend="aot_eager")(x), fn(x))


def test_parameter_tuple_and_plain_tensor():
    def fn(a, b):
        return (isinstance(a, (torch.nn.Parameter, int)), isinstance(b, (torch.nn.Parameter, int)),
                isinstance(a * 2, torch.nn.Parameter))

    p = torch.nn.Parameter(torch.ones(2))
    t = torch.ones(2)
    assert compile(fn, backend="eager", fullgraph=True)(p, t) == fn(p, t)
    assert compile(fn, backend="eager", fullgraph=True)(t, p) == fn(t, p)


def _legacy_types(x, i):
    # a legacy tensor type's metaclass answers by dtype/device/layout, not by the Python class
    return (x * isinstance(x, torch.FloatTensor) + isinstance(i, torch.LongTensor)
            + isinstance(x, torch.DoubleTensor) * 10 + isinstance(x, (torch.LongTensor, torch.FloatTensor)) * 100
            + isinstance(i, (torch.FloatTensor, torch.Tensor)) * 1000 + isinstance(x, (torch.IntTensor, int)))


def test_legacy_tensor_type_isinstance():
    from ember_test_helpers import check_same
    check_same(_legacy_types, torch.randn(3, requires_grad=True), torch.arange(3))
    check_same(_legacy_types, torch.randn(3, dtype=torch.float64), torch.arange(3, dtype=torch.int32))


def test_legacy_tensor_type_isinstance_follows_dtype():
    cnt = CompileCounter()
    c = compile(_legacy_types, backend=cnt)
    for x in (torch.randn(3), torch.randn(3).double(), torch.randn(3).half(), torch.randn(3)):
        assert_same(c(x, torch.arange(3)), _legacy_types(x, torch.arange(3)))
    assert cnt.frame_count == 3
