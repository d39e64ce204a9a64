"""Objects and builtins inside the frame: monkeypatched builtins, list subclasses made in the frame
or passed in, objects the frame constructs, pure builtins and descriptors on constants."""
import builtins

import torch

from ember_test_helpers import CompileCounter, check_same, compile


class Tagged:
    pass


def branch_on_isinstance(x, y):
    if isinstance(y, Tagged):
        return x + 1
    return x - 1


def test_monkeypatched_builtin_is_guarded():
    """A builtin the frame looked up may be replaced on the builtins module: the cached code must
    not keep using the one it traced (it would give the other branch's answer)."""
    original = builtins.isinstance

    def patched(obj, classinfo):
        return False if original(obj, Tagged) else original(obj, classinfo)

    x, y = torch.ones(2), Tagged()
    counter = CompileCounter()
    fn = compile(branch_on_isinstance, backend=counter, fullgraph=True)
    assert torch.equal(fn(x, y), x + 1)
    try:
        builtins.isinstance = patched
        expected = branch_on_isinstance(x, y)
        actual = fn(x, y)
    finally:
        builtins.isinstance = original
    assert torch.equal(expected, x - 1)
    assert torch.equal(actual, expected)
    assert torch.equal(fn(x, y), x + 1)  # unpatched again: the first entry serves
    assert counter.frame_count == 2


class ProcessorList(list):
    """transformers' LogitsProcessorList: a list with a ``__call__`` and helper methods."""

    def __call__(self, x):
        for processor in self:
            x = processor(x)
        return x

    def length_times_10(self):
        return len(self) * 10

    def append_twice(self, x):
        self.extend([x, x])


def build_and_return_list_subclass(a, b):
    l1 = ProcessorList([a + 1])
    l2 = ProcessorList([b + 2])
    l1.extend(l2)
    l1.append(l1.length_times_10())
    return l1


def test_list_subclass_with_call_made_in_frame():
    counter = check_same(build_and_return_list_subclass, torch.randn(3), torch.randn(3))
    out = compile(build_and_return_list_subclass)(torch.randn(3), torch.randn(3))
    assert type(out) is ProcessorList and out[2] == 20
    assert counter.frame_count == 1


def call_list_subclass(x, procs):
    return procs(x) + len(procs)


def test_list_subclass_input_called():
    procs = ProcessorList([torch.nn.ReLU(), torch.nn.Sigmoid(), torch.tanh])
    check_same(call_list_subclass, torch.randn(4), procs)


def merge_processors(x, left, right):
    for default in left:
        for custom in right:
            if type(custom) is type(default):
                raise ValueError
    left.extend(right)
    left.append_twice(torch.nn.Identity())
    return left(x)


def test_list_subclass_input_mutated_and_replayed():
    x = torch.randn(5)
    eager_l, comp_l = ProcessorList([torch.nn.ReLU()]), ProcessorList([torch.nn.ReLU()])
    right = ProcessorList([torch.nn.Sigmoid()])
    counter = CompileCounter()
    expected = merge_processors(x, eager_l, right)
    actual = compile(merge_processors, backend=counter, fullgraph=True)(x, comp_l, right)
    assert torch.equal(actual, expected)
    assert type(comp_l) is ProcessorList and [type(p) for p in comp_l] == [type(p) for p in eager_l]
    assert len(comp_l) == 4 and counter.frame_count == 1


def aliased_list_subclass(a, b):
    a.extend(b)
    a.append_twice(b[1] + 1)
    return b


def test_list_subclass_input_aliased():
    x, y = torch.randn(3), torch.randn(3)
    l = ProcessorList([x, y])
    out = compile(aliased_list_subclass, fullgraph=True)(l, l)
    assert out is l and len(l) == 6
    assert l[0] is x and l[1] is y and l[2] is x and l[3] is y
    assert torch.equal(l[4], y + 1) and l[5] is l[4]


def test_list_subclass_input_instance_attribute_and_class_change():
    """An instance attribute would shadow the class's method, and the class's methods may be
    replaced between calls: neither may reuse the traced method."""
    def fn(x, procs):
        return x + procs.length_times_10()

    compiled = compile(fn, fullgraph=False)
    x = torch.zeros(1)
    procs = ProcessorList([1, 2])
    assert compiled(x, procs).item() == 20
    shadowed = ProcessorList([1, 2])
    shadowed.length_times_10 = lambda: 7
    assert compiled(x, shadowed).item() == 7

    class Other(list):
        def length_times_10(self):
            return len(self) * 10

    other = Other([1])
    assert compiled(x, other).item() == 10
    Other.length_times_10 = lambda self: -1
    assert compiled(x, other).item() == -1


def test_calling_a_plain_list_raises_type_error():
    def fn(x, l):
        return l(x)

    try:
        fn(torch.ones(1), [1])
    except TypeError as e:
        expected = str(e)
    try:
        compile(fn)(torch.ones(1), [1])
    except TypeError as e:
        assert str(e) == expected
    else:
        raise AssertionError("no TypeError")


def return_new_torch_module(x):
    act = torch.nn.LeakyReLU(0.2)
    return act, act(x), act


def test_stateless_torch_module_made_in_frame_escapes():
    fn = compile(return_new_torch_module, fullgraph=True)
    x = torch.randn(4)
    a1, y, a1_again = fn(x)
    a2, _, _ = fn(x)
    assert type(a1) is torch.nn.LeakyReLU and a1.negative_slope == 0.2
    assert a1 is a1_again and a1 is not a2  # one object per call, as in eager
    assert torch.equal(y, torch.nn.functional.leaky_relu(x, 0.2))


class Gelu(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = torch.nn.functional.gelu

    def forward(self, x):
        return self.act(x)


class Matrix(torch.nn.Module):
    def __init__(self, data):
        super().__init__()
        self._data = data
        self.foo = 10 * self.blocking

    @property
    def data(self):
        return self._data

    @property
    def blocking(self):
        return self.data.shape[1]

    def forward(self, x):
        return x @ self._data


def return_new_user_modules(x):
    g = Gelu()
    m = Matrix(x.t() * 2)
    return g, g(x), m, m(x)


def test_user_module_made_in_frame_escapes():
    x = torch.randn(3, 5)
    g, y, m, z = compile(return_new_user_modules, fullgraph=True)(x)
    eg, ey, em, ez = return_new_user_modules(x)
    assert type(g) is Gelu and g.act is torch.nn.functional.gelu and g.training
    assert torch.equal(y, ey) and torch.allclose(z, ez)
    assert type(m) is Matrix and m.foo == em.foo == 30 and torch.equal(m.data, em.data)
    assert list(m.parameters()) == [] and list(m.buffers()) == [] and hasattr(m, "_buffers")
    assert torch.allclose(m(x), em(x))


class HoldsParameter(torch.nn.Module):
    def __init__(self, t):
        super().__init__()
        self.w = torch.nn.Parameter(t)


def module_with_parameter_made_in_frame(x):
    m = HoldsParameter(torch.ones(2))
    return x + 1, len(list(m.parameters()))


def test_module_made_in_frame_with_parameter_still_breaks():
    check_same(module_with_parameter_made_in_frame, torch.randn(2), fullgraph=False, graphs=None)


def scalar_type_methods(x):
    return (x + 1, bool.__new__(bool), bool.__new__(bool, 1), int.__new__(int, 42), bool.from_bytes(b"ab", "little"),
            int.from_bytes(b"\xff", byteorder="big", signed=True), float.fromhex("0x1.ffffp10"),
            str.__new__(str, 12), complex.__new__(complex, 1, 2))


def test_scalar_type_methods_fold():
    out = check_same(scalar_type_methods, torch.randn(2))
    assert out.frame_count == 1
    res = compile(scalar_type_methods, fullgraph=True)(torch.randn(2))
    assert res[1] is False and res[2] is True and type(res[3]) is int


def scalar_type_method_raises(x):
    return x + int.from_bytes(b"\x01", "sideways")


def test_scalar_type_method_raises_like_eager():
    from ember_test_helpers import check_raises_same
    check_raises_same(scalar_type_method_raises, torch.randn(2))


def make_fn_and_name():
    def another_fn():
        pass

    def fn(x):
        return x + 1, str(another_fn), "another_fn" in repr(another_fn)

    return fn


def test_str_of_function_names_that_function():
    fn = make_fn_and_name()
    compiled = compile(fn, fullgraph=True)
    x = torch.randn(2)
    assert compiled(x)[1:] == fn(x)[1:]
    fn2 = make_fn_and_name()  # same code, another function object (another address)
    assert compile(fn2, fullgraph=True)(x)[1:] == fn2(x)[1:]
    assert compiled(x)[1:] == fn(x)[1:]


def partial_attributes(x, p):
    import functools
    q = functools.partial(torch.add, other=1)
    return x + 1, hasattr(p, "__name__"), hasattr(q, "__name__"), hasattr(p, "func"), getattr(p, "tag", None)


def test_partial_has_no_name_attribute():
    import functools
    p = functools.partial(torch.mul, other=2)
    check_same(partial_attributes, torch.randn(2), p)
    tagged = functools.partial(torch.mul, other=2)
    tagged.tag = "t"
    tagged.__name__ = "named"
    check_same(partial_attributes, torch.randn(2), tagged, graphs=None)


def weakref_made_in_frame(x, y):
    import weakref
    r = weakref.ref(x)
    return r() * y, r


def test_weakref_made_in_frame():
    import weakref
    x, y = torch.randn(4), torch.randn(4)
    out, r = compile(weakref_made_in_frame, fullgraph=True)(x, y)
    assert torch.equal(out, x * y)
    assert type(r) is weakref.ref and r() is x and r is weakref.ref(x)


def test_thread_local_attributes_read_and_written():
    import threading
    loc = threading.local()
    loc.scale = torch.full((1,), 3.0)

    def fn(x, l):
        l.last = x
        if hasattr(l, "scale"):
            return torch.cat([x, l.scale]), hasattr(l, "missing")
        return x, False

    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    x = torch.ones(2)
    out, missing = compiled(x, loc)
    assert torch.equal(out, torch.tensor([1.0, 1.0, 3.0])) and missing is False
    assert loc.last is x and counter.frame_count == 1
    seen = {}

    def other_thread():  # another thread's local has none of these attributes
        seen["out"] = compiled(x, loc)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert seen["out"][0] is x and seen["out"][1] is False
    assert not hasattr(threading.local(), "last")


class TanhPlusOne(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x + 1)


class Factory(torch.nn.Module):
    def __new__(cls, kind="tanh"):  # a module class whose construction hands out another module
        return TanhPlusOne() if kind == "tanh" else torch.nn.Identity()


class UsesFactory(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 2)

    def forward(self, x):
        other = Factory()
        ident = Factory("id")
        return self.layer(x) + other(x) + ident(x), type(other).__name__


def test_module_with_python_new_returning_another_module():
    from ember_test_helpers import check_module_same
    check_module_same(UsesFactory, torch.randn(2, 2))


def format_tuple_of_dataclasses(x):
    from torch.utils._pytree import MappingKey, SequenceKey
    path = (MappingKey("a"), SequenceKey(0))
    return x * 2, f"path={path}", str([SequenceKey(1), 2.5, None]), repr((MappingKey("b"),))


def test_formatting_tuple_of_frozen_dataclasses():
    check_same(format_tuple_of_dataclasses, torch.randn(2))


class SetOnlyField:
    """A descriptor with __set__ but no __get__: reads find the instance dict first."""

    def __set__(self, obj, value):
        obj.__dict__["field"] = obj.__dict__.get("field", 0) + value * 2


class HasSetOnlyField:
    field = SetOnlyField()

    def __init__(self):
        self.__dict__["field"] = 3


def read_set_only_descriptor(x, foo):
    before = foo.field
    foo.field = 10
    return x + foo.field, before == 3, isinstance(HasSetOnlyField.field, SetOnlyField)


def test_descriptor_without_get_reads_instance_dict():
    x = torch.zeros(2)
    compiled = compile(read_set_only_descriptor, fullgraph=True)
    for _ in range(2):
        eager_foo, comp_foo = HasSetOnlyField(), HasSetOnlyField()
        expected = read_set_only_descriptor(x, eager_foo)
        actual = compiled(x, comp_foo)
        assert torch.equal(actual[0], expected[0]) and actual[1:] == expected[1:] == (True, True)
        assert comp_foo.field == eager_foo.field == 23


class WeakrefSlotted:
    pass


def read_dunder_weakref(x):
    obj = WeakrefSlotted()
    if obj.__weakref__:
        return torch.cos(x)
    return torch.sin(x), obj.__weakref__


def test_dunder_weakref_of_object_made_in_frame():
    check_same(read_dunder_weakref, torch.randn(3))


def test_subclasses_listed_and_guarded():
    class Base:
        pass

    class A(Base):
        pass

    def fn(x, cls):
        subs = cls.__subclasses__()
        return x + len(subs), subs

    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    x = torch.zeros(1)
    out, subs = compiled(x, Base)
    assert subs == [A] and out.item() == 1

    class B(Base):  # a new subclass: the answer changes, so must the compiled code's
        pass

    out, subs = compiled(x, Base)
    assert subs == Base.__subclasses__() == [A, B] and out.item() == 2
    assert counter.frame_count == 2


def torch_version_checks(x):
    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    if torch.__version__ >= "2.0.0":
        return x + int(major)
    return x - 1


def test_torch_version_is_a_constant():
    check_same(torch_version_checks, torch.zeros(2))


class _Node:
    def __init__(self, name):
        self.name, self.children = name, []

    @__import__("reprlib").recursive_repr()
    def __repr__(self):
        return f"Node({self.name}, {self.children})"


def format_recursive_repr_objects(x):
    a = _Node("a")
    a.children.append(_Node("b"))
    return x + 1, f"tree={a}", repr([a, 3])


def test_formatting_objects_whose_repr_is_reprlib_recursive_repr():
    # reprlib.recursive_repr guards __repr__ with the thread id (3.13's dataclasses use it too)
    check_same(format_recursive_repr_objects, torch.randn(2))
