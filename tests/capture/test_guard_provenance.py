"""Guard provenance (ember/capture/provenance.py): every guard records the user's line and the
operation that made the trace depend on it — for shape guards (static and symbolic), constant
(int argument) guards, global guards, attribute guards, and guards made inside an inlined callee
(the callee's line). ``ember.explain`` shows it, and a recompile reason names the failing guard
and its line."""
import inspect
import logging

import torch

import ember
from ember.capture.guards import GuardKind

THRESHOLD = 2
USE_BIAS = True


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    hits = [i for i, ln in enumerate(lines) if text in ln]
    assert len(hits) == 1, (text, hits)
    return start + hits[0]


def guards_of(compiled, entry=-1):
    cache = compiled._ember_cache if isinstance(compiled, torch.nn.Module) else compiled._cache
    return cache.entries[entry].guards.ordered()


def one(guards, pred):
    hits = [g for g in guards if pred(g)]
    assert len(hits) == 1, [g.with_provenance() for g in guards]
    return hits[0]


def _shape_branch(x):
    y = x * 2
    if x.shape[0] == 4:
        return y + 1
    return y - 1


def test_symbolic_shape_guard_names_the_branch_line():
    compiled = ember.compile(_shape_branch, backend="eager", dynamic=True)
    for n in (4, 5):
        x = torch.randn(n)
        assert torch.equal(compiled(x), _shape_branch(x))
    g = one(guards_of(compiled, 0), lambda g: g.kind is GuardKind.SHAPE_ENV and "L['x'].size()[0] == 4" in g.text)
    p = g.provenance
    assert p.filename == __file__ and p.lineno == line_of(_shape_branch, "if x.shape[0] == 4:")
    assert p.source_line == "if x.shape[0] == 4:" and p.function == "_shape_branch"
    assert p.operation.startswith(("POP_JUMP", "COMPARE_OP"))  # the branch that decided it
    # the second entry guards the other way, from the same line
    g2 = one(guards_of(compiled, 1), lambda g: "L['x'].size()[0] != 4" in g.text)
    assert g2.provenance.lineno == p.lineno


def test_static_shape_guard_names_the_first_use_of_the_argument():
    # (a tensor argument is guarded when the trace first uses it, as torch.compile's lazy trackers)
    compiled = ember.compile(_shape_branch, backend="eager")
    x = torch.randn(3)
    assert torch.equal(compiled(x), _shape_branch(x))
    g = one(guards_of(compiled), lambda g: g.kind is GuardKind.TENSOR_MATCH and "size=[3]" in g.text)
    assert g.provenance.lineno == line_of(_shape_branch, "y = x * 2")
    assert g.provenance.operation == "BINARY_OP"


def _int_arg(x, n):
    x = x + 1
    if n > THRESHOLD:
        return x * n
    return x


def test_constant_guard_on_an_int_argument_names_where_its_value_is_used():
    compiled = ember.compile(_int_arg, backend="eager")
    x = torch.ones(2)
    assert torch.equal(compiled(x, 3), _int_arg(x, 3))
    g = one(guards_of(compiled), lambda g: g.text == "L['n'] == 3")
    assert g.provenance.lineno == line_of(_int_arg, "if n > THRESHOLD:")
    assert g.provenance.operation == "COMPARE_OP >"
    # the global int on the same line is guarded where its value is used too (the comparison)
    t = one(guards_of(compiled), lambda g: g.text == "G['THRESHOLD'] == 2")
    assert t.provenance == g.provenance


def _global_flag(x):
    y = x.sin()
    if USE_BIAS:
        y = y + 1
    return y


def test_global_guard_names_the_line_reading_the_global():
    compiled = ember.compile(_global_flag, backend="eager")
    x = torch.randn(3)
    assert torch.equal(compiled(x), _global_flag(x))
    g = one(guards_of(compiled), lambda g: g.text == "G['USE_BIAS'] is True")
    assert g.provenance.lineno == line_of(_global_flag, "if USE_BIAS:")
    assert g.provenance.source_line == "if USE_BIAS:"


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 3
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return h * self.scale


def test_attribute_guard_names_the_line_reading_the_attribute():
    m = Scaled()
    compiled = ember.compile(m, backend="eager")
    x = torch.randn(2, 4)
    assert torch.allclose(compiled(x), m(x))
    g = one(guards_of(compiled), lambda g: g.text == "L['self'].scale == 3")
    assert g.provenance.lineno == line_of(Scaled.forward, "return h * self.scale")
    assert g.provenance.function == "Scaled.forward"


def _callee(x, k):
    if k == 0:
        return x
    return x * k


def _caller(x, k):
    x = x + 1
    return _callee(x, k) - 1


def test_guard_made_in_an_inlined_callee_names_the_callees_line():
    compiled = ember.compile(_caller, backend="eager")
    x = torch.randn(3)
    assert torch.equal(compiled(x, 2), _caller(x, 2))
    g = one(guards_of(compiled), lambda g: g.text == "L['k'] == 2")
    p = g.provenance
    assert p.lineno == line_of(_callee, "if k == 0:") and p.function == "_callee"
    # the user stack: the caller's call line, then the callee's line
    assert len(p.stack) == 2
    assert p.stack[0].endswith(f":{line_of(_caller, 'return _callee(x, k) - 1')} in _caller")
    assert p.stack[1].endswith(f":{p.lineno} in _callee")
    assert p.as_dict()["line"] == p.lineno


def test_explain_shows_provenance_for_each_guard():
    out = ember.explain(_int_arg)(torch.ones(2), 5)
    assert torch.equal(out.result, _int_arg(torch.ones(2), 5))
    details = out.guard_details[0]
    assert [str(g) for g in details] == out.guards[0]
    assert all(g.provenance is not None for g in details)
    text = str(out)
    line = line_of(_int_arg, "if n > THRESHOLD:")
    assert f"  - EQUALS_MATCH: L['n'] == 5\n      ← {__file__}:{line} in _int_arg (COMPARE_OP >): if n > THRESHOLD:" in text


def test_recompile_reason_names_the_failing_guard_and_its_line():
    compiled = ember.compile(_int_arg, backend="eager")
    x = torch.ones(2)
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger = logging.getLogger("ember.recompiles")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        assert torch.equal(compiled(x, 3), _int_arg(x, 3))
        assert torch.equal(compiled(x, 4), _int_arg(x, 4))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    line = line_of(_int_arg, "if n > THRESHOLD:")
    reasons = compiled._cache.recompile_reasons
    assert len(reasons) == 1
    assert reasons[0].startswith("L['n'] == 3 (now: 4) — guard from ")
    assert f"{__file__}:{line} in _int_arg (COMPARE_OP >): if n > THRESHOLD:" in reasons[0]
    assert any(f":{line} in _int_arg" in r.getMessage() for r in records)


def test_provenance_is_compile_time_only():
    """The generated guard function never mentions it (no per-call cost)."""
    compiled = ember.compile(_int_arg, backend="eager")
    compiled(torch.ones(2), 3)
    entry = compiled._cache.entries[-1]
    assert "THRESHOLD" in entry.source and "provenance" not in entry.source and "___prov" not in entry.source


class WithDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        return self.drop(x) + 1


def test_guard_made_inside_torch_module_code_names_the_users_line():
    """``Dropout.forward`` reads ``self.training`` (torch's code): the guard names the user's call."""
    m = WithDropout().eval()
    compiled = ember.compile(m, backend="eager")
    x = torch.randn(3)
    assert torch.equal(compiled(x), m(x))
    guards = [g for g in guards_of(compiled) if "training" in g.text and "drop" in g.text]
    assert guards, [g.with_provenance() for g in guards_of(compiled)]
    for g in guards:
        p = g.provenance
        assert p.filename == __file__ and p.lineno == line_of(WithDropout.forward, "return self.drop(x) + 1")
        assert "→ Dropout.forward" in p.operation
        assert "torch" in p.stack[-1] and "dropout" in p.stack[-1]  # the stack keeps torch's frame


def test_guards_log_shows_provenance():
    records = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    logger = logging.getLogger("ember.guards")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        compiled = ember.compile(_global_flag, backend="eager")
        x = torch.randn(3)
        assert torch.equal(compiled(x), _global_flag(x))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    text = "\n".join(r.getMessage() for r in records)
    line = line_of(_global_flag, "if USE_BIAS:")
    assert f"EQUALS_MATCH: G['USE_BIAS'] is True  ← {__file__}:{line} in _global_flag (LOAD_GLOBAL USE_BIAS): if USE_BIAS:" in text
