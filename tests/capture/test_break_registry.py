"""The graph-break registry (ember/capture/break_registry.py): every ``unsupported(...)`` call site
in ember/ names a registered id literal, every registered id is used, docs/graph_breaks.md is what
the generator writes, and breaks carry their id and hint to users (messages, explain)."""
import ast
import pathlib
import re

import pytest
import torch

import ember
from ember.capture.break_registry import BREAKS, render_markdown
from ember.report.break_docs import DOC

EMBER = pathlib.Path(ember.__file__).resolve().parent
REGISTRY = EMBER / "capture" / "break_registry.py"


def _unsupported_calls():
    """(file:line, the call's AST node) of every call to a function named ``unsupported``."""
    for path in sorted(EMBER.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else \
                    node.func.attr if isinstance(node.func, ast.Attribute) else None
                if name == "unsupported":
                    yield f"{path.relative_to(EMBER.parent)}:{node.lineno}", node


def _id_literals_outside_registry() -> set:
    """Every string constant of the form EB0000 in ember/ (call sites, ``id=`` keywords, defaults)."""
    found = set()
    for path in EMBER.rglob("*.py"):
        if path == REGISTRY:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.fullmatch(r"EB\d{4}", node.value):
                found.add(node.value)
    return found


def test_every_unsupported_call_site_names_a_registered_id():
    calls = list(_unsupported_calls())
    assert len(calls) > 300  # (the scan sees the call sites)
    bad = []
    for where, node in calls:
        first = node.args[0] if node.args else None
        if not (len(node.args) == 2 and isinstance(first, ast.Constant) and first.value in BREAKS
                and first.value != "EB0000"):
            bad.append(f"{where}: {ast.unparse(node)[:120]}")
    assert not bad, "unsupported(...) without a registered id literal:\n" + "\n".join(bad)


def test_every_registered_id_is_used():
    used = _id_literals_outside_registry()
    unused = sorted(set(BREAKS) - used)
    assert not unused, f"registered but never raised: {unused}"
    unknown = sorted(used - set(BREAKS))
    assert not unknown, f"used but not registered: {unknown}"


def test_registry_entries_are_complete_and_ids_sequential():
    ids = list(BREAKS)
    assert ids == [f"EB{i:04d}" for i in range(len(ids))]
    for k in BREAKS.values():
        assert k.title and k.explanation and k.hint, k.id
        assert "\n" not in k.explanation and "\n" not in k.hint, k.id


def test_committed_doc_is_generated():
    assert DOC.read_text() == render_markdown(), "run: python -m ember.report.break_docs"


def _breaks_on_item(x):
    y = x * 2
    if y.sum() > 0:  # data-dependent branch
        return y + 1
    return y - 1


def test_break_names_its_id_and_hint_in_messages_and_explain():
    x = torch.ones(3)
    out = ember.explain(_breaks_on_item)(x)
    assert torch.equal(out.result, _breaks_on_item(x))
    assert out.graph_break_count == 1
    r = out.break_reasons[0]
    assert r.id == "EB0016"
    assert r.hint == BREAKS["EB0016"].hint and r.explanation == BREAKS["EB0016"].explanation
    assert "truth value of a tensor" in r.reason  # (the old reason text is kept)
    text = str(out)
    assert "EB0016: data-dependent branch" in text and f"hint: {BREAKS['EB0016'].hint}" in text

    with pytest.raises(ember.Unsupported) as info:
        ember.compile(_breaks_on_item, backend="eager", fullgraph=True)(x)
    e = info.value
    assert e.id == "EB0016" and e.hint == BREAKS["EB0016"].hint
    assert str(e).startswith("EB0016: data-dependent branch") and "— hint: " in str(e)
    assert "if y.sum() > 0:" in str(e)  # (still located)


def _calls_disabled(x):
    return _disabled(x + 1) * 2


@torch.compiler.disable
def _disabled(x):
    return x - 3


def test_disabled_callee_break_has_its_own_id():
    x = torch.arange(4.0)
    out = ember.explain(_calls_disabled)(x)
    assert torch.equal(out.result, _calls_disabled(x))
    assert [r.id for r in out.break_reasons] == ["EB0029"]
    assert "torch.compiler.disable" in out.break_reasons[0].reason


def _prints(x):
    print("hello")
    return x + 1


def test_print_break_id_and_python_exception_default():
    out = ember.explain(_prints)(torch.zeros(2))
    assert [r.id for r in out.break_reasons] == ["EB0026"]
    from ember.exc import PythonException
    assert PythonException(ValueError("boom")).id == "EB0002"
    assert ember.Unsupported("no id given").id == "EB0000"
