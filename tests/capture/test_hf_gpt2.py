"""HuggingFace GPT-2 (tiny, random weights, no download) captured in one graph.

Code paths this exercises (transformers 5.x, traced from an eager forward):
``utils/generic.py`` (the ``can_return_tuple``/``check_model_inputs`` wrappers,
``ModelOutput.__post_init__``/``__setitem__`` building a dataclass-dict output),
``utils/output_capturing.py`` (a ContextVar-or-global switch keyed on
``is_torchdynamo_compiling()``), ``configuration_utils.__getattribute__``
(attribute-map indirection on every config read),
``masking_utils.create_causal_mask`` → ``find_packed_sequence_indices``,
``sdpa_mask``/``eager_mask`` (vmap-free mask construction),
``modeling_layers.GradientCheckpointingLayer``, ``pytorch_utils.Conv1D``,
``activations.NewGELUActivation``, ``modeling_utils.get_interface`` (the
attention-function registry: ``eager_attention_forward`` or torch SDPA), and
with labels ``loss_utils.ForCausalLMLoss``.

Important: transformers calls ``torch.compiler.is_compiling()`` (via
``is_torchdynamo_compiling``/``is_tracing``) to skip data-dependent checks such
as ``(packed_sequence_mask[:, -1] == 0).all()`` and the padding warning; ember
must report ``is_compiling() == True`` while capturing for fullgraph to hold
(see test_is_compiling_is_true_only_while_capturing).
"""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from ember_test_helpers import CompileCounter, assert_same, compile  # noqa: E402


def make_model(attn_implementation="eager", **overrides):
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64,
                     bos_token_id=0, eos_token_id=0, attn_implementation=attn_implementation, **overrides)
    model = GPT2LMHeadModel(cfg)
    assert model.config._attn_implementation == attn_implementation
    # Without an explicit loss_type, `loss_function` logs a warning_once
    # (a logging call, not capturable) before choosing ForCausalLM anyway.
    model.loss_type = "ForCausalLM"
    return model.eval()


def input_ids(seed=0, shape=(2, 16)):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 128, shape, generator=g)


def cache_tensors(cache):
    return [(layer.keys, layer.values) for layer in cache.layers]


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_gpt2_logits_one_graph(attn):
    model = make_model(attn)
    compiled_model = copy.deepcopy(model)
    cnt = CompileCounter()
    compiled = compile(compiled_model, backend=cnt, fullgraph=True)
    ids = input_ids()
    expected = model(ids)
    actual = compiled(ids)
    assert_same(actual.logits, expected.logits)
    assert_same(cache_tensors(actual.past_key_values), cache_tensors(expected.past_key_values))
    assert cnt.frame_count == 1
    assert cnt.op_count > 50  # the whole model, not a fragment


def test_gpt2_no_cache_full_output_equal():
    model = make_model()
    cnt = CompileCounter()
    compiled = compile(copy.deepcopy(model), backend=cnt, fullgraph=True)
    ids = input_ids(1)
    expected = model(input_ids=ids, use_cache=False)
    actual = compiled(input_ids=ids, use_cache=False)
    assert_same(actual, expected)  # same ModelOutput type, keys and tensors
    assert cnt.frame_count == 1
    actual2 = compiled(input_ids=input_ids(2), use_cache=False)  # new values, same guards
    assert_same(actual2, model(input_ids=input_ids(2), use_cache=False))
    assert cnt.frame_count == 1


def test_gpt2_under_no_grad():
    model = make_model()
    cnt = CompileCounter()
    compiled = compile(copy.deepcopy(model), backend=cnt, fullgraph=True)
    ids = input_ids(3)
    with torch.no_grad():
        expected = model(ids, use_cache=False)
        actual = compiled(ids, use_cache=False)
    assert not actual.logits.requires_grad
    assert_same(actual.logits, expected.logits)
    assert cnt.frame_count == 1


def test_gpt2_loss_and_backward_grads():
    model = make_model()
    comp_model = copy.deepcopy(model)
    cnt = CompileCounter()
    compiled = compile(comp_model, backend=cnt, fullgraph=True)
    ids = input_ids(4)
    expected = model(input_ids=ids, labels=ids, use_cache=False)
    actual = compiled(input_ids=ids, labels=ids, use_cache=False)
    assert_same(actual.loss, expected.loss)
    assert_same(actual.logits, expected.logits)
    expected.loss.backward()
    actual.loss.backward()
    grads_e = {n: p.grad for n, p in model.named_parameters()}
    grads_c = {n: p.grad for n, p in comp_model.named_parameters()}
    assert all(g is not None for g in grads_e.values())
    assert_same(grads_c, grads_e, "grads", check_requires_grad=False, atol=1e-5, rtol=1e-4)
    assert cnt.frame_count == 1


def test_is_compiling_is_true_only_while_capturing():
    """The one intended eager/compiled difference: libraries (transformers)
    branch on torch.compiler.is_compiling() to stay capturable."""
    def f(x):
        if torch.compiler.is_compiling():
            return x + 1
        return x - 1

    cnt = CompileCounter()
    compiled = compile(f, backend=cnt, fullgraph=True)
    x = torch.randn(3)
    torch.testing.assert_close(f(x), x - 1)
    torch.testing.assert_close(compiled(x), x + 1)
    assert cnt.frame_count == 1
    assert not torch.compiler.is_compiling()
