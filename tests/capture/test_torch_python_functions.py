"""torch's own Python functions that ember usually puts in the graph as one call
(``torch.nn.functional``, ``torch.nn.utils``, ...) are traced as Python when an argument is
something no graph call takes (a generator, a module, a user object), as torch.compile inlines
them: one graph, the answer eager gives."""
import pytest
import torch
import torch.nn as nn

import ember
from ember_test_helpers import CompileCounter, assert_same


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_parameters_to_vector_of_a_generator_is_one_graph(backend):
    torch.manual_seed(0)
    m = nn.Linear(3, 2)

    def f(scale):
        v = nn.utils.parameters_to_vector(m.parameters())
        nn.utils.vector_to_parameters(v * scale, m.parameters())
        return v.sum()

    ref = nn.Linear(3, 2)
    ref.load_state_dict(m.state_dict())
    counter = CompileCounter()
    with torch.no_grad():
        got = ember.compile(f, backend=counter if backend == "eager" else backend)(2.0)
        m, keep = ref, m
        want = f(2.0)
        m = keep
    assert_same(got, want)
    assert_same(m.weight, ref.weight)
    if backend == "eager":
        assert counter.frame_count == 1


def test_a_user_object_argument_is_traced_through():
    class Scale:
        def __init__(self, k):
            self.k = k

        def __mul__(self, t):
            return t * self.k

        __rmul__ = __mul__

    def f(x, s):
        return torch.nn.functional.relu(x) * 2, torch.nn.utils.parameters_to_vector([x, x * s.k])

    counter = CompileCounter()
    x = torch.randn(4)
    assert_same(ember.compile(f, backend=counter)(x, Scale(3.0)), f(x, Scale(3.0)))
    assert counter.frame_count == 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_closure_torch_made_at_run_time_is_traced_through(backend):
    # AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(0.9)).update_parameters calls
    # `self.multi_avg_fn(...)`: a function of torch.optim.swa_utils made at run time
    # (`get_ema_multi_avg_fn.<locals>.ema_update`). Kept as one graph call (as an optimizer's own
    # methods are), the graph's code named it `torch.optim.swa_utils.ema_update`, which does not
    # exist: AttributeError where eager runs.
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

    def run(compiled):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
        ema = AveragedModel(net, multi_avg_fn=get_ema_multi_avg_fn(0.9))

        def step(x):
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(0.1)
            ema.update_parameters(net)
            return ema(x)

        fn = ember.compile(step, backend=backend) if compiled else step
        torch.manual_seed(1)
        outs = [fn(torch.randn(2, 4)) for _ in range(3)]
        return outs, [p.detach().clone() for p in ema.parameters()], ema.n_averaged.clone()

    assert_same(run(True), run(False))
