"""Attribute writes on objects from outside the frame: custom ``__setattr__`` (inlined, as
for HF configs), ``super().__setattr__`` / ``super().__getattribute__`` / ``object.__setattr__``,
and the replay after the graph reproducing eager's final state whatever the write order.
Also ``super()`` inside a classmethod.
"""
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


class Logged:
    def __init__(self):
        object.__setattr__(self, "log", [])

    def __setattr__(self, name, value):
        self.log.append(name)
        super().__setattr__(name, value)


class Mapped:
    """Like transformers' PretrainedConfig: an attribute_map consulted on every read and write."""
    attribute_map = {"hidden": "d_model"}

    def __init__(self):
        self.d_model = 4
        self.problem_type = None

    def __setattr__(self, key, value):
        if key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        super().__setattr__(key, value)

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


class Box:
    def __init__(self):
        self.x = 1
        self.y = 2
        self.items = [0]


def _run_both(fn, make_state, x):
    """fn(state, x) eagerly and compiled on fresh states; compare outputs and state dicts."""
    s_eager, s_comp = make_state(), make_state()
    expected = fn(s_eager, x.clone())
    counter = CompileCounter()
    compiled = compile(lambda x: fn(s_comp, x), backend=counter, fullgraph=True)
    actual = compiled(x.clone())
    assert_same(actual, expected)
    assert vars(s_comp) == vars(s_eager)
    assert counter.frame_count == 1
    return s_comp, s_eager


def test_custom_setattr_is_inlined_once():
    def fn(obj, x):
        obj.a = 1
        obj.b = x.sum()  # a tensor value, replayed from the graph output
        return x * obj.a
    s, e = _run_both(fn, Logged, torch.randn(3))
    assert s.log == ["a", "b"] == e.log


def test_config_like_attribute_map_and_problem_type():
    def fn(cfg, x):
        if cfg.problem_type is None:
            cfg.problem_type = "single_label"
        cfg.hidden = 8            # written through the attribute map (to d_model)
        return x * cfg.hidden
    s, e = _run_both(fn, Mapped, torch.randn(3))
    assert s.d_model == 8 and s.problem_type == "single_label"


def test_object_setattr_bypasses_custom_setattr():
    def fn(obj, x):
        object.__setattr__(obj, "quiet", 3)
        return x + obj.quiet
    s, e = _run_both(fn, Logged, torch.randn(3))
    assert s.log == [] == e.log


def test_swap_attributes():
    def fn(box, x):
        box.x, box.y = box.y, box.x
        return x + box.x
    _run_both(fn, Box, torch.randn(3))


def test_write_does_not_redirect_a_container_mutation():
    def fn(box, x):
        old = box.items
        box.items = [5]
        old.append(7)           # mutates the list box.items held before the assignment
        return x + 1
    s, e = _run_both(fn, Box, torch.randn(3))
    assert s.items == [5]


class Base:
    @classmethod
    def make(cls, x):
        return x + 1, cls.__name__


class Child(Base):
    @classmethod
    def make(cls, x):
        y, name = super().make(x)
        return y * 2, name


def test_super_in_classmethod():
    def fn(x):
        return Child.make(x)
    x = torch.randn(3)
    counter = CompileCounter()
    assert_same(compile(fn, backend=counter, fullgraph=True)(x), fn(x))
    assert counter.frame_count == 1


class Settings:
    attribute_map = {"width": "d_model"}

    def __init__(self):
        self.d_model = 4
        self.tags = ["a"]
        self.inner = {"k": [1, 2]}

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


SETTINGS = Settings()


def test_deepcopy_of_outside_object_in_frame():
    """copy.deepcopy(config) inside forward (HF get_text_config): a private copy, one graph."""
    import copy

    def fn(x):
        c = copy.deepcopy(SETTINGS)
        c.d_model = 8
        c.tags.append("b")
        c.inner["k"].append(3)
        return x * c.width + len(c.tags) + len(c.inner["k"]), SETTINGS.d_model, SETTINGS.tags[:]
    x = torch.randn(3)
    counter = CompileCounter()
    assert_same(compile(fn, backend=counter, fullgraph=True)(x), fn(x))
    assert counter.frame_count == 1
    assert SETTINGS.tags == ["a"] and SETTINGS.inner == {"k": [1, 2]} and SETTINGS.d_model == 4


def test_copies_escaping_the_frame():
    import copy

    def fn(x):
        shallow = copy.copy(SETTINGS)
        deep = copy.deepcopy(SETTINGS)
        deep.tags.append("z")
        return x + 1, shallow, deep
    _, shallow, deep = compile(fn, backend=CompileCounter(), fullgraph=True)(torch.randn(2))
    assert type(shallow) is Settings and shallow is not SETTINGS and shallow.tags is SETTINGS.tags
    assert type(deep) is Settings and deep.tags == ["a", "z"] and deep.inner is not SETTINGS.inner
    assert SETTINGS.tags == ["a"]


def test_module_attribute_writes():
    """`mod.count = ...` on a Python module: a write to its globals (its functions see it)."""
    import types
    mod = types.ModuleType("ember_test_counter_mod")
    exec("count = 0\ndef bump():\n    global count\n    count += 1\n    return count\n", mod.__dict__)

    def fn(x):
        mod.count = mod.count + 10
        n = mod.bump()
        return x * n, mod.count
    x = torch.ones(2)
    mod.count = 0
    expected = fn(x)
    mod.count = 0
    counter = CompileCounter()
    compiled = compile(fn, backend=counter, fullgraph=True)
    assert_same(compiled(x), expected)
    assert mod.count == 11
    assert_same(compiled(x), (x * 22, 22))
    assert mod.count == 22


def test_logged_container_is_logged_as_it_was_at_the_call():
    import logging
    logger = logging.getLogger("ember_test_snapshot")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    handler = Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        def fn(x, items):
            items.append(1)
            logger.info("items %s", items)
            items.append(2)
            return x + 1
        expected_items = []
        fn(torch.randn(2), expected_items)
        eager_records = list(records)
        records.clear()
        items = []
        compile(fn, backend=CompileCounter(), fullgraph=True)(torch.randn(2), items)
        assert records == eager_records and items == expected_items
    finally:
        logger.removeHandler(handler)
