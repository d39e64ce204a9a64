"""torch.linalg ops whose error check torch marks effectful (tokens in torch's AOTAutograd): ember
traces them (was: the frame fell back to eager) and the check still raises like eager."""
import pytest
import torch

import ember


def fn(A, b):
    return torch.linalg.inv(A) + torch.linalg.solve(A, b).sum(), torch.linalg.cholesky(A @ A.mT + torch.eye(2))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_values_and_gradients(backend):
    ember.reset()
    A0 = torch.tensor([[2.0, 0.5], [0.25, 3.0]])
    b = torch.ones(2, 1)
    A1, A2 = A0.clone().requires_grad_(), A0.clone().requires_grad_()
    expected = fn(A1, b)
    got = ember.compile(fn, backend=backend)(A2, b)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    sum(t.sum() for t in expected).backward()
    sum(t.sum() for t in got).backward()
    torch.testing.assert_close(A2.grad, A1.grad, rtol=1e-5, atol=1e-5)
    assert ember.stats()["fallbacks"] == 0 and ember.stats()["graphs"] == 1


def test_singular_matrix_raises_as_eager():
    ember.reset()
    compiled = ember.compile(lambda A: torch.linalg.inv(A) * 2, backend="aot_eager")
    torch.testing.assert_close(compiled(torch.eye(2) * 2), torch.eye(2))
    with pytest.raises(torch.linalg.LinAlgError, match="singular"):
        compiled(torch.zeros(2, 2))
    assert ember.stats()["fallbacks"] == 0
