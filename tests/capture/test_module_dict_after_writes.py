"""A module's ``__dict__`` read after the frame assigned plain attributes of the module
(variables/instance_lookup.module_written_dict). The usual case is a rotary-embedding cache grown
in ``forward``: ``self.max_seq_len_cached = n`` and then ``self.register_buffer("cos", ...)``, whose
first line checks ``"_buffers" in self.__dict__``. That read was a graph break (EB0032) for any
module the frame had written an attribute of; now it sees the dict with the writes. A write that
lands in ``_parameters`` / ``_buffers`` / ``_modules`` instead still breaks."""
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile


class GrowingCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.cached = 2
        self.register_buffer("table", torch.zeros(2), persistent=False)

    def forward(self, x, n):
        if n > self.cached:
            self.cached = n
            self.register_buffer("table", torch.arange(n, dtype=x.dtype) * 0.5, persistent=False)
            self.register_buffer("counts", torch.ones(n))
        return x * self.table[:n].sum() + n, sorted(self.state_dict())


class DictReader(nn.Module):
    def __init__(self):
        super().__init__()
        self.tag = "a"

    def forward(self, x, step):
        self.tag = "b" + str(step)
        self.added = step
        d = self.__dict__
        return x * len(d), [k for k in d if not k.startswith("_")], d["tag"], "added" in d, d.get("missing")


class BufferByAttribute(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.zeros(2))

    def forward(self, x):
        self.b = x * 3  # goes into _buffers, not __dict__: reading __dict__ next still breaks
        self.register_buffer("extra", torch.ones(2))
        return x + self.b + self.extra


def _state(m):
    plain = sorted((k, v) for k, v in m.__dict__.items() if not k.startswith("_") and k != "training")
    return plain, dict(m.state_dict()), sorted(m._non_persistent_buffers_set)


def _compare(cls, calls, graphs, fullgraph):
    eager_m, compiled_m = cls(), cls()
    counter = CompileCounter()
    compiled = compile(compiled_m, backend=counter, fullgraph=fullgraph)
    for args in calls:
        x = torch.randn(2)
        expected = eager_m(x.clone(), *args)
        actual = compiled(x.clone(), *args)
        assert_same(actual, expected)
        assert_same(_state(compiled_m), _state(eager_m), "module state")
    assert counter.frame_count == graphs
    return counter


def test_register_buffer_after_attribute_write_is_one_graph():
    # fullgraph: no break. The first call grows the cache, the second (same n) does not: two graphs.
    _compare(GrowingCache, [(3,), (3,)], graphs=2, fullgraph=True)
    _compare(GrowingCache, [(1,), (4,)], graphs=2, fullgraph=True)


def test_register_buffer_after_attribute_write_aot_backward():
    eager_m, compiled_m = GrowingCache(), GrowingCache()
    compiled = compile(compiled_m, backend="aot_eager", fullgraph=True)
    xe = torch.randn(2, requires_grad=True)
    xc = xe.detach().clone().requires_grad_(True)
    expected, actual = eager_m(xe, 4), compiled(xc, 4)
    assert_same(actual, expected)
    expected[0].sum().backward()
    actual[0].sum().backward()
    assert_same(xc.grad, xe.grad)
    assert_same(_state(compiled_m), _state(eager_m))


def test_instance_dict_read_after_writes():
    _compare(DictReader, [(1,)], graphs=1, fullgraph=True)
    m = DictReader()
    compile(m, backend=CompileCounter(), fullgraph=True)(torch.ones(2), 7)  # no break: one graph
    assert m.tag == "b7" and m.added == 7


def test_buffer_assigned_by_attribute_then_dict_read_breaks():
    _compare(BufferByAttribute, [(), ()], graphs=2, fullgraph=False)  # a graph each side of the break


class RopeCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.max_seq_len_cached = 0

    def forward(self, x, n):
        if n > self.max_seq_len_cached:
            self.max_seq_len_cached = n
            self.register_buffer("cos", torch.arange(n, dtype=x.dtype).cos(), persistent=False)
        return x * self.cos[:n].sum()


class GenerateLoop(nn.Module):
    """The cache grows at every step of one frame: a write after the previous step's dict read."""

    def __init__(self):
        super().__init__()
        self.rope = RopeCache()

    def forward(self, x, steps):
        for i in range(steps):
            x = self.rope(x, 3 + i)
        return x, self.rope.max_seq_len_cached


class HeldView(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = 1

    def forward(self, x):
        self.a = 2
        d = self.__dict__
        self.b = 3  # into the view the frame holds, as into the real dict
        self.a = 5
        return x * d["a"] + d.get("b", 0), sorted(k for k in d if not k.startswith("_"))


def test_cache_grown_at_every_step_of_a_loop_is_one_graph():
    # (the second step's write after the first step's __dict__ read ran the whole frame eagerly)
    eager_m, compiled_m = GenerateLoop(), GenerateLoop()
    counter = CompileCounter()
    compiled = compile(compiled_m, backend=counter, fullgraph=True)
    for steps in (3, 2):
        x = torch.randn(2)
        assert_same(compiled(x.clone(), steps), eager_m(x.clone(), steps))
        assert_same(dict(compiled_m.rope.named_buffers()), dict(eager_m.rope.named_buffers()))
    assert counter.frame_count == 2


def test_write_after_reading_the_dict_shows_in_the_held_view():
    _compare(HeldView, [(), ()], graphs=2, fullgraph=True)
