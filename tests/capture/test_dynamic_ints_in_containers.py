"""A dynamic int (an argument that changed, so automatic dynamic made it a symbol) looked up in a
tuple or list: ``index`` / ``count`` / ``in`` / ``remove`` compare it item by item, a guard on each
comparison made (``n != 2``), never on its value (which recompiled for every new ``n``, as the
whole container was folded to a constant). Outputs equal eager's; graphs: one static, one
dynamic, and one more only for a value that changes a comparison (``n == 2``), as torch.compile."""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile


def tuple_index(x, n):
    return x + (n, 2).index(2)


def tuple_count(x, n):
    return x + (n, 2, 2).count(2)


def list_index(x, n):
    return x * [n, 3, 2].index(2)


def list_remove(x, n):
    items = [n, 2, 4]
    items.remove(2)
    return x + len(items) + items.index(4)


def in_list_of_sizes(x, n):
    return x + (1 if 2 in [n, n + 1] else 0)


@pytest.mark.parametrize("fn", [tuple_index, tuple_count, list_index, list_remove, in_list_of_sizes])
def test_dynamic_int_compared_not_specialised(fn):
    if REFERENCE and fn is in_list_of_sizes:
        pytest.skip("torch.compile 2.13 answers this one wrongly: `2 in [n, n + 1]` stays False for n = 2 and 1")
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    values = [5, 6, 7, 8, 2, 9, 1]
    for n in values:
        x = torch.arange(3.0)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    # static 5; dynamic from 6 on (guards n != 2, n + 1 != 2); n == 2 and n == 1 change a comparison
    expected = {in_list_of_sizes: 4}.get(fn, 3)
    assert counter.frame_count == expected, (REFERENCE, counter.frame_count)


RANGES = {
    "range": lambda x, n: x * 2 if n in range(100) else x + 1,
    "range_step": lambda x, n: x * 2 if n in range(3, 40, 3) else x + 1,
    "range_negative_step": lambda x, n: x * 2 if n in range(30, 2, -4) else x + 1,
    "not_in_range": lambda x, n: x * 2 if n not in range(5, 9) else x + 1,
}


@pytest.mark.parametrize("name", sorted(RANGES))
def test_dynamic_int_in_range_guards_bounds(name):
    fn = RANGES[name]
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    values = [6, 7, 8, 9, 10, 11, 12, 200, -1, 50, 3, 30, 26, 5, 2, 4, 0, 99, 100]
    for n in values:
        x = torch.arange(3.0)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    if REFERENCE:
        return  # (torch.compile 2.13 raises an internal error on `n in range(...)` of a dynamic int)
    # static 6, then dynamic: one graph per outcome of the guards (below, above, off the step, inside),
    # not one per value (19 values)
    assert counter.frame_count <= 5, counter.frame_count
def index_between(x, start, stop):
    return x + [1, 2, 3, 4].index(3, start, stop) + (1, 2, 3, 4).index(3, start)


def test_index_start_and_stop_that_change():
    """``seq.index(v, start, stop)`` where start/stop changed between calls (dynamic ints): the
    positions are pinned as any int the trace reads (a break, EB0039, since the item-by-item
    comparison handled the value only; conformance test_list_index)."""
    from ember_test_helpers import assert_same, reset
    reset()
    compiled = compile(index_between, fullgraph=True)
    for start, stop in [(0, 4), (2, 4), (0, 3), (1, 3)]:
        x = torch.zeros(1)
        assert_same(compiled(x, start, stop), index_between(x, start, stop))
