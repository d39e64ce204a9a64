"""Real → fake tensor conversion, one fake mode per traced frame.

The fake mode owns the ShapeEnv when the trace has dynamic dimensions (see
``ember.fake.symbolic``); otherwise every size is a constant, guarded by the
tensor guards. Conversion is memoized by the real tensor, so the
same tensor reached from two sources becomes the same fake tensor, and views
of one storage share a fake storage (the converter's own memo does that).
"""
from __future__ import annotations

import contextlib
import weakref

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ember.compat import fake_from_real


#: autograd's refusal to read the metadata of a view whose base changed in place since, when the view
#: was made under no_grad, by a custom Function (or returned as-is by one), or as one of several views
#: (unbind, split, chunk): torch raises it on any read of its grad_fn / is_leaf
VIEW_REBASED = "its base or another view of its base has been modified inplace"


def autograd_refuses_metadata(t: torch.Tensor) -> bool:
    """Whether autograd refuses to describe ``t`` (see `VIEW_REBASED`): no fake tensor can be made."""
    if not t._is_view():
        return False
    try:
        t.is_leaf  # noqa: B018
    except RuntimeError as e:
        return VIEW_REBASED in str(e)
    return False


class FakeContext:
    def __init__(self, static_shapes: bool = True) -> None:
        # (whether it is symbolic is `shape_env is not None`) A ShapeEnv is only needed for symbolic sizes; creating one imports Dynamo's package
        # (about a second), so static tracing goes without.
        if static_shapes:
            self.shape_env = None
        else:
            from ember.fake.symbolic import new_shape_env
            self.shape_env = new_shape_env()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=False)
        self._memo: dict[int, tuple[weakref.ref, FakeTensor]] = {}
        self.contexts: dict[int, object] = {}  # id(symbolic fake) -> its symbolic context

    def fake(self, real: torch.Tensor) -> FakeTensor:
        """The fake twin of ``real`` (the same object every time)."""
        hit = self._memo.get(id(real))
        if hit is not None and hit[0]() is real:
            return hit[1]
        fake = fake_from_real(self.mode, real, static_shapes=True)
        self._memo[id(real)] = (weakref.ref(real), fake)
        return fake

    def symbolic(self, real: torch.Tensor, expr: str, dims: frozenset, constraints=None,
                 unbacked: frozenset = frozenset(), strides: frozenset = frozenset()) -> FakeTensor:
        """The fake twin of a graph input whose dimensions ``dims`` are symbols (``expr`` names the
        input in the guard function; ``unbacked`` ones of them unbacked symbols; ``strides``: the
        dimensions whose stride is a symbol of its own)."""
        from ember.fake.symbolic import symbolic_fake
        hit = self._memo.get(id(real))
        if hit is not None and hit[0]() is real:
            return hit[1]
        fake, context = symbolic_fake(self.mode, real, expr, dims, constraints, unbacked, strides)
        self._memo[id(real)] = (weakref.ref(real), fake)
        self.contexts[id(fake)] = context
        return fake

    @contextlib.contextmanager
    def enabled(self):
        """Fake mode on; with symbolic sizes also the Python dispatcher, whose meta kernels and
        decompositions take symbolic sizes where some C++ kernels want concrete ones (F.pad)."""
        if self.shape_env is None:
            with self.mode, saved_tensors_hooks_off():
                yield
            return
        from torch._dispatch.python import enable_python_dispatcher
        with self.mode, enable_python_dispatcher(), saved_tensors_hooks_off():
            yield


@contextlib.contextmanager
def saved_tensors_hooks_off():
    """The program's saved-tensor hooks (``torch.autograd.graph.saved_tensors_hooks``) stay out of
    tracing: ops on fake tensors that save them for backward must not call the program's pack (or
    unpack) hooks, which run when the compiled graph saves its tensors."""
    prior = torch._C._autograd._saved_tensors_hooks_set_tracing(True)
    try:
        yield
    finally:
        torch._C._autograd._saved_tensors_hooks_set_tracing(prior)


def is_fake(t) -> bool:
    return isinstance(t, FakeTensor)
