"""In-place writes whose source overlaps what they overwrite.

``t[1] = t[:, 0]`` copies element by element in eager: ``t[1, 1]`` receives ``t[1, 0]``
*after* it was overwritten. A functional graph reads the old values, so the same program
gave a different answer compiled (a fuzz finding, seed 203859). Such a write runs eagerly
at a graph break; writes from disjoint or identical memory stay in the graph.
"""
import pytest
import torch

from ember_test_helpers import REFERENCE, assert_same, compile


def column_into_row(t):
    t = t * 1
    t[1] = t[:, 0]
    return t


def shift_right(t):
    t = t * 1
    t[0, 1:] = t[0, :-1]
    return t


def copy_from_transpose(t):
    t = t * 1
    t.copy_(t.t())
    return t


def disjoint_rows(t):
    t = t * 1
    t[0] = t[2]
    return t


def same_elements(t):
    t = t * 1
    t[1] = t[1]
    t.add_(t)
    return t


def fresh_value(t):
    t = t * 1
    t[:, 0] = t[:, 0] * 2
    return t


OVERLAPPING = [column_into_row, shift_right, copy_from_transpose]
SAFE = [disjoint_rows, same_elements, fresh_value]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", OVERLAPPING + SAFE, ids=lambda f: f.__name__)
def test_overlapping_writes_match_eager(fn, backend):
    t = torch.arange(9.0).reshape(3, 3)

    def outcome(f):
        try:
            return f(t.clone()), None
        except RuntimeError as e:  # eager refuses some partial overlaps itself: the same error
            return None, str(e)

    (got, got_err), (ref, ref_err) = outcome(compile(fn, backend=backend)), outcome(fn)
    assert got_err == ref_err
    if ref_err is None:
        assert_same(got, ref)
    if not REFERENCE and ref_err is None:
        import ember
        breaks = ember.explain(fn, t.clone()).graph_break_count
        assert breaks == (1 if fn in OVERLAPPING else 0)


def into_first_half(x):
    n = x.shape[0]
    half = x[: n // 2] * 2
    out = half.new_zeros((n,) + tuple(half.shape[1:]))
    out[: n // 2] = half  # (a fresh value: no memory shared with `out`)
    return out


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_write_through_a_dynamic_slice_keeps_the_bound_symbolic(backend):
    """Looking for an overlap made the symbolic slice bound concrete (a guard `s0 // 2 == 2`): a
    recompile for every size under dynamic=True, where the written value shares no memory anyway."""
    from ember_test_helpers import CompileCounter
    cnt = CompileCounter()
    compiled = compile(into_first_half, backend=cnt if backend == "eager" else backend, dynamic=True)
    for n in (4, 6, 9):
        x = torch.randn(n, 3)
        assert_same(compiled(x), into_first_half(x))
    if backend == "eager":
        assert cnt.frame_count == 1
