"""A submodule whose hooks break the graph still gets its forward compiled.

The caller breaks at ``self.sub(x)``; the residual calls the submodule through
``Module.__call__`` (every hook runs as in eager, in order) with ember's compiled
forward in place of the class's for that call only. Compared with eager: outputs,
gradients, the hooks' log, and the module's ``__dict__`` afterwards.
"""
import pytest
import torch
from torch import nn

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile

LOG = []


@torch.compiler.disable
def pre_hook(module, inp):
    LOG.append(("pre", type(module).__name__))
    return (inp[0] * 2,)


def fwd_hook(module, inp, out):
    LOG.append(("fwd", type(module).__name__))
    return out + 1


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).relu() * 3


class Outer(nn.Module):
    def __init__(self, fail=False):
        super().__init__()
        self.inner = Inner()
        self.fail = fail

    def forward(self, x):
        y = self.inner(x.sin())
        if self.fail:
            raise ValueError("after the hooked call")
        return y.cos()


def _make(hooks):
    torch.manual_seed(0)
    m = Outer()
    for kind in hooks:
        if kind == "pre":
            m.inner.register_forward_pre_hook(pre_hook)
        elif kind == "fwd":
            m.inner.register_forward_hook(torch.compiler.disable(fwd_hook))
        elif kind == "bwd":
            m.inner.register_full_backward_hook(lambda mod, gi, go: LOG.append(("bwd", len(gi))))
    return m


@pytest.mark.parametrize("hooks", [("pre",), ("fwd",), ("pre", "fwd"), ("pre", "bwd")], ids="+".join)
def test_hooked_submodule_forward_is_compiled(hooks):
    x = torch.randn(2, 4, requires_grad=True)
    m_e, m_c = _make(hooks), _make(hooks)
    LOG.clear()
    out_e = m_e(x)
    out_e.sum().backward()
    log_e = list(LOG)
    LOG.clear()
    cnt = CompileCounter()
    x_c = x.detach().clone().requires_grad_(True)
    out_c = compile(m_c, backend=cnt)(x_c)
    out_c.sum().backward()
    assert_same(out_c, out_e)
    assert LOG == log_e
    torch.testing.assert_close(x_c.grad, x.grad)
    for (n, p_e), (_, p_c) in zip(m_e.named_parameters(), m_c.named_parameters()):
        torch.testing.assert_close(p_c.grad, p_e.grad, msg=n)
    assert "forward" not in m_c.inner.__dict__
    if not REFERENCE:
        ops = [getattr(n.target, "__name__", str(n.target)) for gm in cnt.graphs for n in gm.graph.nodes
               if n.op in ("call_function", "call_method", "call_module")]
        assert any("linear" in o or "lin" in o for o in ops), ops  # Inner.forward was compiled


def test_forward_restored_when_the_forward_raises():
    class Bad(nn.Module):
        def forward(self, x):
            if x.sum() > -1e9:  # data-dependent: its own break
                raise KeyError("in forward")
            return x

    class Top(nn.Module):
        def __init__(self):
            super().__init__()
            self.bad = Bad()
            self.bad.register_forward_pre_hook(pre_hook)

        def forward(self, x):
            return self.bad(x)

    m = Top()
    with pytest.raises(KeyError):
        compile(m)(torch.ones(2))
    assert "forward" not in m.bad.__dict__
    with pytest.raises(KeyError):
        m(torch.ones(2))  # and the module still works eagerly
