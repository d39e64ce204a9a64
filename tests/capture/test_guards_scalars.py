"""Python scalars are guarded by value only when the trace uses the value.

An int or float argument (of the compiled function, or handed to a resume function after a
graph break — e.g. ``loss.item()``) that only flows on as data (returned, formatted, stored,
passed to the next resume function) is rebuilt from where it came from; a new value must not
recompile. A value the graph or the control flow depends on is guarded (and recompiles).
"""
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile, stats


def test_training_loop_logging_item_does_not_recompile(capsys):
    def make():
        torch.manual_seed(0)
        model = nn.Linear(4, 1)
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    def step(model, x, y):
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        v = loss.item()
        print(f"loss {v:.4f}")
        return loss * 2, v

    results = []
    for compiled in (False, True):
        model, opt = make()
        fn = compile(step, backend=CompileCounter()) if compiled else step
        g = torch.Generator().manual_seed(1)
        out = []
        for _ in range(20):
            x, y = torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)
            opt.zero_grad()
            out.append(fn(model, x, y))
            opt.step()
        results.append((out, [p.detach().clone() for p in model.parameters()], capsys.readouterr().out))
    (eager_out, eager_params, eager_log), (comp_out, comp_params, comp_log) = results
    assert_same(comp_out, eager_out)
    assert_same(comp_params, eager_params)
    assert comp_log == eager_log
    assert len(set(v for _, v in eager_out)) == 20  # the logged value really changed every step
    assert stats()["recompiles"] == 0
    assert stats()["fallbacks"] == 0


def test_unused_and_returned_scalar_arguments_do_not_recompile():
    def f(x, lr, n):
        return x * 2, lr, f"{n}-{lr:.2f}", [n]

    compiled = compile(f, backend=CompileCounter())
    x = torch.randn(3)
    for lr, n in [(0.1, 1), (0.2, 2), (0.3, 3), (1e-3, 7)]:
        assert_same(compiled(x, lr, n), f(x, lr, n))
    assert stats()["recompiles"] == 0


def test_scalar_in_branch_is_guarded():
    def f(x, v):
        if v > 1.0:
            return x + 1
        return x - 1

    compiled = compile(f, backend=CompileCounter())
    x = torch.randn(3)
    for v in [2.0, 0.5, 3.0, 0.0]:
        assert_same(compiled(x, v), f(x, v))


def test_scalar_in_tensor_op_and_shape_is_guarded():
    def f(x, v, n):
        return x * v + torch.ones(n).sum()

    compiled = compile(f, backend=CompileCounter())
    x = torch.randn(3)
    for v, n in [(2.0, 2), (0.5, 2), (0.5, 4)]:
        assert_same(compiled(x, v, n), f(x, v, n))


def test_item_after_break_used_in_branch_is_guarded():
    def f(x):
        v = x.sum().item()
        y = x * 2
        if v > 0:
            return y + 1
        return y - 1

    compiled = compile(f, backend=CompileCounter())
    for sign in [1.0, -1.0, 1.0, -1.0]:
        x = torch.full((3,), sign)
        assert_same(compiled(x), f(x))


def test_item_after_break_formatted_and_returned():
    def f(x):
        v = x.sum().item()
        s = f"sum={v:.3f} n={int(x.shape[0])}"
        return x * 2, s, v

    compiled = compile(f, backend=CompileCounter())
    for seed in range(12):  # more distinct values than the recompile limit
        x = torch.randn(3, generator=torch.Generator().manual_seed(seed))
        assert_same(compiled(x), f(x))
    assert stats()["recompiles"] == 0
    assert stats()["fallbacks"] == 0


def test_arithmetic_on_unused_scalar_stays_unguarded():
    def f(x, step):
        y = x * 2
        print("", end="")  # a graph break: `step` goes on to the resume function
        return y, step + 1, 2 * step - 1.5

    compiled = compile(f, backend=CompileCounter())
    for step in range(12):
        x = torch.randn(3, generator=torch.Generator().manual_seed(step))
        assert_same(compiled(x, step), f(x, step))
    assert stats()["recompiles"] == 0


def test_arithmetic_result_used_in_graph_is_guarded():
    def f(x, step):
        return x * (step + 1), step / 2

    compiled = compile(f, backend=CompileCounter())
    x = torch.randn(3)
    for step in (0, 1, 2, 1):
        assert_same(compiled(x, step), f(x, step))


COUNTER = 0


def test_unguarded_scalar_is_read_before_side_effects():
    """A scalar passed on unread is still the value the frame read: taken before the frame's own
    writes replay (a global or attribute the frame then overwrites)."""
    def f(x):
        global COUNTER
        old = COUNTER
        COUNTER = old + 1
        return old

    class Holder:
        n = 0.5

    h = Holder()

    def g(x):
        old = h.n
        h.n = 2.0
        print("", end="")
        return x * 2, old, f"{old}"

    global COUNTER
    COUNTER = 0
    compiled = compile(f, backend=CompileCounter())
    x = torch.randn(2)
    assert [compiled(x) for _ in range(3)] == [0, 1, 2] and COUNTER == 3
    cg = compile(g, backend=CompileCounter())
    for value in (0.5, 0.25, 1.5):
        h.n = value
        out = cg(x)
        assert out[1:] == (value, str(value)) and h.n == 2.0


OLD_LIST = [1]
OLD_TENSOR = torch.ones(2)


def test_objects_returned_are_those_read_before_the_frames_writes():
    """Any value from outside that the frame returns or passes on unchanged (a list, a tensor) is
    the one it read, even when the frame then rebinds where it came from."""
    def f(x):
        global OLD_LIST, OLD_TENSOR
        old_list, old_tensor = OLD_LIST, OLD_TENSOR
        OLD_LIST, OLD_TENSOR = [2], x * 3
        return old_list, old_tensor

    global OLD_LIST, OLD_TENSOR
    x = torch.randn(2)
    first_list, first_tensor = OLD_LIST, OLD_TENSOR
    out = compile(f, backend=CompileCounter())(x)
    assert out[0] is first_list and out[1] is first_tensor
    assert OLD_LIST == [2]
    assert_same(OLD_TENSOR, x * 3)


LOG = []


def test_list_only_appended_to_is_not_guarded_by_length():
    """A log list the frame appends to (and never reads) grows every call: no recompiles; a list
    the frame reads is guarded as before."""
    def f(x):
        LOG.append(x.sum().item())
        LOG.append("step")
        return x * 2

    LOG.clear()
    compiled = compile(f, backend=CompileCounter())
    expected = []
    for seed in range(12):
        x = torch.randn(2, generator=torch.Generator().manual_seed(seed))
        assert_same(compiled(x), x * 2)
        expected += [x.sum().item(), "step"]
    assert LOG == expected
    assert stats()["recompiles"] == 0 and stats()["fallbacks"] == 0

    def g(x):
        LOG.append(1)
        return x * len(LOG), LOG[-1]

    LOG.clear()
    cg = compile(g, backend=CompileCounter())
    got = [cg(torch.ones(1)) for _ in range(3)]
    LOG.clear()
    want = [g(torch.ones(1)) for _ in range(3)]
    assert_same(got, want)
