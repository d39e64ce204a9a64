"""Skipped frames (capture/eager_frames.py): a frame with a graph break inside a loop, one marked
``torch.compiler.disable(recursive=False)``, a generator's body, and a frame with no tensor
operation run as they are, while the Python functions they call are compiled — the counts
torch.compile gives (checked with EMBER_TEST_REFERENCE=torch). Every test compares with eager:
results, side effects, exceptions."""
import torch
import torch.nn as nn

from ember_test_helpers import REFERENCE, CompileCounter, assert_same, compile, reset, stats


def inner(x):
    return torch.sin(x)


def test_break_in_for_loop_skips_the_frame_and_compiles_the_callee():
    calls = []

    def fn(x):
        for i in range(20):
            calls.append(i)
            inner(x)
            torch._dynamo.graph_break()
        return x + 1

    reset()
    cnt = CompileCounter()
    x = torch.randn(4)
    out = compile(fn, backend=cnt)(x)
    want_calls = list(calls)
    calls.clear()
    assert_same(out, fn(x))
    assert calls == want_calls
    # fn runs as it is (its x + 1 is no graph); inner is compiled once, as its own frame
    assert (cnt.frame_count, cnt.op_count) == (1, 1)
    compile(fn, backend=cnt)(x)
    assert cnt.frame_count == 1


def test_break_in_while_loop_keeps_every_iteration_and_local():
    def fn(x):
        i, seen = 20, []
        while i > 10:
            x = inner(x)
            i -= 1
            seen.append(i)
            torch._dynamo.graph_break()
        return x, i, seen

    reset()
    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 1)


def test_break_in_a_loop_of_a_callee_skips_only_the_callee():
    def loop(x):
        for _ in range(3):
            x += 1
            torch._dynamo.graph_break()
        return x

    def fn(x):
        x += 2
        loop(x)
        x += 3
        return x

    reset()
    cnt = CompileCounter()
    x, y = torch.randn(4), None
    y = x.clone()
    assert_same(compile(fn, backend=cnt)(x), fn(y))
    assert_same(x, y)
    # fn's graph before the call and its resume function's after it; the callee runs as it is
    assert (cnt.frame_count, cnt.op_count) == (2, 2)


def test_break_after_a_loop_still_resumes_compiled():
    def fn(x):
        torch._dynamo.graph_break()
        for _ in range(10):
            x = inner(x)
        return x

    reset()
    cnt = CompileCounter()
    x = torch.randn(4)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 10)


def test_data_dependent_branch_in_a_loop():
    def step(x):
        return x * 2 - 1

    def fn(x):
        for _ in range(4):
            if x.sum() > 0:
                x = step(x)
            else:
                x = x + 3
        return x

    reset()
    cnt = CompileCounter()
    for seed in range(3):
        x = torch.randn(4, generator=torch.Generator().manual_seed(seed))
        assert_same(compile(fn, backend=cnt)(x), fn(x))
    # (step is compiled once; fn's own arithmetic runs eagerly)
    assert cnt.frame_count == 1


def test_exception_from_a_callee_in_a_skipped_frame():
    def check(x, i):
        if i == 2:
            raise ValueError(f"bad {i}")
        return x + i

    def fn(x):
        out = []
        for i in range(4):
            try:
                out.append(check(x, i))
            except ValueError as e:
                out.append(str(e))
            torch._dynamo.graph_break()
        check(x, 2)

    reset()
    x = torch.ones(2)
    compiled = compile(fn, backend=CompileCounter())
    try:
        compiled(x)
    except ValueError as e:
        got = e.args
    try:
        fn(x)
    except ValueError as e:
        want = e.args
    assert got == want == ("bad 2",)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x).relu()


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
            torch._dynamo.graph_break()
        return x


def test_module_loop_with_break_compiles_each_user_block():
    torch.manual_seed(0)
    m = Stack()
    reset()
    cnt = CompileCounter()
    x = torch.randn(2, 4, requires_grad=True)
    out = compile(m, backend=cnt)(x)
    want = m(x)
    assert_same(out, want)
    out.sum().backward()
    g = x.grad.clone()
    x.grad = None
    want.sum().backward()
    assert_same(g, x.grad)
    # the blocks share their class's forward: one graph (linear + relu) for all three
    assert cnt.frame_count == 1 and cnt.op_count == 2


def test_nonrecursive_disable_compiles_what_it_calls():
    def helper(x):
        return torch.cos(x) * 2

    @torch.compiler.disable(recursive=False)
    def skipped(x):
        return helper(x) + 1

    def fn(x):
        return skipped(x) - 1

    reset()
    cnt = CompileCounter()
    x = torch.randn(3)
    assert_same(compile(fn, backend=cnt)(x), fn(x))
    # fn's graph after the break (- 1) and helper's own; skipped's + 1 runs eagerly
    assert (cnt.frame_count, cnt.op_count) == (2, 3)
    # compiling the marked function itself compiles its body, as torch.compile unwraps it
    reset()
    cnt = CompileCounter()
    assert_same(compile(skipped, backend=cnt)(x), skipped(x))
    assert (cnt.frame_count, cnt.op_count) == (1, 3)


def accumulate(iterable, func=lambda x, y: x + y):
    it = iter(iterable)
    try:
        acc = next(it)
    except StopIteration:
        return
    yield acc
    for element in it:
        acc = func(acc, element)
        yield acc


def test_returned_generator_body_calls_compiled_functions():
    def fn(it):
        return accumulate(it)

    reset()
    cnt = CompileCounter()
    items = [torch.tensor([float(i)]) for i in range(4)]
    gen = compile(fn, backend=cnt)(items)
    assert_same(list(gen), list(fn(items)))
    assert cnt.frame_count == 1  # the lambda, compiled when the generator first calls it


def test_frame_without_tensor_ops_still_compiles_its_callees():
    log = []

    def work(x):
        return x.exp() + 1

    def lazy(xs):
        for x in xs:
            log.append("item")
            yield work(x)

    def fn(xs):
        log.append("fn")
        return lazy(xs)

    reset()
    cnt = CompileCounter()
    xs = [torch.randn(3), torch.randn(3)]
    compiled = compile(fn, backend=cnt)
    got = compiled(xs)
    if not REFERENCE:  # (torch.compile runs the generator to its end here, unlike eager)
        assert log == ["fn"]  # nothing of the generator ran yet
    got = list(got)
    assert log == ["fn", "item", "item"]
    log.clear()
    assert_same(got, list(fn(xs)))
    assert cnt.frame_count == 1  # work, compiled once when the generator called it
    if not REFERENCE:
        assert stats()["graph_breaks"] == 0
