"""HuggingFace models that torch.compile captures in one graph with no break, built from tiny
random configs (no downloads): classification with labels (the loss sets
``config.problem_type`` through PretrainedConfig's custom ``__setattr__``), and
encoder-decoders whose forward deep-copies the config (``get_text_config``), and funnel, whose
mask combines two views of one tensor with ``|`` (``operator.or_`` is no in-place op).
Outputs and the config after the call match eager; one graph, no break, no fallback.
"""
import copy

import pytest
import torch

from ember_test_helpers import CompileCounter, compile, reset, stats

transformers = pytest.importorskip("transformers")


def _tiny(name):
    T = transformers
    ids = torch.randint(0, 99, (2, 8), generator=torch.Generator().manual_seed(0))
    if name == "bert_cls":
        cfg = T.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=37, num_labels=3)
        return T.BertForSequenceClassification(cfg), dict(input_ids=ids, labels=torch.tensor([0, 2]))
    if name == "vit_cls":
        cfg = T.ViTConfig(image_size=16, patch_size=8, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=37, num_labels=3)
        return T.ViTForImageClassification(cfg), dict(pixel_values=torch.randn(2, 3, 16, 16),
                                                      labels=torch.tensor([0, 2]))
    if name == "t5":
        cfg = T.T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=37, num_layers=2, num_heads=2,
                         decoder_start_token_id=0)
        return T.T5ForConditionalGeneration(cfg), dict(input_ids=ids, labels=ids)
    if name == "bart":
        cfg = T.BartConfig(vocab_size=100, d_model=32, encoder_layers=1, decoder_layers=1,
                           encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=37,
                           decoder_ffn_dim=37, max_position_embeddings=32)
        return T.BartForConditionalGeneration(cfg), dict(input_ids=ids, labels=ids)
    if name == "funnel":  # its attention mask: `cls_ids[:, :, None] | cls_ids[:, None]` (operator.or_)
        cfg = T.FunnelConfig(vocab_size=100, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=37,
                             num_labels=3)
        return T.FunnelForSequenceClassification(cfg), dict(input_ids=ids, labels=torch.tensor([0, 2]))
    raise KeyError(name)


@pytest.mark.parametrize("name", ["bert_cls", "vit_cls", "t5", "bart", "funnel"])
def test_one_graph_no_break(name):
    torch.manual_seed(0)
    model, kwargs = _tiny(name)
    model.eval()
    eager_model = copy.deepcopy(model)
    reset()
    counter = CompileCounter()
    out = compile(model, backend=counter)(**kwargs)   # compiled first: the trace sees problem_type unset
    expected = eager_model(**kwargs)
    torch.testing.assert_close(out.loss, expected.loss)
    torch.testing.assert_close(out.logits, expected.logits)
    assert model.config.problem_type == eager_model.config.problem_type
    s = stats()
    assert (counter.frame_count, s["graph_breaks"], s["fallbacks"]) == (1, 0, 0), s
