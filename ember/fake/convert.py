"""Real → fake tensor conversion, one fake mode per traced frame.

The fake mode owns the ShapeEnv (static shapes for now: every size is a
constant and is guarded). Conversion is memoized by the real tensor, so the
same tensor reached from two sources becomes the same fake tensor, and views
of one storage share a fake storage (the converter's own memo does that).
"""
from __future__ import annotations

import contextlib
import weakref

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode


class FakeContext:
    def __init__(self, static_shapes: bool = True) -> None:
        self.static_shapes = static_shapes
        # A ShapeEnv is only needed for symbolic sizes; creating one imports Dynamo's package
        # (about a second), so static tracing goes without.
        if static_shapes:
            self.shape_env = None
        else:
            from torch.fx.experimental.symbolic_shapes import ShapeEnv
            self.shape_env = ShapeEnv()
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=False)
        self._memo: dict[int, tuple[weakref.ref, FakeTensor]] = {}

    def fake(self, real: torch.Tensor) -> FakeTensor:
        """The fake twin of ``real`` (the same object every time)."""
        hit = self._memo.get(id(real))
        if hit is not None and hit[0]() is real:
            return hit[1]
        fake = self.mode.from_tensor(real, static_shapes=self.static_shapes)
        self._memo[id(real)] = (weakref.ref(real), fake)
        return fake

    @contextlib.contextmanager
    def enabled(self):
        with self.mode:
            yield


def is_fake(t) -> bool:
    return isinstance(t, FakeTensor)
