"""What a subclass's own ``__torch_function__`` answers for Python's protocols and for an op's
results is decided at run time (capture: ``check_certain`` in variables/subclass_metadata.py):

- ``len(t)`` goes through ``Tensor.__len__``'s override (it was the fake tensor's length);
- iterating (``a, b = t``, ``for row in t``) goes through the override's ``unbind`` (the trace
  indexed the fake instead);
- the metadata of an op's result (``t[0].shape``) and the number of tensors an op returns
  (``len(t.split(1))``) are the override's (they were the fake tensors')."""
import torch

from ember_test_helpers import check_same


def _overriding(name, answer):
    target = getattr(torch.Tensor, name)

    class Overrides(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            if func is target:
                return answer()
            return super().__torch_function__(func, types, args, kwargs or {})
    return Overrides


class PassThrough(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return super().__torch_function__(func, types, args, kwargs or {})


def test_len_through_the_override():
    cls = _overriding("__len__", lambda: 1000)
    check_same(lambda x: (len(x), x + 1), torch.randn(3).as_subclass(cls), fullgraph=False, graphs=None)
    check_same(lambda x: (len(x), x + 1), torch.randn(3).as_subclass(PassThrough))


def test_iteration_through_the_override():
    cls = _overriding("unbind", lambda: (torch.zeros(2), torch.ones(2)))

    def f(x):
        a, b = x
        return a + b, [t.sum() for t in x]
    check_same(f, torch.randn(2, 2).as_subclass(cls), fullgraph=False, graphs=None)


def test_metadata_of_an_overridden_result():
    cls = _overriding("__getitem__", lambda: torch.ones(2))

    def f(x):
        y = x[0]
        return y.shape, y.dim(), y + 1
    check_same(f, torch.randn(3, 5).as_subclass(cls), fullgraph=False, graphs=None)


def test_number_of_results_of_an_overridden_op():
    cls = _overriding("split", lambda: [torch.zeros(1)] * 5)

    def f(x):
        parts = x.split(1)
        return len(parts), [p + 1 for p in parts]
    check_same(f, torch.randn(3).as_subclass(cls), fullgraph=False, graphs=None)


class NoOverride(torch.Tensor):
    pass


def test_results_of_a_pass_through_override():
    # (whatever the override returns is decided at run time: its results' metadata is read there)
    def f(x):
        y = x[0]
        return y.shape, len(x), y + 1, type(y).__name__
    check_same(f, torch.randn(3, 5).as_subclass(PassThrough), fullgraph=False, graphs=None)
    check_same(f, torch.randn(3, 5).as_subclass(NoOverride), graphs=1)  # (torch's default: certain)
