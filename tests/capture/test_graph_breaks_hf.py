"""HuggingFace GPT-2 (tiny, random weights) with a graph break patched into a
submodule: still matches eager, the side effect happens once per call, and
explain names the patched line.
"""
import copy

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, stats  # noqa: E402

if not REFERENCE:
    import ember


def make_model():
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=64, bos_token_id=0,
                     eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     attn_implementation="eager")
    model = GPT2LMHeadModel(cfg)
    model.loss_type = "ForCausalLM"
    return model.eval()


def ids(seed=0):
    return torch.randint(0, 128, (2, 16), generator=torch.Generator().manual_seed(seed))


def patch_mlp_with_item(model, seen):
    """Block 1's MLP records a statistic with .item() (an instance-level forward)."""
    mlp = model.transformer.h[1].mlp
    orig = type(mlp).forward

    def forward(hidden_states):
        h = orig(mlp, hidden_states)
        seen.append(round(h.abs().mean().item(), 6))  # BREAK-ITEM
        return h

    mlp.forward = forward


def patch_attn_with_print(model, seen):
    """Block 0's attention prints the shape of what it returns."""
    attn = model.transformer.h[0].attn
    orig = type(attn).forward

    def forward(*args, **kwargs):
        out = orig(attn, *args, **kwargs)
        print("attn out", tuple(out[0].shape))  # BREAK-PRINT
        seen.append(tuple(out[0].shape))
        return out

    attn.forward = forward


PATCHES = {"item": (patch_mlp_with_item, "# BREAK-ITEM"), "print": (patch_attn_with_print, "# BREAK-PRINT")}


def patched_pair(kind):
    eager = make_model()
    compiled_model = copy.deepcopy(eager)
    seen_eager, seen_comp = [], []
    PATCHES[kind][0](eager, seen_eager)
    PATCHES[kind][0](compiled_model, seen_comp)
    return eager, compiled_model, seen_eager, seen_comp


@pytest.mark.parametrize("kind", ["item", "print"])
def test_gpt2_with_break_in_submodule_matches_eager(kind, capsys):
    eager, compiled_model, seen_eager, seen_comp = patched_pair(kind)
    cnt = CompileCounter()
    compiled = compile(compiled_model, backend=cnt)
    for seed in (0, 1):
        x = ids(seed)
        expected = eager(x, labels=x)
        actual = compiled(x, labels=x)
        assert_same(actual.logits, expected.logits, atol=1e-5, rtol=1e-5)
        assert_same(actual.loss, expected.loss, atol=1e-5, rtol=1e-5)
    assert seen_comp == seen_eager and len(seen_comp) == 2  # once per call, same values
    assert stats()["graph_breaks"] + stats()["fallbacks"] >= 1, stats()
    if kind == "print":
        assert capsys.readouterr().out.count("attn out (2, 16, 64)") == 4


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gpt2_with_break_gradients_match_eager(backend):
    eager, compiled_model, seen_eager, seen_comp = patched_pair("item")
    eager.train()
    compiled_model.train()  # dropout probabilities are 0: deterministic
    compiled = compile(compiled_model, backend=backend)
    x = ids(2)
    loss_e = eager(x, labels=x).loss
    loss_c = compiled(x, labels=x).loss
    assert_same(loss_c, loss_e, atol=1e-5, rtol=1e-5)
    loss_e.backward()
    loss_c.backward()
    grads_e = {n: p.grad for n, p in eager.named_parameters()}
    grads_c = {n: p.grad for n, p in compiled_model.named_parameters()}
    assert_same(grads_c, grads_e, "parameter grads", atol=1e-5, rtol=1e-4, check_requires_grad=False)
    assert seen_comp == seen_eager


@pytest.mark.skipif(REFERENCE, reason="ember.explain's report format (Dynamo's is checked in test_graph_breaks_report)")
@pytest.mark.parametrize("kind", ["item", "print"])
def test_gpt2_explain_names_the_patched_line(kind, capsys):
    _, compiled_model, _, seen = patched_pair(kind)
    marker = PATCHES[kind][1]
    out = ember.explain(compiled_model)(ids())
    lines = open(__file__).read().splitlines()
    lineno = next(i + 1 for i, ln in enumerate(lines) if ln.rstrip().endswith(marker))
    where = f"{__file__}:{lineno}"
    assert any(r.where == where and r.source_line.strip() == lines[lineno - 1].strip()
               for r in out.break_reasons), [(r.where, r.source_line) for r in out.break_reasons]
    assert len(seen) == 1


def test_gpt2_with_break_still_compiles_the_transformer():
    _, compiled_model, _, _ = patched_pair("item")
    cnt = CompileCounter()
    compiled = compile(compiled_model, backend=cnt)
    compiled(ids())
    assert cnt.frame_count >= 2
    assert cnt.op_count > 50  # the embeddings, blocks and head, not only the head
