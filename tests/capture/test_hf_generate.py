"""HuggingFace ``generate()`` with ``model.forward = compile(model.forward)`` (tiny random models).

The most common way users compile a HuggingFace model for inference: greedy decoding calls the
compiled forward once for the prompt (prefill) and once per new token with a KV cache that grows
by one (DynamicCache) or is preallocated (``cache_implementation="static"``). The generated tokens
must equal eager's exactly and the scores agree; the forward is captured whole (fullgraph) and
compiles exactly as many graphs, with as many recompiles, as torch.compile on the same calls (the
cache length becomes dynamic after its first change, the prompt length after the second
generate()). ``benchmarks/hf_generate.py`` runs the same on more architectures.
"""
from __future__ import annotations

import copy
import logging

import pytest
import torch

transformers = pytest.importorskip("transformers")

from ember_test_helpers import CompileCounter, compile, reset, stats  # noqa: E402


def _gpt2():
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64,
                                  bos_token_id=1, eos_token_id=2)
    return transformers.GPT2LMHeadModel(cfg)


def _llama():
    cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=1, intermediate_size=64, vocab_size=128,
                                   max_position_embeddings=64, bos_token_id=1, eos_token_id=2)
    return transformers.LlamaForCausalLM(cfg)


def _prompt(s, pad):
    g = torch.Generator().manual_seed(s)
    ids = torch.randint(3, 128, (2, s), generator=g)
    out = {"input_ids": ids}
    if pad:  # left padding of the second prompt
        mask = torch.ones(2, s, dtype=torch.long)
        mask[1, :2] = 0
        ids[1, :2] = 0
        out["attention_mask"] = mask
    return out


def _generate(model, prompt, static):
    kw = dict(max_new_tokens=8, min_new_tokens=8, do_sample=False, pad_token_id=0, output_scores=True,
              return_dict_in_generate=True, disable_compile=True)
    if static:
        kw["cache_implementation"] = "static"
    with torch.no_grad():
        return model.generate(**prompt, **kw)


class _Recompiles(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.n = 0

    def emit(self, record):
        self.n += "Recompiling function" in record.getMessage()


def _torch_counts(model, prompts, static):
    """torch.compile's graphs and recompiles after each generate() call."""
    import torch._dynamo
    import torch._logging
    torch._dynamo.reset()
    graphs = [0]

    def counting(gm, example_inputs):
        graphs[0] += 1
        return gm.forward
    rec = _Recompiles()
    torch._logging.set_logs(recompiles=True)
    logging.getLogger("torch._dynamo").addHandler(rec)
    try:
        m = copy.deepcopy(model)
        m.forward = torch.compile(m.forward, backend=counting)
        out = []
        for p in prompts:
            _generate(m, p, static)
            out.append((graphs[0], rec.n))
        return out
    finally:
        logging.getLogger("torch._dynamo").removeHandler(rec)
        torch._logging.set_logs()
        torch._dynamo.reset()


@pytest.mark.slow
@pytest.mark.parametrize("make,pad,static", [
    (_gpt2, True, False), (_gpt2, False, True), (_llama, True, True), (_llama, False, False)],
    ids=["gpt2-pad-dynamic_cache", "gpt2-nomask-static_cache", "llama-pad-static_cache",
         "llama-nomask-dynamic_cache"])
def test_generate_with_compiled_forward_matches_eager(make, pad, static):
    torch.manual_seed(0)
    model = make().eval()
    prompts = [_prompt(6, pad), _prompt(9, pad)]
    expected = [_generate(copy.deepcopy(model), p, static) for p in prompts]

    reset()
    cnt = CompileCounter()
    m = copy.deepcopy(model)
    m.forward = compile(m.forward, backend=cnt, fullgraph=True)
    counts = []
    for p, want in zip(prompts, expected):
        got = _generate(m, p, static)
        assert torch.equal(got.sequences, want.sequences)
        assert len(got.scores) == len(want.scores) == 8
        for a, b in zip(got.scores, want.scores):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
        counts.append((cnt.frame_count, stats()["recompiles"]))
    assert stats()["fallbacks"] == 0
    if pad:  # the mask matters: attending to the pads gives other scores
        ids = prompts[0]["input_ids"]
        unmasked = _generate(copy.deepcopy(model), {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
                             static)
        assert not torch.equal(unmasked.scores[0][1], expected[0].scores[0][1])
    assert counts == _torch_counts(model, prompts, static)
