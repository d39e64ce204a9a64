"""Every value a trace reads is guarded: rebinding or monkeypatching it after the first compile
recompiles (never a stale answer).

Identity for callables, classes and modules; the lookup path (instance ``__dict__``, then the
class and its MRO) for methods and attributes; absence for a failed ``hasattr`` /
``getattr(obj, name, default)``. Each case compiles, calls, changes one thing the trace read,
and compares the next call with eager.
"""
import enum
import functools
import math
import types

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, stats

X = torch.randn(4)

# Module-level names the cases rebind (restored by the fixture below).
ACT = torch.relu
PYFN = None
LAYER = None
COLOR = None
OPS = {"a": torch.relu}
SQRT = math.sqrt
_SAVED = dict(ACT=ACT, OPS=dict(OPS), SQRT=SQRT)


@pytest.fixture(autouse=True)
def _restore_globals():
    yield
    g = globals()
    g["ACT"], g["SQRT"] = _SAVED["ACT"], _SAVED["SQRT"]
    OPS.clear()
    OPS.update(_SAVED["OPS"])


def case_global_torch_fn():
    def f(x):
        return ACT(x)

    def change():
        globals()["ACT"] = torch.sigmoid
    return f, change


def case_namespace_torch_fn():
    ns = types.SimpleNamespace(act=F.relu)

    def f(x):
        return ns.act(x)

    def change():
        ns.act = F.gelu
    return f, change


def case_closure_torch_fn():
    act = torch.relu

    def f(x):
        return act(x)

    def change():
        nonlocal act
        act = torch.tanh
    return f, change


def case_dict_of_torch_fns():
    def f(x):
        return OPS["a"](x)

    def change():
        OPS["a"] = torch.tanh
    return f, change


def case_builtin_global():
    def f(x):
        return x * SQRT(4.0)

    def change():
        globals()["SQRT"] = math.log
    return f, change


def case_global_python_fn():
    def p1(x):
        return x + 1

    def p2(x):
        return x + 2
    globals()["PYFN"] = p1

    def f(x):
        return PYFN(x)

    def change():
        globals()["PYFN"] = p2
    return f, change


def case_decorated_fn_rebound():
    def deco(fn):
        @functools.wraps(fn)
        def w(*a):
            return fn(*a) + 1
        return w
    globals()["PYFN"] = deco(lambda x: x * 2)

    def f(x):
        return PYFN(x)

    def change():
        globals()["PYFN"] = deco(lambda x: x * 3)
    return f, change


def case_global_class():
    class A1:
        def go(self, x):
            return x + 1

    class A2:
        def go(self, x):
            return x + 2
    globals()["LAYER"] = A1

    def f(x):
        return LAYER().go(x)

    def change():
        globals()["LAYER"] = A2
    return f, change


def case_partial_keywords():
    def h(x, a=1, b=2):
        return x * a + b
    p = functools.partial(h, a=2)

    def f(x):
        return p(x)

    def change():
        p.keywords["b"] = 10  # the partial's own keywords dict, changed in place
    return f, change


def case_enum_global():
    class Color(enum.Enum):
        R = 1
        G = 2
    globals()["COLOR"] = Color.R

    def f(x):
        return x + (1 if COLOR is Color.R else 2)

    def change():
        globals()["COLOR"] = Color.G
    return f, change


def case_defaults():
    def h(x, k=1):
        return x + k

    def f(x):
        return h(x)

    def change():
        h.__defaults__ = (10,)
    return f, change


def case_kwdefaults():
    def h(x, *, k=1):
        return x + k

    def f(x):
        return h(x)

    def change():
        h.__kwdefaults__ = {"k": 10}
    return f, change


def case_class_attribute_via_new_instance():
    # a plain class attribute read through an instance made in the frame
    class A:
        k = 1

    def f(x):
        return x * A().k

    def change():
        A.k = 5
    return f, change


def case_class_attribute_shadowed_by_subclass():
    class A:
        k = 1

    class B(A):
        pass

    def f(x):
        return x * B().k

    def change():
        B.k = 5
    return f, change


def case_module_imported_in_frame():
    # `import m` inside the function reads sys.modules each call: m's attributes are guarded
    import sys
    import types
    mod = types.ModuleType("ember_test_imported_in_frame")
    mod.factor = 2
    sys.modules[mod.__name__] = mod

    def f(x):
        import ember_test_imported_in_frame
        return x * ember_test_imported_in_frame.factor

    def change():
        mod.factor = 6
    return f, change


def case_builtin_shadowed_by_new_global():
    # a global defined after compiling shadows the builtin the trace resolved
    def f(x):
        return x * abs(-2)

    def change():
        f.__globals__["abs"] = lambda v: 100
    return f, change


def case_compiled_fn_defaults():
    # the compiled function's own defaults (an omitted argument takes the new one)
    def f(x, k=1):
        return x + k

    def change():
        f.__defaults__ = (10,)
    return f, change


def case_compiled_fn_kwdefaults():
    def f(x, *, k=1):
        return x + k

    def change():
        f.__kwdefaults__ = {"k": 10}
    return f, change


def case_compiled_fn_kwdefaults_in_place():
    def f(x, *, k=1):
        return x + k

    def change():
        f.__kwdefaults__["k"] = 10
    return f, change


def case_compiled_fn_code_replaced():
    def f(x):
        return x + 1

    def g(x):
        return x * 10

    def change():
        f.__code__ = g.__code__
    return f, change


def case_compiled_forward_defaults():
    class M(nn.Module):
        def forward(self, x, k=1):
            return x + k
    m = M()

    def change():
        M.forward.__defaults__ = (10,)
    return m, change


def case_torch_fn_default():
    def h(x, act=torch.relu):
        return act(x)

    def f(x):
        return h(x)

    def change():
        h.__defaults__ = (torch.tanh,)
    return f, change


def case_method_defaults():
    class A:
        def helper(self, x, k=1):
            return x + k

        def f(self, x):
            return self.helper(x)
    a = A()

    def change():
        A.helper.__defaults__ = (5,)
    return a.f, change


def case_method_on_class():
    class A:
        def act(self, x):
            return x.relu()

        def f(self, x):
            return self.act(x)
    a = A()

    def change():
        A.act = lambda self, x: x.tanh()
    return a.f, change


def case_method_on_instance():
    class A:
        def act(self, x):
            return x.relu()

        def f(self, x):
            return self.act(x)
    a = A()

    def change():
        a.act = lambda x: x.tanh()
    return a.f, change


def case_method_shadowed_on_subclass():
    class Base:
        def act(self, x):
            return x.relu()

    class Der(Base):
        def f(self, x):
            return self.act(x)
    d = Der()

    def change():
        Der.act = lambda self, x: x.tanh()
    return d.f, change


def case_super_method():
    class Base:
        def go(self, x):
            return x + 1

    class Der(Base):
        def go(self, x):
            return super().go(x) * 2
    d = Der()

    def change():
        Base.go = lambda self, x: x + 5
    return d.go, change


def case_super_classmethod():
    class Base:
        @classmethod
        def make(cls, x):
            return x + 1

    class Der(Base):
        @classmethod
        def make(cls, x):
            return super().make(x) * 2

    def f(x):
        return Der.make(x)

    def change():
        Base.make = classmethod(lambda cls, x: x - 10)
    return f, change


def case_custom_getattribute_method():
    class GA:
        def __getattribute__(self, name):
            return object.__getattribute__(self, name)

        def act(self, x):
            return x + 1

        def go(self, x):
            return self.act(x)
    g = GA()

    def change():
        GA.act = lambda self, x: x - 1
    return g.go, change


def case_staticmethod():
    class S:
        @staticmethod
        def act(x):
            return x.relu()

        def f(self, x):
            return self.act(x)
    s = S()

    def change():
        S.act = staticmethod(lambda x: x.tanh())
    return s.f, change


def case_classmethod():
    class C:
        k = 1

        @classmethod
        def act(cls, x):
            return x + cls.k

        def f(self, x):
            return self.act(x)
    c = C()

    def change():
        C.act = classmethod(lambda cls, x: x - cls.k)
    return c.f, change


def case_property():
    class P:
        @property
        def s(self):
            return 2

        def f(self, x):
            return x * self.s
    p = P()

    def change():
        P.s = property(lambda self: 3)
    return p.f, change


def case_type_self_method():
    class T:
        def helper(self, x):
            return x + 1

        def f(self, x):
            return type(self).helper(self, x)
    t = T()

    def change():
        T.helper = lambda self, x: x + 2
    return t.f, change


def case_dunder_class_method():
    class T:
        def helper(self, x):
            return x + 1

        def f(self, x):
            return self.__class__.helper(self, x)
    t = T()

    def change():
        T.helper = lambda self, x: x + 2
    return t.f, change


def case_new_object_method():
    class Pt:
        def __init__(self, v):
            self.v = v

        def go(self, x):
            return x + self.v

    def f(x):
        return Pt(1).go(x)

    def change():
        Pt.go = lambda self, x: x - self.v
    return f, change


def case_dunder_call():
    class HasCall:
        def __call__(self, x):
            return x + 1
    hc = HasCall()

    def f(x):
        return hc(x)

    def change():
        HasCall.__call__ = lambda self, x: x + 2
    return f, change


def case_dunder_len():
    class Ln:
        def __len__(self):
            return 2
    ln = Ln()

    def f(x):
        return x * len(ln)

    def change():
        Ln.__len__ = lambda self: 3
    return f, change


def case_class_attribute():
    class C:
        scale = 2.0

        def f(self, x):
            return x * self.scale
    c = C()

    def change():
        C.scale = 3.0
    return c.f, change


def case_hasattr_absent():
    class B:
        def f(self, x):
            return x + 1 if hasattr(self, "extra") else x - 1
    b = B()

    def change():
        b.extra = 1
    return b.f, change


def case_getattr_default_instance():
    class B:
        def f(self, x):
            return x + getattr(self, "extra", 0)
    b = B()

    def change():
        b.extra = 5
    return b.f, change


def case_getattr_default_class():
    class B:
        def f(self, x):
            return x + getattr(self, "extra", 0)
    b = B()

    def change():
        B.extra = 5
    return b.f, change


def case_slots_hasattr():
    class WithSlots:
        __slots__ = ("a",)

        def go(self, x):
            return x + (self.a if hasattr(self, "a") else 0)
    w = WithSlots()

    def change():
        w.a = 3
    return w.go, change


def case_getattr_hook_shadowed():
    class Ga:
        def __getattr__(self, name):
            if name == "dyn":
                return 7
            raise AttributeError(name)

        def go(self, x):
            return x + self.dyn
    ga = Ga()

    def change():
        ga.__dict__["dyn"] = 1
    return ga.go, change


def case_python_module_attr_absent():
    mod = types.ModuleType("user_mod")

    def f(x):
        return x + (mod.k if hasattr(mod, "k") else 0)

    def change():
        mod.k = 3
    return f, change


class _Lin(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)


def case_module_method_on_class():
    class M(_Lin):
        def forward(self, x):
            return self.helper(x)

        def helper(self, x):
            return self.lin(x).relu()
    m = M()

    def change():
        M.helper = lambda self, x: self.lin(x).tanh()
    return m, change


def case_module_method_on_instance():
    class M(_Lin):
        def forward(self, x):
            return self.helper(x)

        def helper(self, x):
            return self.lin(x).relu()
    m = M()

    def change():
        m.helper = lambda x: x * 0
    return m, change


def case_module_hasattr():
    class M(_Lin):
        def forward(self, x):
            return x + 1 if hasattr(self, "extra") else x - 1
    m = M()

    def change():
        m.extra = nn.Linear(4, 4)
    return m, change


def case_module_getattr_default_param():
    class M(_Lin):
        def forward(self, x):
            b = getattr(self, "extra", None)
            # (x * 2, not x: a frame that traces no operation runs eagerly from then on, as torch's)
            return x * 2 if b is None else x + b
    m = M()

    def change():
        m.register_parameter("extra", nn.Parameter(torch.ones(4)))
    return m, change


def case_module_torch_fn_attribute():
    class M(_Lin):
        def __init__(self):
            super().__init__()
            self.act = F.relu

        def forward(self, x):
            return self.act(self.lin(x))
    m = M()

    def change():
        m.act = torch.tanh
    return m, change


def case_submodule_replaced():
    class M(_Lin):
        def forward(self, x):
            return self.lin(x)
    m = M()

    def change():
        m.lin = nn.Identity()
    return m, change


def case_submodule_forward_on_instance():
    class M(_Lin):
        def forward(self, x):
            return self.lin(x)
    m = M()

    def change():
        m.lin.forward = lambda x: x * 0
    return m, change


def case_training_flag():
    class M(_Lin):
        def forward(self, x):
            return x * 2 if self.training else x * 3
    m = M().eval()

    def change():
        m.train()
    return m, change


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


@pytest.fixture
def restore_globals():
    yield
    globals().pop("abs", None)  # (case_builtin_shadowed_by_new_global)


@pytest.mark.parametrize("name", sorted(CASES))
def test_change_after_compile_recompiles(name, restore_globals):
    fn, change = CASES[name]()
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    assert_same(compiled(X), fn(X))
    graphs = counter.frame_count
    change()
    assert_same(compiled(X), fn(X))
    assert_same(compiled(X), fn(X))
    if not REFERENCE:
        assert stats()["recompiles"] >= 1 or counter.frame_count > graphs or stats()["fallbacks"] > 0


def test_patching_torch_class_forward_recompiles():
    class M(_Lin):
        def forward(self, x):
            return self.lin(x)
    m = M()
    compiled = compile(m, backend=CompileCounter())
    assert_same(compiled(X), m(X))
    orig = nn.Linear.forward
    try:
        nn.Linear.forward = lambda self, x: x * 0
        assert_same(compiled(X), m(X))
    finally:
        nn.Linear.forward = orig
    assert_same(compiled(X), m(X))


def test_unchanged_lookups_do_not_recompile():
    """The new guards hold on repeated calls, for many instances of one class (no recompiles)."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            y = self.act(self.lin(x))
            return y + getattr(self, "bias_extra", 0) if hasattr(self, "flag") else y

        def act(self, x):
            return F.gelu(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block() for _ in range(3))

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x
    torch.manual_seed(0)
    net = Net()
    counter = CompileCounter()
    compiled = compile(net, backend=counter, fullgraph=True)
    for _ in range(3):
        assert_same(compiled(X), net(X))
    assert counter.frame_count == 1
    assert stats()["recompiles"] == 0
