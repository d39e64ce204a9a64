"""A module's internal dicts changed by the frame, then read by it: each compared with eager.

The frame's writes to a module's ``_buffers`` / ``_modules`` / hook dicts happen after the graph;
before, a later read of the module in the same frame (a member, the hooks of a call, a listing,
a ModuleList's items) saw the old dict: wrong answers. Now such a read breaks the graph, and the
rest runs after the writes.
"""
import copy

import torch
import torch.nn as nn

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset, stats

mm = torch.nn.modules.module


def _compare(make, steps=2, between=None):
    """``make()`` -> (fn, state): run fn eagerly on one world and compiled on an identical one."""
    torch.manual_seed(0)
    fn_e, state_e = make()
    torch.manual_seed(0)
    fn_c, state_c = make()
    compiled = compile(fn_c, backend=CompileCounter())
    for step in range(steps):
        x = torch.randn(3, 4)
        expected, actual = fn_e(x.clone()), compiled(x.clone())
        assert_same(actual, expected, f"step {step}")
        assert_same(dict(state_c.named_buffers()), dict(state_e.named_buffers()), f"buffers step {step}")
        assert [n for n, _ in state_c.named_modules()] == [n for n, _ in state_e.named_modules()]
        assert len(getattr(state_c, "_forward_hooks", {})) == len(getattr(state_e, "_forward_hooks", {}))


class BufferDictWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        self._buffers["b"] = self.b * 2
        return x * self.b


class BufferThenListing(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x):
        self.b = self.b * 2
        d = dict(self.named_buffers())
        return x * d["b"] + self._buffers["b"]


class AppendToModuleList(nn.Module):
    def __init__(self):
        super().__init__()
        self.ls = nn.ModuleList([nn.Linear(4, 4)])
        self.extra = nn.Tanh()

    def forward(self, x):
        if len(self.ls) < 3:
            self.ls.append(self.extra)
        for layer in self.ls:
            x = layer(x)
        return x, len(self.ls)


class DeleteSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        y = self.a(x)
        if "b" in self._modules:
            del self._modules["b"]
        return y + (self.b(x) if hasattr(self, "b") else 0)


class HookForOneCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        handle = self.lin.register_forward_hook(lambda mod, args, out: out * 2)
        y = self.lin(x)
        handle.remove()
        return y + self.lin(x)


def _module_case(cls):
    def make():
        m = cls()
        return m, m
    return make


def test_buffer_written_through_buffers_dict():
    _compare(_module_case(BufferDictWrite), steps=3)


def test_buffer_assigned_then_listed():
    _compare(_module_case(BufferThenListing), steps=2)


def test_module_list_appended_then_iterated():
    _compare(_module_case(AppendToModuleList), steps=3)


def test_submodule_deleted_from_modules_dict():
    _compare(_module_case(DeleteSubmodule), steps=2)


def test_hook_registered_and_removed_in_forward():
    _compare(_module_case(HookForOneCall), steps=2)


def test_hook_handle_removed_between_two_calls_in_frame():
    def make():
        m = nn.Linear(4, 4)
        handles = [m.register_forward_hook(lambda mod, args, out: out * 2)]

        def fn(x):
            y = m(x)
            if handles:
                handles.pop().remove()
            return y + m(x)
        return fn, m
    _compare(make, steps=2)


def test_global_hook_removed_between_two_calls_in_frame():
    torch.manual_seed(0)
    eager = nn.Linear(4, 4)
    comp = copy.deepcopy(eager)
    results = []
    for m, compiled in ((eager, False), (comp, True)):
        handles = [mm.register_module_forward_hook(lambda mod, args, out: out * 2)]
        try:
            def fn(x, m=m, handles=handles):
                y = m(x)
                if handles:
                    handles.pop().remove()
                return y + m(x)
            run = compile(fn, backend=CompileCounter()) if compiled else fn
            torch.manual_seed(1)
            results.append([run(torch.randn(3, 4)) for _ in range(2)])
        finally:
            for h in handles:
                h.remove()
    assert_same(results[1], results[0])
    assert not mm._global_forward_hooks


class InstanceDictWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2.0

    def forward(self, x):
        self.__dict__["k2"] = self.__dict__["k"] * 3
        return x * self.k2 + len(vars(self))


def test_instance_dict_written_then_attribute_read():
    reset()
    _compare(_module_case(InstanceDictWrite), steps=2)
    if not REFERENCE:
        assert stats()["fallbacks"] == 0  # a graph break at the read, not the whole frame run eagerly


class InstanceDictNewKey(nn.Module):
    def forward(self, x):
        self.__dict__["a"] = 10
        return x * self.a + self.__dict__["a"]


class InstanceDictShadowsSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        self.__dict__["lin"] = 3  # the instance dict is looked up before nn.Module.__getattr__
        return x * self.lin


class InstanceDictDelete(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 2.0

    def forward(self, x):
        del self.__dict__["k"]
        return x * getattr(self, "k", 5.0)


def _instance_dicts_equal(make_module, fullgraph):
    torch.manual_seed(0)
    m_e, m_c = make_module(), make_module()
    compiled = compile(m_c, backend=CompileCounter(), fullgraph=fullgraph)
    x = torch.randn(3, 4)
    assert_same(compiled(x.clone()), m_e(x.clone()))
    assert sorted(m_c.__dict__) == sorted(m_e.__dict__)
    assert {k: v for k, v in m_c.__dict__.items() if not k.startswith("_")} == \
        {k: v for k, v in m_e.__dict__.items() if not k.startswith("_")}


def test_instance_dict_written_then_read_in_one_graph():
    """A key the frame wrote into ``module.__dict__`` is read back from the dict the trace holds:
    one graph (fullgraph), the same answer and the same dict afterwards as eager."""
    for make in (InstanceDictNewKey, InstanceDictShadowsSubmodule, InstanceDictWrite):
        _instance_dicts_equal(make, fullgraph=True)


def test_instance_dict_key_deleted_then_read():
    """A key deleted from the instance dict, then looked up: not what the lookup found at entry (a
    graph break there; the answer and the dict as eager's)."""
    reset()
    _instance_dicts_equal(InstanceDictDelete, fullgraph=False)


class BufferRegisteredInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if not hasattr(self, "running"):
            self.register_buffer("running", torch.zeros(4))
        self.running.add_(x.detach().mean(0))
        return self.lin(x) + self.running


class BuffersWrittenThenRead(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(4))
        self.register_buffer("c", torch.ones(4))

    def forward(self, x):
        self._buffers["c"] = x.sum(0)
        self.register_buffer("d", self.b * 3, persistent=False)
        return x * self.b + self.c + self.d, hasattr(self, "d"), "d" in self._buffers


class SubmoduleAddedInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if not hasattr(self, "act"):
            self.add_module("act", nn.Tanh())
        return self.act(self.lin(x))


def test_buffer_registered_in_forward_read_in_the_same_graph():
    """``register_buffer`` in forward, then the buffer read: the read answers from the frame's
    pending write (one graph; 3 before, a break at the read), a recompile once it exists (as
    torch.compile: 2 graphs over 4 calls)."""
    cnt = CompileCounter()
    torch.manual_seed(0)
    m_e, m_c = BufferRegisteredInForward(), BufferRegisteredInForward()
    m_c.load_state_dict(m_e.state_dict())
    compiled = compile(m_c, backend=cnt)
    for step in range(4):
        x = torch.randn(3, 4)
        assert_same(compiled(x.clone()), m_e(x.clone()), f"step {step}")
        assert_same(dict(m_c.named_buffers()), dict(m_e.named_buffers()), f"buffers step {step}")
    assert cnt.frame_count == 2


def test_buffers_written_and_registered_then_read():
    cnt = CompileCounter()
    torch.manual_seed(0)
    m_e, m_c = BuffersWrittenThenRead(), BuffersWrittenThenRead()
    compiled = compile(m_c, backend=cnt, fullgraph=True)
    x = torch.randn(3, 4)
    assert_same(compiled(x.clone()), m_e(x.clone()))
    assert_same(dict(m_c.named_buffers()), dict(m_e.named_buffers()))
    assert m_c._non_persistent_buffers_set == m_e._non_persistent_buffers_set == {"d"}
    assert cnt.frame_count == 1


def test_submodule_added_in_forward():
    _compare(_module_case(SubmoduleAddedInForward), steps=3)
