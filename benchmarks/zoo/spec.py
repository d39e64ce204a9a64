"""``ModelSpec``: how to build, feed and step one zoo model."""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch


@dataclasses.dataclass
class ModelSpec:
    """One zoo model.

    ``make_model()`` builds it with fixed-seed random weights; ``make_inputs(b)``
    returns keyword inputs for batch size ``b`` (labels included);
    ``forward(model, inputs)`` calls the model; ``loss(outputs, inputs)`` picks
    or computes the scalar loss. ``label_keys`` are dropped for inference.
    """
    name: str
    make_model: Callable[[], torch.nn.Module]
    make_inputs: Callable[[int], dict[str, Any]]
    loss: Callable[[Any, dict[str, Any]], torch.Tensor]
    forward: Callable[[Any, dict[str, Any]], Any] = lambda model, inputs: model(**inputs)
    label_keys: tuple[str, ...] = ()
    batch_size: int = 4
    description: str = ""
    # max |compiled - eager| allowed, for the eager/aot_eager and for inductor
    atol: float = 1e-4
    rtol: float = 1e-3

    def infer_inputs(self, inputs: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in inputs.items() if k not in self.label_keys}

    def fwd_bwd(self, model, inputs: dict[str, Any]):
        """Forward, loss, backward (no zero_grad): returns (loss.detach(), outputs)."""
        out = self.forward(model, inputs)
        loss = self.loss(out, inputs)
        loss.backward()
        return loss.detach(), out

    def train_step(self, model, inputs: dict[str, Any]) -> torch.Tensor:
        """zero_grad, forward, loss, backward; returns the detached loss."""
        model.zero_grad(set_to_none=True)
        loss, _ = self.fwd_bwd(model, inputs)
        return loss

    def infer_step(self, model, inputs: dict[str, Any]):
        with torch.no_grad():
            return self.forward(model, self.infer_inputs(inputs))
