"""HF GPT2 / BERT / Llama train steps under ember's aot_eager and inductor, against eager."""
import copy
import os

import pytest
import torch

import ember
from models import make_batch, make_model, train_step

pytest.importorskip("transformers", reason="transformers is needed for the model tests")

slow = pytest.mark.skipif(not os.environ.get("EMBER_SLOW"), reason="slow model test: set EMBER_SLOW=1")


def check_train_step(name: str, backend: str):
    model = make_model(name)
    reference = copy.deepcopy(model)
    ids, labels = make_batch()
    expected_loss = train_step(reference, ids, labels)

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=ember.lookup_backend(backend))
    loss = train_step(compiled, ids, labels)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-4, atol=1e-5)
    n_grads = 0
    for (pname, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
        assert (p.grad is None) == (q.grad is None), pname
        if p.grad is not None:
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{pname}: {m}")
            n_grads += 1
    assert n_grads > 10

    # a second step reuses the compiled graphs and still matches
    for m in (reference, model):
        m.zero_grad(set_to_none=True)
    torch.testing.assert_close(train_step(compiled, ids, labels), train_step(reference, ids, labels),
                               rtol=1e-4, atol=1e-5)


def test_gpt2_aot_eager():
    check_train_step("gpt2", "aot_eager")


@pytest.mark.slow
@slow
@pytest.mark.parametrize("name,backend", [("bert", "aot_eager"), ("llama", "aot_eager"),
                                          ("gpt2", "inductor"), ("bert", "inductor"), ("llama", "inductor")])
def test_train_step(name, backend):
    check_train_step(name, backend)
