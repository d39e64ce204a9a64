"""Sweep of HuggingFace architectures: ember against eager (and optionally torch.compile).

    python -m benchmarks.hf_sweep                        # all architectures, backend eager
    python -m benchmarks.hf_sweep --backend aot_eager --only bert,t5
    python -m benchmarks.hf_sweep --torch                # also count torch.compile's graphs
    python -m benchmarks.hf_sweep --backend inductor --compiler torch --fresh-cache   # torch.compile's
                                                         # rows and cold compile times, to compare

Each architecture is built from a tiny config with random weights (no downloads) and run in
its own process: an inference forward (no_grad) and a train step (forward with labels where the
model takes them, loss, backward). ember's outputs, loss and gradients are compared with eager;
the row records graphs, graph breaks, recompiles and frames that fell back to eager. A row is
``ok`` when every value matches; ``WRONG`` when ember ran and answered differently (the worst
outcome); ``CRASH`` when ember raised where eager did not.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

# model_type -> (model class, extra config kwargs, input kind)
_SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
              vocab_size=128, max_position_embeddings=64)
_IMG = dict(image_size=32, patch_size=8, num_channels=3)
_GENERIC = tuple(_SMALL)  # for configs whose own fields clash with the generic names
_SIZES = tuple(k for k in _SMALL if k != "vocab_size")  # keep the small vocabulary
_S2S = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
            encoder_ffn_dim=64, decoder_ffn_dim=64)
ARCHS: dict[str, tuple[str, dict, str]] = {
    "bert": ("BertForSequenceClassification", {}, "text_cls"),
    "roberta": ("RobertaForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    "distilbert": ("DistilBertForSequenceClassification",
                   dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=128,
                        max_position_embeddings=64), "text_cls"),
    "albert": ("AlbertForSequenceClassification", {"embedding_size": 16}, "text_cls"),
    "electra": ("ElectraForSequenceClassification", {"embedding_size": 16}, "text_cls"),
    "deberta": ("DebertaForSequenceClassification", {}, "text_cls"),
    "deberta-v2": ("DebertaV2ForSequenceClassification", {}, "text_cls"),
    "mobilebert": ("MobileBertForSequenceClassification",
                   dict(embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
                        num_feedforward_networks=1), "text_cls"),
    "funnel": ("FunnelForSequenceClassification",
               dict(block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64,
                    _drop=("num_hidden_layers", "hidden_size", "num_attention_heads",
                           "intermediate_size", "max_position_embeddings")), "text_cls"),
    "xlnet": ("XLNetForSequenceClassification", dict(d_model=32, n_layer=2, n_head=2, d_inner=64,
                                                      _drop=("num_hidden_layers", "hidden_size",
                                                             "num_attention_heads", "intermediate_size",
                                                             "max_position_embeddings")), "text_cls"),
    "gpt2": ("GPT2LMHeadModel", dict(n_layer=2, n_embd=32, n_head=2, n_positions=64), "causal"),
    "gpt_neo": ("GPTNeoForCausalLM", dict(num_layers=2, attention_types=[[["global", "local"], 1]],
                                          window_size=8), "causal"),
    "gptj": ("GPTJForCausalLM", dict(n_layer=2, n_embd=32, n_head=2, n_positions=64, rotary_dim=8), "causal"),
    "opt": ("OPTForCausalLM", dict(ffn_dim=64, word_embed_proj_dim=32), "causal"),
    "bloom": ("BloomForCausalLM", dict(n_layer=2, n_head=2), "causal"),
    "llama": ("LlamaForCausalLM", dict(num_key_value_heads=1), "causal"),
    "mistral": ("MistralForCausalLM", dict(num_key_value_heads=1), "causal"),
    "mixtral": ("MixtralForCausalLM", dict(num_key_value_heads=1, num_local_experts=4,
                                           num_experts_per_tok=2), "causal"),
    "qwen2": ("Qwen2ForCausalLM", dict(num_key_value_heads=1), "causal"),
    "phi": ("PhiForCausalLM", {}, "causal"),
    "phi3": ("Phi3ForCausalLM", dict(num_key_value_heads=1, pad_token_id=0), "causal"),
    "gemma": ("GemmaForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "gemma2": ("Gemma2ForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "falcon": ("FalconForCausalLM", dict(new_decoder_architecture=False), "causal"),
    "gpt_neox": ("GPTNeoXForCausalLM", {}, "causal"),
    "codegen": ("CodeGenForCausalLM", dict(n_layer=2, n_embd=64, n_head=4, n_positions=64, rotary_dim=8,
                                                  _drop=("hidden_size", "num_attention_heads")),
                "causal"),
    "mamba": ("MambaForCausalLM", dict(state_size=4, expand=2, conv_kernel=4), "causal"),
    "t5": ("T5ForConditionalGeneration", dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
                                              decoder_start_token_id=0), "seq2seq"),
    "bart": ("BartForConditionalGeneration", dict(d_model=32, encoder_layers=2, decoder_layers=2,
                                                  encoder_attention_heads=2, decoder_attention_heads=2,
                                                  encoder_ffn_dim=64, decoder_ffn_dim=64), "seq2seq"),
    "marian": ("MarianMTModel", dict(d_model=32, encoder_layers=2, decoder_layers=2,
                                     encoder_attention_heads=2, decoder_attention_heads=2,
                                     encoder_ffn_dim=64, decoder_ffn_dim=64, pad_token_id=127,
                                     decoder_start_token_id=127), "seq2seq"),
    "mbart": ("MBartForConditionalGeneration", dict(d_model=32, encoder_layers=2, decoder_layers=2,
                                                    encoder_attention_heads=2, decoder_attention_heads=2,
                                                    encoder_ffn_dim=64, decoder_ffn_dim=64), "seq2seq"),
    "pegasus": ("PegasusForConditionalGeneration", dict(d_model=32, encoder_layers=2, decoder_layers=2,
                                                        encoder_attention_heads=2, decoder_attention_heads=2,
                                                        encoder_ffn_dim=64, decoder_ffn_dim=64), "seq2seq"),
    "whisper": ("WhisperForConditionalGeneration", dict(d_model=32, encoder_layers=2, decoder_layers=2,
                                                        encoder_attention_heads=2, decoder_attention_heads=2,
                                                        encoder_ffn_dim=64, decoder_ffn_dim=64,
                                                        num_mel_bins=8, max_source_positions=16,
                                                        max_target_positions=32, pad_token_id=0,
                                                        bos_token_id=1, eos_token_id=2,
                                                        decoder_start_token_id=1, suppress_tokens=[],
                                                        begin_suppress_tokens=[]), "audio_seq2seq"),
    "vit": ("ViTForImageClassification", dict(_IMG), "image"),
    "deit": ("DeiTForImageClassification", dict(_IMG), "image"),
    "beit": ("BeitForImageClassification", dict(_IMG), "image"),
    "swin": ("SwinForImageClassification", dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                                num_heads=[2, 2], window_size=4, _drop=_GENERIC), "image"),
    "convnext": ("ConvNextForImageClassification", dict(hidden_sizes=[8, 16], depths=[1, 1]), "image"),
    "resnet": ("ResNetForImageClassification", dict(hidden_sizes=[8, 16], depths=[1, 1],
                                                    embedding_size=8), "image"),
    "regnet": ("RegNetForImageClassification", dict(hidden_sizes=[8, 16], depths=[1, 1],
                                                    embedding_size=8, groups_width=8, _drop=_GENERIC), "image"),
    "mobilenet_v2": ("MobileNetV2ForImageClassification", dict(image_size=32, depth_multiplier=0.25), "image"),
    "segformer": ("SegformerForImageClassification", dict(num_encoder_blocks=2, depths=[1, 1],
                                                          sr_ratios=[2, 1], hidden_sizes=[8, 16],
                                                          num_attention_heads=[1, 2], patch_sizes=[7, 3],
                                                          strides=[4, 2], decoder_hidden_size=16), "image"),
    "clip": ("CLIPModel", {}, "clip"),
    "wav2vec2": ("Wav2Vec2ForSequenceClassification",
                 dict(conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3], num_conv_pos_embeddings=8,
                      num_conv_pos_embedding_groups=2), "audio_cls"),
    # added 2026-11-27: more of the model zoo users compile
    # encoders (text classification)
    "xlm-roberta": ("XLMRobertaForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    "camembert": ("CamembertForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    "data2vec-text": ("Data2VecTextForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    "megatron-bert": ("MegatronBertForSequenceClassification", {}, "text_cls"),
    "ernie": ("ErnieForSequenceClassification", {}, "text_cls"),
    "roformer": ("RoFormerForSequenceClassification", {"embedding_size": 32}, "text_cls"),
    "rembert": ("RemBertForSequenceClassification", dict(input_embedding_size=16, output_embedding_size=16),
                "text_cls"),
    "convbert": ("ConvBertForSequenceClassification", dict(embedding_size=32, head_ratio=2, conv_kernel_size=3),
                 "text_cls"),
    "mpnet": ("MPNetForSequenceClassification", {}, "text_cls"),
    "squeezebert": ("SqueezeBertForSequenceClassification", dict(embedding_size=32, q_groups=2, k_groups=2,
                                                                 v_groups=2, post_attention_groups=2,
                                                                 intermediate_groups=2, output_groups=2), "text_cls"),
    "ibert": ("IBertForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    # num_landmarks == seq_len: with fewer landmarks transformers' own code adds a (b, 1, s, s) mask to
    # (b, h, landmarks, s) scores whenever it is compiled (eager skips the all-ones mask): torch.compile
    # and ember both raise there
    "nystromformer": ("NystromformerForSequenceClassification", dict(num_landmarks=8, segment_means_seq_len=8,
                                                                     conv_kernel_size=3), "text_cls"),
    "yoso": ("YosoForSequenceClassification", dict(use_expectation=True, conv_window=None), "text_cls"),
    "fnet": ("FNetForSequenceClassification", dict(use_tpu_fourier_optimizations=False), "text_cls"),
    "layoutlm": ("LayoutLMForSequenceClassification", {}, "text_cls"),
    "canine": ("CanineForSequenceClassification", dict(downsampling_rate=2, num_hash_buckets=64,
                                                       local_transformer_stride=4, _drop=("vocab_size",)), "text_cls"),
    "longformer": ("LongformerForSequenceClassification", dict(attention_window=4, pad_token_id=1), "text_cls"),
    "big_bird": ("BigBirdForSequenceClassification", dict(attention_type="original_full"), "text_cls"),
    "esm": ("EsmForSequenceClassification", dict(pad_token_id=1, mask_token_id=3, position_embedding_type="rotary"),
            "text_cls"),
    "flaubert": ("FlaubertForSequenceClassification", dict(emb_dim=32, n_layers=2, n_heads=2, _drop=_SIZES),
                 "text_cls"),
    "xlm": ("XLMForSequenceClassification", dict(emb_dim=32, n_layers=2, n_heads=2, _drop=_SIZES), "text_cls"),
    # decoders
    "ctrl": ("CTRLLMHeadModel", dict(n_embd=32, n_layer=2, n_head=2, dff=64, n_positions=64, _drop=_SIZES),
             "causal"),
    "openai-gpt": ("OpenAIGPTLMHeadModel", dict(n_embd=32, n_layer=2, n_head=2, n_positions=64, _drop=_SIZES),
                   "causal"),
    "gpt_bigcode": ("GPTBigCodeForCausalLM", dict(n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                                  _drop=_SIZES), "causal"),
    "biogpt": ("BioGptForCausalLM", {}, "causal"),
    "xglm": ("XGLMForCausalLM", dict(d_model=32, num_layers=2, attention_heads=2, ffn_dim=64, _drop=_SIZES),
             "causal"),
    "starcoder2": ("Starcoder2ForCausalLM", dict(num_key_value_heads=1), "causal"),
    "olmo": ("OlmoForCausalLM", dict(num_key_value_heads=1), "causal"),
    "olmo2": ("Olmo2ForCausalLM", dict(num_key_value_heads=1), "causal"),
    "stablelm": ("StableLmForCausalLM", dict(num_key_value_heads=1), "causal"),
    "qwen3": ("Qwen3ForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "gemma3_text": ("Gemma3ForCausalLM", dict(num_key_value_heads=1, head_dim=16, sliding_window=4), "causal"),
    "granite": ("GraniteForCausalLM", dict(num_key_value_heads=1), "causal"),
    "persimmon": ("PersimmonForCausalLM", {}, "causal"),
    "mpt": ("MptForCausalLM", dict(d_model=32, n_heads=2, n_layers=2, max_seq_len=64, _drop=_SIZES), "causal"),
    "qwen2_moe": ("Qwen2MoeForCausalLM", dict(num_key_value_heads=1, num_experts=4, num_experts_per_tok=2,
                                              moe_intermediate_size=32, shared_expert_intermediate_size=32), "causal"),
    "qwen3_moe": ("Qwen3MoeForCausalLM", dict(num_key_value_heads=1, head_dim=16, num_experts=4,
                                              num_experts_per_tok=2, moe_intermediate_size=32), "causal"),
    # encoder-decoders
    "mt5": ("MT5ForConditionalGeneration", dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
                                                decoder_start_token_id=0), "seq2seq"),
    "blenderbot-small": ("BlenderbotSmallForConditionalGeneration", dict(_S2S), "seq2seq"),
    "m2m_100": ("M2M100ForConditionalGeneration", dict(_S2S), "seq2seq"),
    "led": ("LEDForConditionalGeneration", dict(_S2S, attention_window=4, max_encoder_position_embeddings=64,
                                                max_decoder_position_embeddings=64), "seq2seq"),
    # vision
    "dinov2": ("Dinov2ForImageClassification", dict(_IMG), "image"),
    "convnextv2": ("ConvNextV2ForImageClassification", dict(hidden_sizes=[8, 16], depths=[1, 1]), "image"),
    "swinv2": ("Swinv2ForImageClassification", dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                                    num_heads=[2, 2], window_size=4, _drop=_SIZES), "image"),
    "mobilevit": ("MobileViTForImageClassification", dict(image_size=32, patch_size=2, hidden_sizes=[16, 24, 32],
                                                          neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 48],
                                                          _drop=_SIZES), "image"),
    "levit": ("LevitForImageClassification", dict(image_size=32, patch_size=16, hidden_sizes=[16, 24, 32],
                                                  num_attention_heads=[1, 2, 2], depths=[1, 1, 1], key_dim=[8, 8, 8],
                                                  _drop=("num_hidden_layers", "hidden_size", "intermediate_size",
                                                         "max_position_embeddings")), "image"),
    "poolformer": ("PoolFormerForImageClassification", dict(hidden_sizes=[8, 16], depths=[1, 1], num_encoder_blocks=2,
                                                            patch_sizes=[7, 3], strides=[4, 2], padding=[2, 1],
                                                            _drop=_SIZES), "image"),
    "efficientnet": ("EfficientNetForImageClassification", dict(image_size=32, width_coefficient=0.25,
                                                                depth_coefficient=0.25, hidden_dim=320,
                                                                _drop=_SIZES), "image"),
    "bit": ("BitForImageClassification", dict(hidden_sizes=[16, 32], depths=[1, 1], embedding_size=16, num_groups=4,
                                              _drop=_SIZES), "image"),
    # session 38: architectures added to the sweep
    # decoders
    "cohere": ("CohereForCausalLM", dict(num_key_value_heads=1), "causal"),
    "cohere2": ("Cohere2ForCausalLM", dict(num_key_value_heads=1, sliding_window=4), "causal"),
    "glm": ("GlmForCausalLM", dict(num_key_value_heads=1, head_dim=16, pad_token_id=0), "causal"),
    "glm4": ("Glm4ForCausalLM", dict(num_key_value_heads=1, head_dim=16, pad_token_id=0), "causal"),
    "helium": ("HeliumForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "nemotron": ("NemotronForCausalLM", dict(num_key_value_heads=1), "causal"),
    "olmoe": ("OlmoeForCausalLM", dict(num_key_value_heads=1, num_experts=4, num_experts_per_tok=2), "causal"),
    "olmo3": ("Olmo3ForCausalLM", dict(num_key_value_heads=1, sliding_window=4), "causal"),
    "granitemoe": ("GraniteMoeForCausalLM", dict(num_key_value_heads=1, num_local_experts=4,
            num_experts_per_tok=2), "causal"),
    "jetmoe": ("JetMoeForCausalLM", dict(num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2,
            kv_channels=16), "causal"),
    "phimoe": ("PhimoeForCausalLM", dict(num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2),
            "causal"),
    "deepseek_v3": ("DeepseekV3ForCausalLM", dict(num_key_value_heads=2, n_routed_experts=4,
            num_experts_per_tok=2, moe_intermediate_size=32, kv_lora_rank=16, q_lora_rank=16,
            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, first_k_dense_replace=1, n_group=1,
            topk_group=1), "causal"),
    "deepseek_v2": ("DeepseekV2ForCausalLM", dict(num_key_value_heads=2, n_routed_experts=4,
            num_experts_per_tok=2, moe_intermediate_size=32, kv_lora_rank=16, q_lora_rank=16,
            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16, first_k_dense_replace=1, n_group=1,
            topk_group=1), "causal"),
    "smollm3": ("SmolLM3ForCausalLM", dict(num_key_value_heads=1, pad_token_id=0), "causal"),
    "exaone4": ("Exaone4ForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "mamba2": ("Mamba2ForCausalLM", dict(num_heads=4, head_dim=16, state_size=8, expand=2, n_groups=1,
            conv_kernel=4, chunk_size=4, _drop=("num_attention_heads",)), "causal"),
    "falcon_mamba": ("FalconMambaForCausalLM", dict(state_size=4, expand=2, conv_kernel=4), "causal"),
    "recurrent_gemma": ("RecurrentGemmaForCausalLM", dict(num_key_value_heads=1, lru_width=32,
            attention_window_size=4, block_types=["recurrent", "attention"]), "causal"),
    "jamba": ("JambaForCausalLM", dict(num_key_value_heads=1, num_experts=2, num_experts_per_tok=1,
            mamba_d_state=4, mamba_d_conv=4, mamba_expand=2, attn_layer_period=2, attn_layer_offset=1,
            expert_layer_period=2, expert_layer_offset=1, use_mamba_kernels=False), "causal"),
    "gpt_oss": ("GptOssForCausalLM", dict(num_key_value_heads=1, head_dim=16, num_local_experts=4,
            num_experts_per_tok=2, sliding_window=4), "causal"),
    "arcee": ("ArceeForCausalLM", dict(num_key_value_heads=1), "causal"),
    "ernie4_5": ("Ernie4_5ForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "seed_oss": ("SeedOssForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "hunyuan_v1_dense": ("HunYuanDenseV1ForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "lfm2": ("Lfm2ForCausalLM", dict(num_key_value_heads=1, layer_types=["conv", "full_attention"]), "causal"),
    "apertus": ("ApertusForCausalLM", dict(num_key_value_heads=1), "causal"),
    "ministral": ("MinistralForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "diffllama": ("DiffLlamaForCausalLM", dict(num_key_value_heads=2), "causal"),
    "doge": ("DogeForCausalLM", dict(num_key_value_heads=1), "causal"),
    "bitnet": ("BitNetForCausalLM", dict(num_key_value_heads=1), "causal"),
    "vaultgemma": ("VaultGemmaForCausalLM", dict(num_key_value_heads=1, head_dim=16), "causal"),
    "gpt_neox_japanese": ("GPTNeoXJapaneseForCausalLM", {}, "causal"),
    "rwkv": ("RwkvForCausalLM", dict(attention_hidden_size=32, context_length=64, _drop=("num_attention_heads",
            "max_position_embeddings")), "causal"),
    # encoders
    "modernbert": ("ModernBertForSequenceClassification", dict(global_attn_every_n_layers=2, local_attention=4,
            pad_token_id=0), "text_cls"),
    "roberta-prelayernorm": ("RobertaPreLayerNormForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    "xlm-roberta-xl": ("XLMRobertaXLForSequenceClassification", {"pad_token_id": 1}, "text_cls"),
    "roc_bert": ("RoCBertForSequenceClassification", dict(pronunciation_vocab_size=16, shape_vocab_size=16,
            pronunciation_embed_dim=8, shape_embed_dim=8), "text_cls"),
    "mra": ("MraForSequenceClassification", dict(max_position_embeddings=64, block_per_row=2), "text_cls"),
    "eurobert": ("EuroBertForSequenceClassification", dict(num_key_value_heads=1, pad_token_id=0,
            mask_token_id=1, bos_token_id=2, eos_token_id=3), "text_cls"),
    # seq2seq
    "fsmt": ("FSMTForConditionalGeneration", dict(d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
            src_vocab_size=128, tgt_vocab_size=128, langs=["en", "de"], _drop=_GENERIC), "seq2seq"),
    "plbart": ("PLBartForConditionalGeneration", dict(_S2S), "seq2seq"),
    "bigbird_pegasus": ("BigBirdPegasusForConditionalGeneration", dict(_S2S, attention_type="original_full"),
            "seq2seq"),
    "umt5": ("UMT5ForConditionalGeneration", dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
            decoder_start_token_id=0), "seq2seq"),
    "longt5": ("LongT5ForConditionalGeneration", dict(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2,
            decoder_start_token_id=0, local_radius=2), "seq2seq"),
    "switch_transformers": ("SwitchTransformersForConditionalGeneration", dict(d_model=32, d_ff=64, d_kv=16,
            num_layers=2, num_decoder_layers=2, num_heads=2, num_experts=2, decoder_start_token_id=0,
            encoder_sparse_step=1, decoder_sparse_step=1), "seq2seq"),
    "mvp": ("MvpForConditionalGeneration", dict(_S2S), "seq2seq"),
    "blenderbot": ("BlenderbotForConditionalGeneration", dict(_S2S), "seq2seq"),
    "prophetnet": ("ProphetNetForConditionalGeneration", dict(num_encoder_layers=2, num_decoder_layers=2,
            num_encoder_attention_heads=2, num_decoder_attention_heads=2, encoder_ffn_dim=64,
            decoder_ffn_dim=64, ngram=2, num_buckets=8, relative_max_distance=16, decoder_start_token_id=0,
            _drop=("num_hidden_layers",)), "seq2seq"),
    # vision
    "vit_msn": ("ViTMSNForImageClassification", dict(_IMG), "image"),
    "data2vec-vision": ("Data2VecVisionForImageClassification", dict(_IMG), "image"),
    "ijepa": ("IJepaForImageClassification", dict(_IMG), "image"),
    "dinov2_with_registers": ("Dinov2WithRegistersForImageClassification", dict(_IMG, num_register_tokens=2),
            "image"),
    "focalnet": ("FocalNetForImageClassification", dict(image_size=32, patch_size=4, embed_dim=16, depths=[1,
            1], focal_levels=[2, 2], focal_windows=[3, 3], _drop=_SIZES), "image"),
    "pvt_v2": ("PvtV2ForImageClassification", dict(image_size=32, hidden_sizes=[8, 16], depths=[1, 1],
            num_attention_heads=[1, 2], sr_ratios=[2, 1], patch_sizes=[7, 3], strides=[4, 2],
            num_encoder_blocks=2, mlp_ratios=[2, 2], _drop=_SIZES), "image"),
    "swiftformer": ("SwiftFormerForImageClassification", dict(depths=[1, 1, 1, 1], embed_dims=[8, 16, 24, 32],
            _drop=_SIZES), "image"),
    "hiera": ("HieraForImageClassification", dict(image_size=[32, 32], embed_dim=16, num_heads=[1, 2],
            depths=[1, 1], patch_stride=[4, 4], masked_unit_size=[2, 2], query_stride=[2, 2], num_query_pool=1,
            _drop=_SIZES), "image"),
    # audio
    "sew": ("SEWForSequenceClassification", dict(conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3],
            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, squeeze_factor=2), "audio_cls"),
    "sew-d": ("SEWDForSequenceClassification", dict(conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3],
            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2, squeeze_factor=2, position_buckets=8,
            max_relative_positions=16), "audio_cls"),
    "unispeech": ("UniSpeechForSequenceClassification", dict(conv_dim=[8, 8], conv_stride=[5, 2],
            conv_kernel=[10, 3], num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2), "audio_cls"),
    "data2vec-audio": ("Data2VecAudioForSequenceClassification", dict(conv_dim=[8, 8], conv_stride=[5, 2],
            conv_kernel=[10, 3], num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2,
            conv_pos_kernel_size=3), "audio_cls"),
    "wav2vec2-conformer": ("Wav2Vec2ConformerForSequenceClassification", dict(conv_dim=[8, 8], conv_stride=[5,
            2], conv_kernel=[10, 3], num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2,
            conv_depthwise_kernel_size=3), "audio_cls"),
    # audio
    "hubert": ("HubertForSequenceClassification",
               dict(conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3], num_conv_pos_embeddings=8,
                    num_conv_pos_embedding_groups=2), "audio_cls"),
    "wavlm": ("WavLMForSequenceClassification",
              dict(conv_dim=[8, 8], conv_stride=[5, 2], conv_kernel=[10, 3], num_conv_pos_embeddings=8,
                   num_conv_pos_embedding_groups=2, num_buckets=16, max_bucket_distance=32), "audio_cls"),
}


def _config(model_type, extra, attn="eager"):
    from transformers import AutoConfig
    kw = dict(_SMALL)
    if model_type == "clip":
        return AutoConfig.for_model("clip", text_config=dict(_SMALL), vision_config=dict(_SMALL, **_IMG),
                                    projection_dim=16)
    kw.update({k: v for k, v in extra.items() if k != "_drop"})
    for k in extra.get("_drop", ()):  # config classes that refuse a generic name
        kw.pop(k, None)
    cfg = AutoConfig.for_model(model_type, **kw)
    for k in ("hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
              "resid_pdrop", "embd_pdrop", "attn_pdrop", "activation_dropout", "dropout_rate",
              "hidden_dropout", "classifier_dropout", "drop_path_rate", "layerdrop", "mask_time_prob"):
        if hasattr(cfg, k) and isinstance(getattr(cfg, k), float):
            setattr(cfg, k, 0.0)
    if hasattr(cfg, "_attn_implementation"):
        try:
            cfg._attn_implementation = attn
        except Exception:
            pass
    return cfg


def _inputs(kind, cfg, seed=0, pad=False, b=2, s=8):
    import torch
    g = torch.Generator().manual_seed(seed)
    vocab = getattr(cfg, "vocab_size", 128) or 128
    if kind in ("text_cls", "causal"):
        ids = torch.randint(2, min(vocab, 120), (b, s), generator=g)
        labels = torch.randint(0, 2, (b,), generator=g) if kind == "text_cls" else ids.clone()
        mask = torch.ones(b, s, dtype=torch.long)
        if pad:  # the second sequence is 3 tokens shorter (right padding, ignored by the loss)
            mask[1, -3:] = 0
            if kind == "causal":
                labels[1, -3:] = -100
        return {"input_ids": ids, "attention_mask": mask}, {"labels": labels}
    if kind == "seq2seq":
        ids = torch.randint(2, min(vocab, 120), (b, s), generator=g)
        dec = torch.randint(2, min(vocab, 120), (b, 6), generator=g)
        mask = torch.ones(b, s, dtype=torch.long)
        if pad:
            mask[1, -3:] = 0
        return {"input_ids": ids, "attention_mask": mask,
                "decoder_input_ids": dec}, {"labels": dec.clone()}
    if kind == "audio_seq2seq":
        feats = torch.randn(b, cfg.num_mel_bins, 2 * cfg.max_source_positions, generator=g)
        dec = torch.randint(2, 120, (b, 6), generator=g)
        return {"input_features": feats, "decoder_input_ids": dec}, {"labels": dec.clone()}
    if kind == "image":
        n = getattr(cfg, "num_channels", 3)
        return {"pixel_values": torch.randn(b, n, 32, 32, generator=g)}, \
            {"labels": torch.randint(0, 2, (b,), generator=g)}
    if kind == "clip":
        ids = torch.randint(2, 120, (b, s), generator=g)
        return {"input_ids": ids, "pixel_values": torch.randn(b, 3, 32, 32, generator=g),
                "return_loss": True}, {}
    if kind == "audio_cls":
        return {"input_values": torch.randn(b, 400 + 80 * (s - 8), generator=g)}, {"labels": torch.randint(0, 2, (b,), generator=g)}
    raise ValueError(kind)


def _flat(x, out):
    import torch
    if isinstance(x, torch.Tensor):
        out.append(x)
    elif isinstance(x, dict) or hasattr(x, "to_tuple"):
        for v in (x.values() if isinstance(x, dict) else x.to_tuple()):
            _flat(v, out)
    elif isinstance(x, (list, tuple)):
        for v in x:
            _flat(v, out)
    return out


def _max_diff(a, b):
    fa, fb = _flat(a, []), _flat(b, [])
    if len(fa) != len(fb):
        return float("inf")
    worst = 0.0
    for x, y in zip(fa, fb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return float("inf")
        if x.numel():
            d = (x.double() - y.double()).abs()
            scale = y.double().abs().max().item() + 1.0
            worst = max(worst, (d.max().item()) / scale)
    return worst


def torch_counting_backend(backend: str, counter: dict):
    """torch's ``backend`` (by name) wrapped to count the graphs torch.compile hands it."""
    if backend == "inductor":
        from torch._inductor.compile_fx import compile_fx as inner
    elif backend == "eager":
        inner = lambda gm, ex: gm.forward  # noqa: E731
    else:
        import torch._dynamo
        inner = torch._dynamo.lookup_backend(backend)

    def counting(gm, ex):
        counter["graphs"] += 1
        return inner(gm, ex)
    return counting


def _torch_compile(model, backend, counter):
    """torch.compile(model, backend=backend), counting the graphs it hands the backend."""
    import torch
    return torch.compile(model, backend=torch_counting_backend(backend, counter))


def run_one(arch: str, backend: str, with_torch: bool, compiler: str = "ember", attn: str = "eager",
            pad: bool = False, vary: bool = False) -> dict:
    import copy
    import warnings

    import torch
    import transformers

    import ember
    cls_name, extra, kind = ARCHS[arch]
    row = {"arch": arch, "backend": backend, "compiler": compiler}
    torch.manual_seed(0)
    cfg = _config(arch, extra, attn)
    try:
        model = getattr(transformers, cls_name)(cfg)
    except ValueError as e:  # --attn sdpa on an architecture without it: its only attention
        if attn == "eager" or "scaled_dot_product_attention" not in str(e):
            raise
        row["attn"] = "eager (no sdpa)"
        torch.manual_seed(0)
        cfg = _config(arch, extra, "eager")
        model = getattr(transformers, cls_name)(cfg)
    model.eval()  # dropout off; train steps still build the backward
    inputs, labels = _inputs(kind, cfg, pad=pad)
    # --vary: the second call has another batch size and sequence length (a recompile; torch.compile
    # makes the changed sizes dynamic there), a third call yet other sizes (no further recompile)
    inputs2, labels2 = _inputs(kind, cfg, seed=1, pad=pad, b=3, s=12) if vary else (inputs, labels)
    inputs3, labels3 = _inputs(kind, cfg, seed=2, pad=pad, b=4, s=10) if vary else (None, None)
    tol = 1e-4 if backend != "inductor" else 1e-3

    def infer(m, second=False):
        with torch.no_grad():
            return m(**(inputs3 if second == 2 else inputs2 if second else inputs))

    def train(m, second=False):
        m.zero_grad(set_to_none=True)
        out = m(**(inputs3 if second == 2 else inputs2 if second else inputs),
                **(labels3 if second == 2 else labels2 if second else labels))
        loss = out["loss"] if "loss" in out else _flat(out, [])[0].float().pow(2).mean()
        loss.backward()
        return loss.detach(), [p.grad for p in m.parameters() if p.grad is not None]

    for step, fn in (("infer", infer), ("train", train)):
        ref_model = copy.deepcopy(model)
        try:
            expected = fn(ref_model)
        except Exception as e:  # eager itself fails: not ember's concern
            row[step] = f"eager-error {type(e).__name__}: {str(e)[:120]}"
            continue
        # the compiled model is called twice, so is eager: a second call may raise in eager (levit's
        # eval-mode bias cache keeps the first call's autograd graph; its second backward raises)
        try:
            expected2, eager_error2 = fn(ref_model, True), None
        except Exception as e:
            expected2, eager_error2 = None, e
        expected3 = fn(ref_model, 2) if vary and eager_error2 is None else None
        ember.reset()
        m = copy.deepcopy(model)
        torch_counter = {"graphs": 0}
        if compiler == "torch":
            import torch._dynamo
            torch._dynamo.reset()
            compiled = _torch_compile(m, backend, torch_counter)
        else:
            compiled = ember.compile(m, backend=backend)
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                got = fn(compiled)
                try:
                    got2 = fn(compiled, True)
                except Exception as e:
                    if eager_error2 is None or type(e) is not type(eager_error2):
                        raise
                    got2 = None  # raised as eager raised
                graphs2 = ember.stats().get("graphs") if compiler == "ember" else torch_counter["graphs"]
                got3 = fn(compiled, 2) if expected3 is not None else None
            fell_back = [str(x.message)[:200] for x in w if "ember" in str(x.message).lower()]
        except Exception as e:
            row[step] = "CRASH"
            row[step + "_error"] = f"{type(e).__name__}: {str(e)[:300]}"
            continue
        row[step + "_s"] = round(time.perf_counter() - t0, 2)
        if got2 is None and eager_error2 is None:
            diff = float("inf")
        elif eager_error2 is not None:
            diff = float("inf") if got2 is not None else _max_diff(got, expected)
            row[step + "_note"] = f"2nd call raises {type(eager_error2).__name__} in eager and compiled"
        else:
            diff = max(_max_diff(got, expected), _max_diff(got2, expected2),
                       _max_diff(got3, expected3) if expected3 is not None else 0.0)
        st = ember.stats() if compiler == "ember" else {"graphs": torch_counter["graphs"]}
        row[step] = "ok" if diff <= tol else "WRONG"
        row[step + "_diff"] = diff
        row[step + "_stats"] = {k: st.get(k) for k in ("graphs", "graph_breaks", "recompiles", "fallbacks")}
        if expected3 is not None:  # graphs the third call's sizes added (automatic dynamic: none)
            row[step + "_stats"]["graphs_3rd_call"] = st.get("graphs") - graphs2
        if fell_back:
            row[step + "_warnings"] = fell_back[:3]
        if with_torch and compiler == "ember":
            import torch._dynamo
            torch._dynamo.reset()
            counter = {"graphs": 0}

            def count(gm, ex):
                counter["graphs"] += 1
                return gm.forward
            try:
                fn(torch.compile(copy.deepcopy(model), backend=count))
                row[step + "_torch_graphs"] = counter["graphs"]
            except Exception as e:
                row[step + "_torch_graphs"] = f"error {type(e).__name__}"
    return row


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--only", default="")
    p.add_argument("--backend", default="eager")
    p.add_argument("--torch", action="store_true", help="also count torch.compile's graphs")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--json", default="")
    p.add_argument("--compiler", default="ember", choices=("ember", "torch"),
                   help="torch: run torch.compile with the same backend instead of ember (to compare)")
    p.add_argument("--attn", default="eager", choices=("eager", "sdpa"),
                   help="the models' attention implementation (transformers' default is sdpa)")
    p.add_argument("--pad", action="store_true", help="text inputs with padding (attention_mask zeros)")
    p.add_argument("--vary", action="store_true",
                   help="the second call has other sizes (batch 3, sequence 12): dynamic-shape recompiles; "
                        "a third call (batch 4, sequence 10) shows whether they stayed dynamic")
    p.add_argument("--fresh-cache", action="store_true",
                   help="each architecture gets an empty TORCHINDUCTOR_CACHE_DIR (cold compile times)")
    p.add_argument("--one", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.one:
        print("ROW " + json.dumps(run_one(a.one, a.backend, a.torch, a.compiler, a.attn, a.pad, a.vary)))
        return
    archs = [x for x in a.only.split(",") if x] or list(ARCHS)
    rows = []
    for arch in archs:
        cmd = [sys.executable, "-m", "benchmarks.hf_sweep", "--one", arch, "--backend", a.backend,
               "--compiler", a.compiler, "--attn", a.attn] + (["--pad"] if a.pad else []) + (["--vary"] if a.vary else [])
        if a.torch:
            cmd.append("--torch")
        env = {**os.environ, "PYTHONWARNINGS": "ignore"}
        cache = tempfile.mkdtemp(prefix="hf_sweep_inductor_") if a.fresh_cache else None
        if cache:
            env["TORCHINDUCTOR_CACHE_DIR"] = cache
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
            line = [x for x in r.stdout.splitlines() if x.startswith("ROW ")]
            row = json.loads(line[-1][4:]) if line else {"arch": arch, "infer": "DIED",
                                                         "error": (r.stderr or "")[-400:]}
        except subprocess.TimeoutExpired:
            row = {"arch": arch, "infer": "TIMEOUT"}
        finally:
            if cache:
                shutil.rmtree(cache, ignore_errors=True)
        rows.append(row)
        st = lambda k: row.get(k + "_stats") or {}
        third = (f"3rd_call_graphs={st('infer').get('graphs_3rd_call')}/{st('train').get('graphs_3rd_call')} "
                 if a.vary else "")
        line = (f"{arch:14s} infer={row.get('infer', '?'):8s} train={row.get('train', '?'):8s} "
                f"graphs={st('infer').get('graphs')}/{st('train').get('graphs')} {third}"
                f"breaks={st('infer').get('graph_breaks')}/{st('train').get('graph_breaks')} "
                f"fallbacks={st('infer').get('fallbacks')}/{st('train').get('fallbacks')} "
                f"s={row.get('infer_s')}/{row.get('train_s')} "
                f"torch_graphs={row.get('infer_torch_graphs', '-')}/{row.get('train_torch_graphs', '-')} "
                f"{row.get('infer_error', '') or row.get('train_error', '') or row.get('error', '')}")
        print(line[:400], flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r["arch"] for r in rows if r.get("infer") not in ("ok",) or r.get("train") not in ("ok",)]
    print(f"{len(rows) - len(bad)}/{len(rows)} ok; not ok: {', '.join(bad)}")


if __name__ == "__main__":
    main()
