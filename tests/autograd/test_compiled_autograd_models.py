"""Compiled autograd on model train steps: nanoGPT (ember's demo model), a small ResNet, HF GPT-2,
BERT, Llama and T5 from tiny configs with random weights; forward eager or compiled by
``ember.compile`` (aot_eager)."""
import copy

import pytest
import torch

import ember
from ember.report import demo_model
from ember_test_helpers import REFERENCE

pytestmark = pytest.mark.skipif(REFERENCE, reason="ember's compiled autograd")

ca = ember.compiled_autograd


@pytest.fixture(autouse=True)
def _fresh():
    ca.reset()
    yield
    ca.disable()


def _compare(ref, model, step_ref, step_model, steps=3, backend="aot_eager", atol=1e-5):
    for _ in range(steps):
        ref.zero_grad(set_to_none=True)
        model.zero_grad(set_to_none=True)
        step_ref()
        with ca.enable(backend):
            step_model()
        for (name, p), q in zip(model.named_parameters(), ref.parameters()):
            if q.grad is None:
                assert p.grad is None, name
            else:
                torch.testing.assert_close(p.grad, q.grad, atol=atol, rtol=1e-4, msg=name)
    c = ca.counters
    assert c.fallbacks == 0 and c.traced == 1 and c.cache_hits == steps - 1


@pytest.mark.parametrize("compiled_forward", [False, True])
def test_nanogpt_train_step(compiled_forward):
    cfg = demo_model.GPTConfig(block_size=32, n_layer=2, n_embd=32, n_head=2, dropout=0.1)
    ref = demo_model.make_model(cfg).train()
    model = copy.deepcopy(ref)
    fwd = ember.compile(model, backend="aot_eager") if compiled_forward else model
    idx, targets = demo_model.make_batch(cfg, batch_size=2)
    torch.manual_seed(0)  # (dropout: both runs draw the same numbers)

    def step_ref():
        torch.manual_seed(1)
        ref(idx, targets)[1].backward()

    def step_model():
        torch.manual_seed(1)
        fwd(idx, targets)[1].backward()
    _compare(ref, model, step_ref, step_model)
    assert (ca.counters.inlined_aot > 0) == compiled_forward


def _hf(name):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    if name == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64,
                                      bos_token_id=0, eos_token_id=0, attn_implementation="sdpa",
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(cfg)
    elif name == "llama":
        cfg = transformers.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                       num_key_value_heads=1, intermediate_size=64, vocab_size=128,
                                       max_position_embeddings=64, attn_implementation="sdpa")
        model = transformers.LlamaForCausalLM(cfg)
        model.loss_type = "ForCausalLM"
    elif name == "t5":
        cfg = transformers.T5Config(d_model=32, d_ff=64, d_kv=16, num_layers=2, num_heads=2, vocab_size=128,
                                    dropout_rate=0.0, decoder_start_token_id=0)
        model = transformers.T5ForConditionalGeneration(cfg)
    else:
        cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, vocab_size=128, max_position_embeddings=64,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                      attn_implementation="sdpa")
        model = transformers.BertForMaskedLM(cfg)
    return model.train()


@pytest.mark.slow
@pytest.mark.parametrize("compiled_forward", [False, True])
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama", "t5"])
def test_hf_train_step(name, compiled_forward):
    ref = _hf(name)
    model = copy.deepcopy(ref)
    fwd = ember.compile(model, backend="aot_eager") if compiled_forward else model
    ids = torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(0))

    def step_ref():
        ref(input_ids=ids, labels=ids).loss.backward()

    def step_model():
        fwd(input_ids=ids, labels=ids).loss.backward()
    _compare(ref, model, step_ref, step_model)


class BasicBlock(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c)
        self.conv2 = torch.nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.bn1(self.conv1(x)).relu()
        return (self.bn2(self.conv2(out)) + x).relu()


def resnet():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                               BasicBlock(8), BasicBlock(8), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                               torch.nn.Linear(8, 10))


@pytest.mark.parametrize("compiled_forward", [False, True])
def test_resnet_train_step(compiled_forward):
    ref = resnet().train()
    model = copy.deepcopy(ref)
    fwd = ember.compile(model, backend="aot_eager") if compiled_forward else model
    x = torch.randn(2, 3, 16, 16)
    y = torch.tensor([1, 7])

    def step_ref():
        torch.nn.functional.cross_entropy(ref(x), y).backward()

    def step_model():
        torch.nn.functional.cross_entropy(fwd(x), y).backward()
    _compare(ref, model, step_ref, step_model)
    assert (ca.counters.inlined_aot > 0) == compiled_forward
