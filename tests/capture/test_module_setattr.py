"""``module.name = value`` in the frame goes through what ``nn.Module.__setattr__`` would run: a
property's setter on the class (whose later reads go through the getter), a module class's own
``__setattr__`` (once: the replay after the graph must not run it again); ``object.__setattr__``
bypasses both; writes through ``module.__dict__`` are what later reads see. Compared with eager:
outputs, the module's state, and no whole-frame fallbacks."""
import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import assert_same


class ClampedTemp(nn.Module):
    def __init__(self):
        super().__init__()
        self._t = 1.0

    @property
    def temp(self):
        return self._t

    @temp.setter
    def temp(self, v):
        self._t = max(0.1, float(v))

    def forward(self, x):
        self.temp = self.temp * 0.5
        return x / self.temp


class TensorProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("_scale", torch.ones(2))

    @property
    def scale(self):
        return self._scale * 2

    @scale.setter
    def scale(self, v):
        self._scale = v.clamp(max=3.0)

    def forward(self, x):
        self.scale = x
        return self.scale + 1


class OwnSetattr(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = 1

    def __setattr__(self, name, value):
        if name == "k":
            value = value * 10
        super().__setattr__(name, value)

    def forward(self, x):
        self.k = self.k + 2
        return x * self.k


class OwnSetattrDirect(OwnSetattr):
    def __setattr__(self, name, value):
        if name == "k":
            value = value - 1
        nn.Module.__setattr__(self, name, value)


class OwnSetattrBuffer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(2))
        self.writes = 0

    def __setattr__(self, name, value):
        if name == "state":
            object.__setattr__(self, "writes", self.__dict__.get("writes", 0) + 1)
        super().__setattr__(name, value)

    def forward(self, x):
        self.state = self.state + x
        return self.state * 2


class ObjectSetattrBypass(nn.Module):
    def __init__(self):
        super().__init__()
        self.v = 1

    def __setattr__(self, name, value):
        super().__setattr__(name, value + 100 if name == "v" else value)

    def forward(self, x):
        object.__setattr__(self, "v", self.v + 1)  # past both __setattr__s
        return x * self.v


class DictWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 0

    def forward(self, x):
        self.__dict__["n"] = self.n + 1
        vars(self)["n"] += 1
        return x * self.n


def _state(m):
    return {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in vars(m).items()
            if not k.startswith("_") or k in ("_t",)}, {k: v.clone() for k, v in m.state_dict().items()}


@pytest.mark.parametrize("cls", [ClampedTemp, TensorProperty, OwnSetattr, OwnSetattrDirect, OwnSetattrBuffer,
                                 ObjectSetattrBypass, DictWrite])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_module_setattr_matches_eager(cls, backend):
    ref, mod = cls(), cls()
    compiled = ember.compile(mod, backend=backend)
    for i in range(5):
        x = torch.full((2,), float(i + 1))
        assert_same(compiled(x), ref(x))
        assert_same(_state(mod), _state(ref))
    assert ember.stats()["fallbacks"] == 0
