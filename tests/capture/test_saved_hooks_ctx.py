"""``torch.autograd.graph.disable_saved_tensors_hooks(message)`` traced as a context manager of its
own (with and as a decorator), against eager: outputs, the state read inside and left after, a
graph break inside the block. As in torch.compile, the node that disables goes where the manager
was made when nothing traced in between can observe the state."""
import pytest
import torch

from ember_test_helpers import REFERENCE, CompileCounter, compile, reset

_A = torch._C._autograd


def state():
    return _A._saved_tensors_hooks_get_disabled_error_message()


@pytest.fixture(autouse=True)
def _fresh():
    reset()
    _A._saved_tensors_hooks_enable()
    yield
    _A._saved_tensors_hooks_enable()
    reset()


def decorated_nested(z):
    @torch.autograd.graph.disable_saved_tensors_hooks("outer")
    def f(x, y):
        @torch.autograd.graph.disable_saved_tensors_hooks("inner")
        def inner(x, y):
            return x + y, state()
        out, seen = inner(x, y)
        return out + x, seen, state()

    x, y = torch.ones(1), z * 2
    return f(x, y), state()


def with_block(z):
    with torch.autograd.graph.disable_saved_tensors_hooks("block"):
        y = z.sin()
        inside = state()
    return y.cos(), inside, state()


def called_twice(z):
    @torch.autograd.graph.disable_saved_tensors_hooks("twice")
    def f(x):
        return x * 2, state()
    return f(z), f(z + 1), state()


def entered_twice(z):
    cm = torch.autograd.graph.disable_saved_tensors_hooks("once")
    with cm:
        y = z + 1
    with cm:  # eager: AttributeError (its generator's arguments are gone)
        y = y + 1
    return y


SEEN = []


@torch.compiler.disable
def record_state():
    SEEN.append(state())


def break_inside(z):
    with torch.autograd.graph.disable_saved_tensors_hooks("broken"):
        y = z + 1
        record_state()  # a graph break: runs eagerly inside the block
        y = y * 2
        inside = state()
    return y, inside, state()


def run(fn, *args):
    try:
        return "ok", fn(*args)
    except Exception as e:  # noqa: BLE001 — compared with eager's
        return "raised", type(e).__name__, str(e)


def same(a, b):
    if isinstance(a, torch.Tensor):
        assert torch.equal(a, b)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b


@pytest.mark.skipif(REFERENCE, reason="torch.compile cannot trace the torch._C._autograd query in the frame")
@pytest.mark.parametrize("outer", [None, "previously disabled"])
@pytest.mark.parametrize("program", [decorated_nested, with_block, called_twice, entered_twice, break_inside])
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_disable_saved_tensors_hooks_matches_eager(program, outer, backend):
    def under_outer(fn, z):
        if outer is None:
            return run(fn, z), state()
        with torch.autograd.graph.disable_saved_tensors_hooks(outer):
            return run(fn, z), state()
    z = torch.randn(1)
    SEEN.clear()
    expected = under_outer(program, z)
    seen_eager = list(SEEN)
    compiled = compile(program, backend=backend)
    for _ in range(2):
        SEEN.clear()
        same(under_outer(compiled, z), expected)
        assert SEEN == seen_eager
        assert state() is None


@pytest.mark.skipif(REFERENCE, reason="checks where ember's graph puts the node")
def test_disable_node_goes_where_the_decorator_was_made():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm

    out = compile(decorated_nested, backend=backend, fullgraph=True)(torch.ones(1))
    assert torch.equal(out[0][0], decorated_nested(torch.ones(1))[0][0])
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function"]
    names = [getattr(n.target, "__name__", str(n.target)) for n in calls]
    args = [n.args for n in calls]
    # the outer decorator's node comes first (before ones), the inner one's right after `y = z * 2`
    assert names[0] == "_saved_tensors_hooks_disable" and args[0] == ("outer",)
    assert names[1] == "ones"
    inner = args.index(("inner",))
    assert names[inner - 1] == "mul"


def reads_between(z):
    cm = torch.autograd.graph.disable_saved_tensors_hooks("late")
    before = state()  # observes the state: the node must not move before this read
    with cm:
        y = z + 1
    return y, before


@pytest.mark.skipif(REFERENCE, reason="torch.compile cannot trace the torch._C._autograd query in the frame")
def test_node_not_moved_past_a_read_of_the_state():
    cnt = CompileCounter()
    assert run(compile(reads_between, backend=cnt), torch.ones(1))[1][1] is None
    with torch.autograd.graph.disable_saved_tensors_hooks("outer"):
        assert run(compile(reads_between, backend=cnt), torch.ones(1))[1][1] == "outer"
