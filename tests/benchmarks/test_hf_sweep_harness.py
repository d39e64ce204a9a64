"""The HuggingFace sweep's harness pieces that need no model download: inputs for the
``--pad`` / ``--vary`` rows, the relative difference it judges by, and the torch.compile
graph counter of ``--compiler torch``."""
from __future__ import annotations

import pathlib
import sys
import types

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import hf_sweep  # noqa: E402

CFG = types.SimpleNamespace(vocab_size=128, num_mel_bins=8, max_source_positions=16, num_channels=3)


def test_padded_text_inputs_mask_the_tail_of_the_second_row_and_its_labels():
    inputs, labels = hf_sweep._inputs("causal", CFG, pad=True)
    assert inputs["attention_mask"][0].tolist() == [1] * 8
    assert inputs["attention_mask"][1].tolist() == [1] * 5 + [0] * 3
    assert labels["labels"][1, -3:].tolist() == [-100] * 3
    assert (labels["labels"][0] == inputs["input_ids"][0]).all()


@pytest.mark.parametrize("kind", ["text_cls", "causal", "seq2seq", "image", "audio_cls", "clip", "audio_seq2seq"])
def test_varied_inputs_change_the_batch_size(kind):
    first, _ = hf_sweep._inputs(kind, CFG)
    second, _ = hf_sweep._inputs(kind, CFG, seed=1, b=3, s=12)
    for k, v in first.items():
        if isinstance(v, torch.Tensor):
            assert v.shape[0] == 2 and second[k].shape[0] == 3, k
    if kind in ("text_cls", "causal", "seq2seq"):
        assert second["input_ids"].shape == (3, 12)


def test_max_diff_is_relative_and_flags_shape_changes():
    a = torch.tensor([1.0, 2.0])
    assert hf_sweep._max_diff(a, a.clone()) == 0.0
    assert hf_sweep._max_diff(a + 0.3, a) == pytest.approx(0.1)  # 0.3 / (max |eager| + 1)
    assert hf_sweep._max_diff(a, torch.ones(3)) == float("inf")
    assert hf_sweep._max_diff((a,), (a, a)) == float("inf")


def test_torch_compile_counts_the_graphs_it_hands_the_backend():
    def f(x):
        y = x.sin()
        print("", end="")  # a graph break: two graphs
        return y.cos()
    counter = {"graphs": 0}
    x = torch.randn(4)
    got = hf_sweep._torch_compile(f, "eager", counter)(x)
    torch.testing.assert_close(got, x.sin().cos(), rtol=0, atol=0)
    assert counter["graphs"] == 2


@pytest.mark.slow
def test_varied_row_calls_a_third_size_and_counts_the_graphs_it_added():
    """``--vary``: the second call's new sizes recompile once (dynamic), the third call's sizes
    reuse that graph; the row compares all three calls with eager."""
    pytest.importorskip("transformers")
    row = hf_sweep.run_one("bert", "eager", False, vary=True)
    for step in ("infer", "train"):
        assert row[step] == "ok", row
        assert row[step + "_stats"]["graphs_3rd_call"] == 0, row
        assert row[step + "_stats"]["graphs"] == 2, row  # the first sizes, then the dynamic graph
