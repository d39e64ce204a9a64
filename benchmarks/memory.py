"""Activation memory of a train step: ember min-cut vs ember default partitioner vs torch.

    .venv/bin/python benchmarks/memory.py [--models gpt2,llama,nanogpt] [--batch 4]

Every variant is compiled with torch.compile's frontend (Dynamo), so the
graphs handed to the AOT layer are identical and only the AOT layer differs:

* ``ember default``  — ``ember.lookup_backend("aot_eager")``, ``aot_eager_partitioner="default"``
* ``ember min_cut``  — the same with ``aot_eager_partitioner="min_cut"``
* ``torch aot_eager`` — torch's own ``aot_eager`` backend (default partitioner)
* ``torch min_cut``  — torch's ``aot_eager_decomp_partition`` (its min-cut partitioner), for reference
* ``eager``          — no compilation, for reference

Method (CPU, so no CUDA allocator statistics): one warm-up step compiles;
then one train step (forward, loss, backward) runs under
``torch.autograd.graph.saved_tensors_hooks``. Every tensor saved for the
backward passes through the pack hook; we count the tensors and sum the bytes
of the distinct storages they keep alive, excluding the model's parameters
(alive anyway). That sum is the activation memory held between forward and
backward — what the partitioner decides. Ratios are against ``torch aot_eager``.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

import ember  # noqa: E402
from benchmarks.zoo import get_model  # noqa: E402


def measure_step(spec, model, inputs) -> tuple[int, int]:
    """(activation bytes, saved tensor count) of one train step."""
    param_storages = {p.untyped_storage()._cdata for p in model.parameters()}
    storages: dict[int, int] = {}
    count = [0]

    def pack(t):
        count[0] += 1
        s = t.untyped_storage()
        if s._cdata not in param_storages:
            storages[s._cdata] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.zero_grad(set_to_none=True)
        spec.fwd_bwd(model, inputs)
    return sum(storages.values()), count[0]


def variants():
    import torch._dynamo
    ember_backend = ember.lookup_backend("aot_eager")

    def ember_with(partitioner):
        def make(model):
            def backend(gm, example_inputs):
                with ember.config.patch(aot_eager_partitioner=partitioner):
                    return ember_backend(gm, example_inputs)
            return torch.compile(model, backend=backend)
        return make
    return {
        "eager": lambda m: m,
        "torch aot_eager": lambda m: torch.compile(m, backend="aot_eager"),
        "torch min_cut": lambda m: torch.compile(m, backend="aot_eager_decomp_partition"),
        "ember default": ember_with("default"),
        "ember min_cut": ember_with("min_cut"),
    }


def run(models: list[str], batch: int) -> list[dict]:
    import torch._dynamo
    rows = []
    for name in models:
        spec = get_model(name)
        results = {}
        for label, wrap in variants().items():
            torch._dynamo.reset()
            model = spec.make_model()
            model.train()
            compiled = wrap(model)
            torch.manual_seed(0)
            inputs = spec.make_inputs(batch)

            model_for_step = compiled
            model_for_step.parameters = model.parameters  # hooks exclude the real parameters
            model_for_step.zero_grad = model.zero_grad
            spec.fwd_bwd(model_for_step, inputs)  # warm-up: compile
            results[label] = measure_step(spec, model_for_step, inputs)
        base_bytes, base_count = results["torch aot_eager"]
        for label, (nbytes, count) in results.items():
            rows.append({"model": name, "variant": label, "activation_MB": nbytes / 2**20,
                         "ratio_vs_torch_aot_eager": nbytes / base_bytes if base_bytes else float("nan"),
                         "saved_tensors": count, "saved_vs_torch": count - base_count})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="gpt2,llama,nanogpt")
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args(argv)
    rows = run(args.models.split(","), args.batch)
    print(f"{'model':10} {'variant':16} {'activations MB':>14} {'vs torch':>9} {'saved':>6} {'Δsaved':>7}")
    for r in rows:
        print(f"{r['model']:10} {r['variant']:16} {r['activation_MB']:14.3f} {r['ratio_vs_torch_aot_eager']:8.3f}x "
              f"{r['saved_tensors']:6d} {r['saved_vs_torch']:+7d}")


if __name__ == "__main__":
    main()
