"""torch functions wrapped by ``typing_extensions.deprecated`` (``torch._check_is_size``): the
wrapper's warning is replayed after the graph (visible as in eager) and the function is traced,
with no graph break — torch.compile's count. A program's own deprecated function still breaks at
the wrapper's ``warnings.warn``, as torch.compile does."""
import warnings

import pytest
import torch
from typing_extensions import deprecated

from ember_test_helpers import REFERENCE, CompileCounter, check_same, compile


def check_is_size_after_work(x):
    y = x.sin()
    torch._check_is_size(x.shape[0])
    return y + 1


def _warnings_of(fn, *args):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, [(w.category, str(w.message)) for w in caught]


def test_check_is_size_one_graph_and_its_warning():
    x = torch.randn(3)
    counter = CompileCounter()
    expected, eager_warnings = _warnings_of(check_is_size_after_work, x)
    actual, compiled_warnings = _warnings_of(compile(check_is_size_after_work, backend=counter), x)
    assert torch.equal(actual, expected)
    assert counter.frame_count == 1  # torch.compile: 1 graph (ember broke there: 2)
    assert [c for c, _ in eager_warnings] == [FutureWarning]
    if not REFERENCE:  # (torch.compile 2.13 drops the warning)
        assert compiled_warnings == eager_warnings


def test_check_is_size_fullgraph():
    check_same(check_is_size_after_work, torch.randn(4), graphs=1, fullgraph=True)


def test_check_is_size_still_checks():
    def f(x, n):
        y = x + 1
        torch._check_is_size(n)
        return y

    compiled = compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError):
            f(torch.ones(2), -1)
        with pytest.raises(RuntimeError):
            compiled(torch.ones(2), -1)


@deprecated("old_scale is old", category=FutureWarning)
def old_scale(x, k=2):
    return x * k


def calls_own_deprecated(x):
    y = x + 1
    return old_scale(y, k=3) + 1


@pytest.mark.usefixtures("without_nested_breaks")
def test_programs_own_deprecated_function_breaks_like_torch():
    x = torch.randn(3)
    counter = CompileCounter()
    expected, eager_warnings = _warnings_of(calls_own_deprecated, x)
    actual, compiled_warnings = _warnings_of(compile(calls_own_deprecated, backend=counter), x)
    assert torch.equal(actual, expected)
    assert compiled_warnings == eager_warnings
    assert counter.frame_count == 3  # torch.compile 2.13: 3 graphs (a break at the wrapper's warn)
