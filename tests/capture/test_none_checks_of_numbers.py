"""``n is None`` / ``n is not None`` (and ``n == None``, ``callable(n)``, ``hasattr(n, "shape")``,
``getattr(n, "shape", None)``) of an int argument (``if bsz is not None:``, XLNet's positional
embedding): the int's type answers (it is guarded anyway), not its value. Pinning the value made
every new batch size recompile once the size was dynamic (HF XLNet under changing batch sizes:
a third graph where torch.compile has two). Outputs equal eager's; graphs as torch.compile's (fewer where only `is None` reads the int)."""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile


def expand_to(x, bsz=None):
    y = x * 2
    if bsz is not None:
        y = y[:, None].expand(-1, bsz)
    return y


def offset(x, n):
    return x + (0 if n is None else n)


def flag_only(x, n=None):
    return x * 2 if n is None else x * 3


def jump_if_none(x, n):
    out = x.clone()
    if n is None:
        return out
    return out * 4


CASES = {
    # static 2, dynamic from 3 on, None once: 3 graphs (the value of n never guarded)
    expand_to: ([2, 3, 4, None, 5, 6], 3),
    offset: ([2, 3, 4, None, 6], 3),
    # n read only by `is None`: one graph for any int, one for None
    flag_only: ([2, 3, 4, None, 7], 2),
    jump_if_none: ([1, 5, None, 8], 2),
}


@pytest.mark.parametrize("fn", list(CASES), ids=lambda f: f.__name__)
def test_is_none_of_an_int_does_not_pin_its_value(fn):
    values, graphs = CASES[fn]
    if REFERENCE and fn in (flag_only, jump_if_none):
        pytest.skip("torch.compile pins an int read only by `is None` (more graphs); ember compiles one per kind")
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for n in values:
        x = torch.arange(3.0)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    assert counter.frame_count == graphs, (REFERENCE, counter.frame_count)


TYPE_ONLY = {
    "eq_none": lambda x, n: x * 2 if n == None else x * 3,  # noqa: E711
    "ne_none": lambda x, n: x * 2 if n != None else x * 3,  # noqa: E711
    "callable": lambda x, n: x * 2 if callable(n) else x * 3,
    "hasattr": lambda x, n: x * 2 if hasattr(n, "shape") else x * 3,
    "getattr_default": lambda x, n: x * 2 if getattr(n, "shape", None) is None else x * 3,
    "float_hasattr": lambda x, n: x * 2 if hasattr(n, "real") else x * 3,
}


@pytest.mark.parametrize("name", sorted(TYPE_ONLY))
def test_type_questions_of_an_int_do_not_pin_its_value(name):
    fn = TYPE_ONLY[name]
    counter = CompileCounter()
    compiled = compile(fn, backend=counter)
    for n in [6, 7, 8, 9, 10, 2.5, 3.5]:
        x = torch.arange(3.0)
        torch.testing.assert_close(compiled(x, n), fn(x, n))
    if REFERENCE:
        return  # (torch.compile pins the int: a graph per value until automatic dynamic, then one more)
    assert counter.frame_count == 2, counter.frame_count  # one for any int, one for any float


def test_missing_attribute_of_an_int_raises_as_eager():
    def fn(x, n):
        return x + n.shape[0]
    compiled = compile(fn, backend=CompileCounter())
    with pytest.raises(AttributeError, match="'int' object has no attribute 'shape'"):
        compiled(torch.ones(2), 3)
