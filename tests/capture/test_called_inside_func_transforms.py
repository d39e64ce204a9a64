"""A compiled function called inside a torch.func transform (the transform outside the compiled
code): its tensor arguments are functorch wrappers. Those fake tensors cannot describe (jvp's dual
tensors, and a resume function's arguments under grad) run that frame eagerly, as eager does: they
failed converting (an internal error: AssertionError / "meta conversion to view functorch tensor")."""
import pytest
import torch

import ember


def plain(x):
    return x.sin() * 2


def with_break(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y * 2


TRANSFORMS = {
    "grad": lambda fn, x: torch.func.grad(lambda a: fn(a).sum())(x),
    "vmap": lambda fn, x: torch.func.vmap(fn)(x),
    "jvp": lambda fn, x: torch.func.jvp(fn, (x,), (torch.ones_like(x),))[1],
    "jacrev": lambda fn, x: torch.func.jacrev(fn)(x),
}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("fn", [plain, with_break], ids=["plain", "with-break"])
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_compiled_function_inside_a_transform(transform, fn, backend):
    run = TRANSFORMS[transform]
    compiled = ember.compile(fn, backend=backend)
    x = torch.randn(4)
    torch.testing.assert_close(run(compiled, x), run(fn, x))
    torch.testing.assert_close(run(compiled, x), run(fn, x))  # (the entries made under the transform)
    torch.testing.assert_close(compiled(x), fn(x))  # and outside it again
