"""The generate() benchmark's harness pieces that need no model: prompts with left/right
padding, the generate() keyword arguments per variant, and the score comparison it judges by."""
from __future__ import annotations

import pathlib
import sys
import types

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import hf_generate  # noqa: E402

CFG = types.SimpleNamespace(num_mel_bins=8, max_source_positions=16)


def test_decoder_prompts_are_left_padded_and_encoder_inputs_right_padded():
    causal = hf_generate._prompts("causal", CFG, "pad-dynamic", 6)
    assert causal["attention_mask"][1].tolist() == [0, 0, 1, 1, 1, 1]
    assert causal["input_ids"][1, :2].tolist() == [0, 0]
    assert causal["attention_mask"][0].tolist() == [1] * 6
    s2s = hf_generate._prompts("seq2seq", CFG, "pad-static", 9)
    assert s2s["attention_mask"][1].tolist() == [1] * 7 + [0, 0]
    assert "attention_mask" not in hf_generate._prompts("causal", CFG, "nomask-dynamic", 6)
    audio = hf_generate._prompts("audio_seq2seq", CFG, "nomask-dynamic", 6)
    assert audio["input_features"].shape == (2, 8, 32)


def test_generate_kwargs_are_greedy_fixed_length_and_pick_the_cache():
    kw = hf_generate._gen_kwargs("pad-static", 8)
    assert kw["cache_implementation"] == "static"
    assert kw["do_sample"] is False and kw["max_new_tokens"] == kw["min_new_tokens"] == 8
    assert kw["disable_compile"] is True  # transformers' own auto-compile never runs in the reference
    assert "cache_implementation" not in hf_generate._gen_kwargs("pad-dynamic", 8)


def test_score_diff_is_relative_and_requires_the_same_minus_infinities():
    a = [torch.tensor([[1.0, 2.0, -float("inf")]])]
    assert hf_generate._max_score_diff(a, [a[0].clone()]) == 0.0
    b = [torch.tensor([[1.3, 2.0, -float("inf")]])]
    assert hf_generate._max_score_diff(b, a) == pytest.approx(0.1)  # 0.3 / (max |eager| + 1)
    c = [torch.tensor([[1.0, 2.0, 0.0]])]
    assert hf_generate._max_score_diff(c, a) == float("inf")
    assert hf_generate._max_score_diff(a, a + a) == float("inf")


def test_variant_tokens_pick_batch_one_beams_and_no_cache():
    assert hf_generate._prompts("causal", CFG, "nomask-dynamic-b1", 6)["input_ids"].shape == (1, 6)
    kw = hf_generate._gen_kwargs("pad-static-beam", 8)
    assert kw["num_beams"] == 2 and kw["cache_implementation"] == "static"
    assert hf_generate._gen_kwargs("pad-dynamic-nocache", 8)["use_cache"] is False
