"""HuggingFace models from tiny configs with random weights (no downloads).

Every config has dropout off so that eager and compiled runs are comparable.
``transformers`` is imported lazily, so the rest of the zoo works without it.
"""
from __future__ import annotations

import torch

from benchmarks.zoo.spec import ModelSpec

SEQ = 32
VOCAB = 256


def _ids(batch_size: int, seq: int = SEQ, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, VOCAB, (batch_size, seq), generator=g)


def _hf_loss(out, inputs):
    return out.loss


def _build(cls, config, attn: str | None):
    torch.manual_seed(0)
    if attn is not None:
        config._attn_implementation = attn
    model = cls(config)
    return model


def gpt2() -> ModelSpec:
    def make_model():
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
                         bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
        model = _build(GPT2LMHeadModel, cfg, "eager")
        model.loss_type = "ForCausalLM"  # else a warning from inside forward
        return model

    def make_inputs(b):
        ids = _ids(b)
        return {"input_ids": ids, "labels": ids}

    return ModelSpec("gpt2", make_model, make_inputs, _hf_loss, label_keys=("labels",),
                     description="HF GPT2LMHeadModel, 2 layers, 64 dim, eager attention, seq 32")


def bert() -> ModelSpec:
    def make_model():
        from transformers import BertConfig, BertForMaskedLM
        cfg = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=128,
                         max_position_embeddings=128, hidden_dropout_prob=0.0,
                         attention_probs_dropout_prob=0.0)
        return _build(BertForMaskedLM, cfg, "eager")

    def make_inputs(b):
        ids = _ids(b)
        mask = torch.ones_like(ids)
        mask[:, -4:] = 0  # some padding so the attention mask matters
        labels = torch.full_like(ids, -100)
        labels[:, ::5] = ids[:, ::5]
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    return ModelSpec("bert", make_model, make_inputs, _hf_loss, label_keys=("labels",),
                     description="HF BertForMaskedLM, 2 layers, 64 dim, padded attention mask")


def llama() -> ModelSpec:
    def make_model():
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128,
                          num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                          max_position_embeddings=128, use_cache=False)
        return _build(LlamaForCausalLM, cfg, "sdpa")

    def make_inputs(b):
        ids = _ids(b)
        return {"input_ids": ids, "labels": ids}

    return ModelSpec("llama", make_model, make_inputs, _hf_loss, label_keys=("labels",),
                     description="HF LlamaForCausalLM, 2 layers, 64 dim, GQA 4/2 heads, sdpa, RoPE")


def t5() -> ModelSpec:
    def make_model():
        from transformers import T5Config, T5ForConditionalGeneration
        cfg = T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2,
                       num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                       decoder_start_token_id=0, pad_token_id=0, use_cache=False)
        return _build(T5ForConditionalGeneration, cfg, "eager")

    def make_inputs(b):
        ids = _ids(b)
        labels = _ids(b, seq=16, seed=2)
        return {"input_ids": ids, "labels": labels}

    def forward(model, inputs):
        if "labels" in inputs:
            return model(**inputs)
        # inference: one teacher-forced decoder pass from the start token
        dec = torch.zeros(inputs["input_ids"].shape[0], 16, dtype=torch.long)
        return model(input_ids=inputs["input_ids"], decoder_input_ids=dec)

    return ModelSpec("t5", make_model, make_inputs, _hf_loss, forward=forward,
                     label_keys=("labels",),
                     description="HF T5ForConditionalGeneration, 2+2 layers, 64 dim, rel. pos. bias")


def resnet() -> ModelSpec:
    def make_model():
        from transformers import ResNetConfig, ResNetModel
        cfg = ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 64],
                           depths=[1, 1, 1], layer_type="basic", hidden_act="relu")
        return _build(ResNetModel, cfg, None)

    def make_inputs(b):
        g = torch.Generator().manual_seed(1)
        return {"pixel_values": torch.randn(b, 3, 32, 32, generator=g)}

    def loss(out, inputs):
        return out.pooler_output.pow(2).mean()

    return ModelSpec("resnet", make_model, make_inputs, loss,
                     description="HF ResNetModel, basic blocks [1,1,1], 16-64 channels, "
                                 "32x32 images, BatchNorm in train mode")
