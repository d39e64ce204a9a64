"""Small HuggingFace models (random weights, no downloads) for AOT tests and benchmarks."""
from __future__ import annotations

import torch


def make_model(name: str) -> torch.nn.Module:
    import transformers as tf
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = tf.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = tf.GPT2LMHeadModel(cfg)
    elif name == "bert":
        cfg = tf.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                            vocab_size=128, max_position_embeddings=64, hidden_dropout_prob=0.0,
                            attention_probs_dropout_prob=0.0)
        model = tf.BertForMaskedLM(cfg)
    elif name == "llama":
        cfg = tf.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                             intermediate_size=128, vocab_size=128, max_position_embeddings=64)
        model = tf.LlamaForCausalLM(cfg)
    else:
        raise ValueError(name)
    model.config.use_cache = False
    return model.train()


def make_batch(batch: int = 2, seq: int = 16, vocab: int = 128):
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g)
    return ids, ids.clone()


def train_step(model, ids, labels):
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    return out.loss.detach()
