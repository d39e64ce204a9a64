"""Random short programs over views, metadata mutations and in-place ops: ember equals eager.

Each program applies 1-4 random steps to its inputs; programs that eager rejects are
skipped. Compared as in metadata_compare.run_both (outputs, inputs' metadata after the
call, leafness, grads) for the eager and aot_eager backends.
"""
import random

import pytest
import torch

import ember
from metadata_compare import run_both

STEPS = [
    ("x.t_()", lambda x, y: (x.t_(), y)),
    ("x.unsqueeze_(0)", lambda x, y: (x.unsqueeze_(0), y)),
    ("x.squeeze_()", lambda x, y: (x.squeeze_(), y)),
    ("x.transpose_(0, -1)", lambda x, y: (x.transpose_(0, -1), y)),
    ("x.as_strided_((2,), (1,), 1)", lambda x, y: (x.as_strided_((2,), (1,), 1), y)),
    ("x.resize_(2)", lambda x, y: (x.resize_(2), y)),
    ("x.mul_(2)", lambda x, y: (x.mul_(2), y)),
    ("y = x.view(-1)", lambda x, y: (x, x.view(-1))),
    ("y = x.t()", lambda x, y: (x, x.t())),
    ("y = x[0]", lambda x, y: (x, x[0])),
    ("y.add_(1)", lambda x, y: (x, y.add_(1))),
    ("x = x + y.sum()", lambda x, y: (x + y.sum(), y)),
    ("x = x.sin()", lambda x, y: (x.sin(), y)),
]


def _program(seed):
    rng = random.Random(seed)
    steps = [rng.choice(STEPS) for _ in range(rng.randint(1, 4))]

    def program(x, y):
        for _, step in steps:
            x, y = step(x, y)
        return x, y
    program.__name__ = "program_" + "_".join(str(STEPS.index(s)) for s in steps)
    shape = rng.choice([(2, 3), (3, 1), (1, 2, 2), (4,)])
    return program, " ; ".join(text for text, _ in steps), shape


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("seed", range(40))
def test_random_metadata_program(seed, backend):
    program, text, shape = _program(seed)

    def make():
        return torch.randn(*shape), torch.randn(*shape)
    try:
        program(*make())
    except RuntimeError:
        pytest.skip(f"eager rejects: {text}")
    ember.reset()
    run_both(program, make, backend)
