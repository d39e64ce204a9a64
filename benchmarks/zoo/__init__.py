"""The benchmark model zoo: ``get_model(name) -> ModelSpec``.

    from benchmarks.zoo import get_model, list_models
    spec = get_model("nanogpt")
    model = spec.make_model()
    inputs = spec.make_inputs(4)
    loss = spec.train_step(model, inputs)      # zero_grad, forward, loss, backward
    out = spec.infer_step(model, inputs)       # no_grad forward, labels dropped

Models are built from small configs with fixed seeds and random weights;
HuggingFace models need ``transformers`` (imported only when built).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

from benchmarks.zoo import hf
from benchmarks.zoo.spec import ModelSpec


class TinyMLP(nn.Module):
    def __init__(self, d_in: int = 32, hidden: int = 64, n_classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def mlp() -> ModelSpec:
    def make_model():
        torch.manual_seed(0)
        return TinyMLP()

    def make_inputs(b):
        g = torch.Generator().manual_seed(1)
        return {"x": torch.randn(b, 32, generator=g),
                "y": torch.randint(0, 10, (b,), generator=g)}

    return ModelSpec(
        "mlp", make_model, make_inputs,
        loss=lambda out, inputs: F.cross_entropy(out, inputs["y"]),
        forward=lambda model, inputs: model(inputs["x"]),
        label_keys=("y",), description="3-layer MLP 32-64-64-10, ReLU, cross-entropy")


def _nanogpt(sdpa: bool) -> ModelSpec:
    from benchmarks.zoo import nanogpt

    cfg = nanogpt.GPTConfig(sdpa=sdpa)

    def make_inputs(b):
        idx, targets = nanogpt.make_batch(cfg, batch_size=b)
        return {"idx": idx, "targets": targets}

    return ModelSpec(
        "nanogpt_sdpa" if sdpa else "nanogpt",
        make_model=lambda: nanogpt.make_model(cfg),
        make_inputs=make_inputs,
        loss=lambda out, inputs: out[1],
        label_keys=("targets",),
        description="nanoGPT 2 layers, 64 dim, 4 heads, vocab 256, block 64, tied head, "
                    + ("F.scaled_dot_product_attention" if sdpa else "explicit matmul+mask+softmax"))


_REGISTRY: dict[str, Callable[[], ModelSpec]] = {
    "mlp": mlp,
    "nanogpt": lambda: _nanogpt(sdpa=False),
    "nanogpt_sdpa": lambda: _nanogpt(sdpa=True),
    "gpt2": hf.gpt2,
    "bert": hf.bert,
    "llama": hf.llama,
    "t5": hf.t5,
    "resnet": hf.resnet,
}


def list_models() -> list[str]:
    return list(_REGISTRY)


def get_model(name: str) -> ModelSpec:
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise ValueError(f"unknown zoo model {name!r}; known: {list_models()}") from None


__all__ = ["ModelSpec", "get_model", "list_models", "TinyMLP"]
