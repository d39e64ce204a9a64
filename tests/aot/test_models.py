"""HF GPT2 / BERT / Llama train steps under ember's aot_eager and inductor, against eager."""
import copy
import os

import pytest
import torch

import ember
from inductor_tolerance import assert_close_inductor
from models import make_batch, make_model, train_step

pytest.importorskip("transformers", reason="transformers is needed for the model tests")

slow = pytest.mark.skipif(not os.environ.get("EMBER_SLOW"), reason="slow model test: set EMBER_SLOW=1")


def _close(actual, expected, backend, what=""):
    if backend == "inductor":  # what Inductor promises (tests/inductor_tolerance.py)
        assert_close_inductor(actual, expected, what=what)
    else:
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=lambda m: f"{what}: {m}")


def check_train_step(name: str, backend: str):
    model = make_model(name)
    reference = copy.deepcopy(model)
    ids, labels = make_batch()
    expected_loss = train_step(reference, ids, labels)

    torch._dynamo.reset()
    compiled = torch.compile(model, backend=ember.lookup_backend(backend))
    loss = train_step(compiled, ids, labels)
    _close(loss, expected_loss, backend, "loss")
    n_grads = 0
    for (pname, p), (_, q) in zip(reference.named_parameters(), model.named_parameters()):
        assert (p.grad is None) == (q.grad is None), pname
        if p.grad is not None:
            _close(q.grad, p.grad, backend, pname)
            n_grads += 1
    assert n_grads > 10

    # a second step reuses the compiled graphs and still matches
    for m in (reference, model):
        m.zero_grad(set_to_none=True)
    _close(train_step(compiled, ids, labels), train_step(reference, ids, labels), backend, "second step loss")


def test_gpt2_aot_eager():
    check_train_step("gpt2", "aot_eager")


@pytest.mark.slow
@slow
@pytest.mark.parametrize("name,backend", [("bert", "aot_eager"), ("llama", "aot_eager"),
                                          ("gpt2", "inductor"), ("bert", "inductor"), ("llama", "inductor")])
def test_train_step(name, backend):
    check_train_step(name, backend)
