"""Automatic dynamic shapes on HuggingFace decoders (issue 10's checks): sequence lengths and batch
sizes that change reuse one symbolic graph after the first recompile, for the forward, a train step
and a decode loop whose KV cache grows by one token per step. Tiny configs, random weights; every
step is compared with eager.
"""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")

from ember_test_helpers import CompileCounter, REFERENCE, assert_same, compile, stats  # noqa: E402

pytestmark = pytest.mark.skipif(REFERENCE, reason="counts ember's compiles")


def make(name: str):
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=128,
                                      bos_token_id=0, eos_token_id=0, attn_implementation="sdpa")
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                       num_key_value_heads=1, intermediate_size=64, vocab_size=128,
                                       max_position_embeddings=128, attn_implementation="sdpa")
        model = transformers.LlamaForCausalLM(cfg)
    model.loss_type = "ForCausalLM"
    return model


def ids(batch: int, seq: int, seed: int = 0):
    return torch.randint(0, 128, (batch, seq), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("name", [pytest.param("gpt2", marks=pytest.mark.slow), "llama"])
def test_sequence_length_forward(name):
    model = make(name).eval()
    counter = CompileCounter()
    compiled = compile(model, backend=counter)
    with torch.no_grad():
        for seq in (5, 6, 9, 13, 7):
            x = ids(2, seq, seq)
            assert_same(compiled(input_ids=x).logits, model(input_ids=x).logits)
    assert counter.frame_count == 2  # static, then the sequence length symbolic


@pytest.mark.parametrize("name", ["gpt2", pytest.param("llama", marks=pytest.mark.slow)])
def test_train_step_batch_and_sequence(name):
    model = make(name).train()
    mine = copy.deepcopy(model)
    compiled = compile(mine, backend="aot_eager")
    for batch, seq in ((2, 8), (3, 8), (4, 8), (4, 11), (2, 5)):
        x = ids(batch, seq, batch * seq)
        model.zero_grad()
        mine.zero_grad()
        torch.manual_seed(batch * seq)  # (the same dropout masks)
        expected = model(input_ids=x, labels=x).loss
        expected.backward()
        torch.manual_seed(batch * seq)
        actual = compiled(input_ids=x, labels=x).loss
        actual.backward()
        assert_same(actual, expected)
        for (n, p), q in zip(model.named_parameters(), mine.parameters()):
            assert_same(q.grad, p.grad, path=n)
    assert stats()["graphs"] <= 3  # static, symbolic batch, symbolic sequence


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_decode_loop_with_a_growing_kv_cache(name):
    model = make(name).eval()
    counter = CompileCounter()
    compiled = compile(model, backend=counter)

    def decode(fn, steps=32):
        out = fn(input_ids=ids(1, 4), use_cache=True)
        past, tokens = out.past_key_values, []
        for _ in range(steps):
            nxt = out.logits[:, -1:].argmax(-1)
            tokens.append(nxt)
            out = fn(input_ids=nxt, past_key_values=past, use_cache=True)
            past = out.past_key_values
        return torch.cat(tokens, 1), out.logits

    with torch.no_grad():
        expected = decode(model)
        actual = decode(compiled)
    assert_same(actual, expected)
    # the prompt, the first decode step (static), then one graph for every cache length
    assert counter.frame_count <= 3
