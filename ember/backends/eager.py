"""The ``eager`` backend: run the captured graph as is."""
from __future__ import annotations

import torch

from ember.backends.registry import register_backend


@register_backend("eager")
def eager(gm: torch.fx.GraphModule, example_inputs: list, **_ignored):
    return gm.forward
