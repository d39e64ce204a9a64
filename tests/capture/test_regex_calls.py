"""``re``'s functions called on constants inside a compiled frame (variables/opaque_callables.py):
answered at trace time as eager answers them, so the frame stays one graph; the compiled pattern
and match they return are constants whose methods fold too. Anything else (a callable
replacement) stays a graph break with eager's answer."""
import re
import unittest

import pytest
import torch

from ember_test_helpers import REFERENCE, check_raises_same, check_same, stats


def regex_module_functions(x):
    pattern = re.compile(r"(\d+)x(\d+)", re.IGNORECASE)
    m = pattern.fullmatch("12X34")
    rows, cols = int(m.group(1)), int(m.group(2))
    words = re.split(r"[,;]", "a,b;c")
    found = re.findall(r"\d", "a1b2c3")
    renamed, count = re.subn(r"\.weight$", ".w", "layer.0.weight")
    missing = re.search("z+", "abc") is None
    return x * rows + cols + len(words) + len(found), renamed, count, missing, m.span(2), re.escape("a.b")


def test_regex_functions_on_constants_are_one_graph():
    check_same(regex_module_functions, torch.ones(3), graphs=1, fullgraph=True)


class _Case(unittest.TestCase):
    def runTest(self):
        pass


_CASE = _Case()


def assert_raises_regex_in_frame(x):
    # unittest compiles the expected pattern with re.compile and searches the message with it
    with _CASE.assertRaisesRegex(ValueError, r"bad \w+"):
        raise ValueError("bad value")
    return x + 1


@pytest.mark.skipif(REFERENCE, reason="Dynamo does not trace unittest's methods unless enable_trace_unittest is set")
def test_assert_raises_regex_compiles_in_the_frame():
    check_same(assert_raises_regex_in_frame, torch.zeros(2), graphs=1, fullgraph=True)


def bad_pattern(x):
    return x + len(re.compile("(unclosed").pattern)


@pytest.mark.skipif(REFERENCE, reason="Dynamo reports the re.error of a traced re.compile as its own error")
def test_invalid_pattern_raises_like_eager():
    err = check_raises_same(bad_pattern, torch.zeros(1))
    assert isinstance(err, re.error)


def callable_replacement(x):
    text = re.sub(r"\d", lambda m: str(int(m.group()) + 1), "a1b2")  # a function: not a constant
    return x + len(text), text


@pytest.mark.skipif(REFERENCE, reason="ember's own break counter (ember.stats())")
def test_callable_replacement_still_breaks_with_eager_answer():
    before = stats()["graph_breaks"]
    check_same(callable_replacement, torch.zeros(2), graphs=None, fullgraph=False)
    assert stats()["graph_breaks"] > before
