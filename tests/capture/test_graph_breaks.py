"""Graph breaks: where they happen, how many graphs result, and that resume
functions are reused rather than recompiled.

Every test compares with eager (outputs, mutated inputs, gradients) and asserts
the graph count the backend saw. The counts were checked against Dynamo with
``EMBER_TEST_REFERENCE=torch``; a frame that breaks inside a loop is skipped, as
Dynamo skips it (its callees compiled: test_eager_frames.py).

Side effects across breaks: test_graph_breaks_effects.py; explain/fullgraph:
test_graph_breaks_report.py; HuggingFace GPT-2: test_graph_breaks_hf.py.
"""
import copy
import sys

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import (CompileCounter, assert_same, check_module_same, check_same,
                                clone_inputs, compile, stats)


def t(*shape, grad=False, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def run_many(fn, arg_sets, counter=None, compiled=None):
    """Call ``fn`` eagerly and compiled on each argument tuple (fresh copies); compare
    outputs, mutated inputs and input gradients. Returns the counter."""
    counter = counter if counter is not None else CompileCounter()
    compiled = compiled if compiled is not None else compile(fn, backend=counter)
    for args in arg_sets:
        eager_args, comp_args = clone_inputs(args), clone_inputs(args)
        expected = fn(*eager_args)
        actual = compiled(*comp_args)
        assert_same(actual, expected)
        assert_same(comp_args, eager_args, "args after call")
        if isinstance(expected, torch.Tensor) and expected.requires_grad:
            expected.sum().backward()
            actual.sum().backward()
            assert_same([a.grad for a in comp_args if isinstance(a, torch.Tensor)],
                        [a.grad for a in eager_args if isinstance(a, torch.Tensor)], "grads",
                        check_requires_grad=False)
    return counter


# --------------------------------------------------------------------------- #
# the basic breaking constructs
# --------------------------------------------------------------------------- #

class PrintInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(4, 8)
        self.l2 = nn.Linear(8, 3)

    def forward(self, x):
        x = self.l1(x).relu()
        print(x.shape)
        return self.l2(x).tanh()


def test_print_in_forward_gives_exactly_two_graphs(capsys):
    cnt = check_module_same(PrintInForward, t(5, 4, grad=True), graphs=2, fullgraph=False, check_cache=True)
    assert stats()["graph_breaks"] == 1, stats()
    assert stats()["recompiles"] == 0, stats()
    # the first graph has l1 (+relu), the second l2 (+tanh): nothing duplicated, nothing lost
    assert any("l1" in str(tg) or tg is torch._C._nn.linear for tg in cnt.targets(0))
    assert "tanh" in str(cnt.targets(1))
    # eager once, compiled twice (check_cache): the print ran each time, with the same text
    assert capsys.readouterr().out.splitlines() == ["torch.Size([5, 8])"] * 3


def item_in_arithmetic(x):
    y = x * 2
    s = y.sum().item()          # a Python float from here on
    scale = s / 10 + 1
    return y * scale + round(s)


def test_item_used_in_python_arithmetic():
    check_same(item_in_arithmetic, t(3, 4, grad=True), graphs=2, fullgraph=False)
    assert stats()["graph_breaks"] == 1, stats()


def test_item_new_values_are_correct_and_respecialize():
    cnt = run_many(item_in_arithmetic, [(torch.full((3,), float(v)),) for v in (1, 2, 3, 2, 1)])
    # The value of .item() flows into the resume function as a Python float: it recompiles once,
    # then the float is a symbol (automatic dynamic, as Dynamo): 1 root graph + 2 resume graphs.
    assert cnt.frame_count == 3
    assert stats()["recompiles"] == 1, stats()


def tolist_in_python(x):
    y = x.cos()
    vals = y[0].tolist()
    return y * vals[0] + len(vals) + sum(vals)


def test_tolist():
    check_same(tolist_in_python, t(2, 3, grad=True), graphs=2, fullgraph=False)
    assert stats()["graph_breaks"] == 1, stats()


def data_dependent_if(x):
    y = x * 2
    if y.sum() > 0:
        z = y + 1
    else:
        z = y.neg() - 1
    return z.sin()


def test_data_dependent_if_both_branches_and_resume_reused():
    pos, neg = torch.ones(3, requires_grad=True), -torch.ones(3, requires_grad=True)
    cnt = CompileCounter()
    compiled = compile(data_dependent_if, backend=cnt)
    run_many(data_dependent_if, [(pos,), (neg,)], cnt, compiled)
    # the graph before the branch, one resume graph per side
    assert cnt.frame_count == 3
    assert stats()["graph_breaks"] == 1
    before = dict(stats())
    run_many(data_dependent_if, [(pos,), (neg,), (neg,), (pos,)], cnt, compiled)
    # both resume functions are reused, with gradients still flowing through them
    assert cnt.frame_count == 3
    assert stats() == before, (before, stats())


def test_data_dependent_if_repeated_calls_do_not_recompile():
    cnt = CompileCounter()
    compiled = compile(data_dependent_if, backend=cnt)
    for sign in (1, -1, 1, -1, -1, 1):
        x = sign * t(4)
        assert_same(compiled(x), data_dependent_if(x))
    assert cnt.frame_count == 3
    assert stats()["recompiles"] == 0, stats()
    assert stats()["graph_breaks"] == 1, stats()


def two_breaks(x):
    x = x + 1
    print("first")
    x = x * 2
    n = x.sum().item()
    return x - n


def test_two_breaks_in_sequence_three_graphs(capsys):
    check_same(two_breaks, t(3, grad=True), graphs=3, fullgraph=False)
    assert stats()["graph_breaks"] == 2, stats()
    # check_same: eager twice, compiled twice; the print ran exactly once per call
    assert capsys.readouterr().out.count("first") == 4


def print_with_kwargs(x):
    y = x + 1
    print(y.shape, sep=",", end="!\n")
    return y * 2


def print_star_args(x):
    y = x + 1
    parts = (y.shape, "tail")
    print(*parts)
    return y * 2


@pytest.mark.parametrize("fn", [print_with_kwargs, print_star_args], ids=["CALL-kwnames", "CALL_FUNCTION_EX"])
def test_breaking_call_forms(fn, capsys):
    check_same(fn, t(2, 3, grad=True), graphs=2, fullgraph=False)
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and len(set(out)) == 1, out  # once per call (2 eager, 2 compiled)


def early_return_in_branch(x):
    y = x * 2
    if y.sum() > 0:
        return y
    z = y - 1
    return z * 3


def test_return_inside_data_dependent_branch():
    cnt = run_many(early_return_in_branch, [(t(3).abs(),), (-t(3).abs(),)] * 2)
    # the graph before the branch and the `z` graph; the `return y` side has no compute
    assert cnt.frame_count == 2
    assert stats()["recompiles"] == 0


# --------------------------------------------------------------------------- #
# loops
# --------------------------------------------------------------------------- #

def loop_with_print(x):
    for i in range(3):
        x = x * 2
        print("iteration", i)
        x = x + i
    return x


def test_loop_with_break_in_body(capsys):
    cnt = CompileCounter()
    compiled = compile(loop_with_print, backend=cnt)
    run_many(loop_with_print, [(t(4, grad=True),)], cnt, compiled)
    first = cnt.frame_count
    # A break inside a `for` loop skips the whole frame (it runs as it is; the calls in it are
    # print and range, nothing to compile), as Dynamo does.
    assert first == 0 and stats()["fallbacks"] == 1
    # Called again: every entry's guards hold, nothing is compiled.
    run_many(loop_with_print, [(t(4, grad=True, seed=1),)], cnt, compiled)
    assert cnt.frame_count == first
    out = capsys.readouterr().out.splitlines()
    assert out == ["iteration 0", "iteration 1", "iteration 2"] * 4


def test_loop_resume_not_recompiled_on_later_calls():
    cnt = CompileCounter()
    compiled = compile(loop_with_print, backend=cnt)
    x = t(4)
    compiled(x)
    seen, s = cnt.frame_count, dict(stats())
    for _ in range(3):
        assert_same(compiled(x), loop_with_print(x))
    assert cnt.frame_count == seen
    assert stats()["recompiles"] == s["recompiles"]
    assert stats()["frames"] == s["frames"]


class LayerLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x).relu()
            print("layer", i)
        return x


def test_loop_over_modulelist_with_print(capsys):
    cnt = check_module_same(LayerLoop, t(2, 4, grad=True), graphs=None, fullgraph=False, check_cache=True)
    # The whole forward is skipped (a break inside a loop); the Linear layers it calls are torch's
    # own modules, whose frames are not compiled either (as in Dynamo).
    assert cnt.frame_count == 0
    assert capsys.readouterr().out.count("layer 2") == 3


def while_data_dependent(x):
    while x.sum() > 0:
        x = x - 1
    return x * 2


def test_data_dependent_while_loop():
    cnt = run_many(while_data_dependent, [(torch.tensor([2.5, 1.0]),), (torch.tensor([0.5, -1.0]),),
                                          (torch.tensor([4.5, 1.0]),)])
    # the condition is a backward/forward branch on a tensor. 3.11: root graph (first test), loop
    # body graph (x - 1 then the test again), exit graph (x * 2); later iterations reuse them.
    # 3.12+ compile the test twice (at the top, and inverted at the bottom, whose taken side is a
    # JUMP_BACKWARD to the body): the bottom test's break finds that backward jump before any
    # return, so (torch.compile's loop rule) the resume function for the body is skipped and runs
    # as it is: root graph and exit graph only. torch.compile 2.13 counts the same: 3 on 3.11, 2 on
    # 3.12 and 3.13 (frames of CompileCounter, measured in the CI venvs).
    assert cnt.frame_count == (3 if sys.version_info < (3, 12) else 2)
    assert stats()["recompiles"] == 0, stats()


def loop_with_data_dependent_exit(x):
    for i in range(5):
        x = x * 2
        if x.sum() > 10:
            break
        x = x + 1
    return x, i


def test_loop_with_data_dependent_break_statement():
    cnt = run_many(loop_with_data_dependent_exit, [(torch.ones(2),), (torch.ones(2),),
                                                   (torch.full((2,), 3.0),)])
    # 3.11: a break inside a loop skips the frame, as in Dynamo. 3.12+ compile the ``break`` as a
    # copy of the loop's exit (``return x, i``) right after the test, so the loop rule's scan (from
    # the break to the first return) meets that return before the loop's backward jump: the frame
    # breaks and resumes instead. torch.compile 2.13 counts the same: 0 on 3.11, 2 on 3.12 and 3.13.
    assert cnt.frame_count == (0 if sys.version_info < (3, 12) else 2)


# --------------------------------------------------------------------------- #
# breaks inside called functions and submodules
# --------------------------------------------------------------------------- #

def helper_that_prints(y):
    y = y + 1
    print("in helper")
    return y * 2


def calls_helper(x):
    x = x.sin()
    x = helper_that_prints(x)
    return x.cos()


@pytest.mark.usefixtures("without_nested_breaks")
def test_break_inside_helper_compiles_helper_separately(capsys):
    cnt = check_same(calls_helper, t(3, grad=True), graphs=4, fullgraph=False)
    # calls_helper before the call | helper before print | helper after | calls_helper after
    ops = [str(cnt.targets(i)) for i in range(4)]
    assert "sin" in ops[0] and "cos" not in ops[0]
    assert "add" in ops[1] and "mul" not in ops[1]
    assert "mul" in ops[2] and "add" not in ops[2]
    assert "cos" in ops[3] and "sin" not in ops[3]
    assert stats()["graph_breaks"] == 2, stats()  # the call site, and the print in the helper
    assert capsys.readouterr().out.count("in helper") == 4  # once per call (2 eager, 2 compiled)


def calls_helper_twice(x):
    a = helper_that_prints(x)
    b = helper_that_prints(a)
    return a + b


def test_helper_called_twice_is_compiled_once():
    # the helper's two graphs are shared by both call sites; + the final `a + b`
    check_same(calls_helper_twice, t(3, grad=True), graphs=3, fullgraph=False)


def innermost(z):
    z = z + 1
    print("innermost")
    return z * 2


def middle(y, scale=1):
    y = y.sin()
    y = innermost(y) * scale
    return y.cos()


def outermost(x):
    x = x + 3
    x = middle(x, scale=2)
    return x - 1


def outermost_star(x):
    args, kwargs = (x,), {"scale": 3}
    return middle(*args, **kwargs) + 1


@pytest.mark.usefixtures("without_nested_breaks")
def test_break_two_helpers_deep():
    # each of the three frames is split in two
    check_same(outermost, t(3, grad=True), graphs=6, fullgraph=False)
    assert stats()["recompiles"] == 0


@pytest.mark.usefixtures("without_nested_breaks")
def test_break_inside_helper_called_with_star_args():
    # middle's 2 graphs + innermost's 2 + outermost_star's `+ 1`
    check_same(outermost_star, t(3, grad=True), graphs=5, fullgraph=False)


def helper_with_branch(y):
    if y.sum() > 0:
        return y * 2
    return y * 3


def calls_branching_helper(x):
    return helper_with_branch(x + 1) - 1


@pytest.mark.usefixtures("without_nested_breaks")
def test_data_dependent_branch_inside_helper():
    cnt = run_many(calls_branching_helper, [(torch.ones(2),), (-3 * torch.ones(2),)] * 2)
    # x + 1 | helper: (nothing before the branch) y * 2 | y * 3 | - 1: the same as Dynamo
    assert cnt.frame_count == 5
    assert stats()["recompiles"] == 0


class SubWithPrints(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        print("in sub.forward")
        return y.relu()

    def scaled(self, x):
        y = x * 3
        print("in sub.scaled")
        return y - 1


class CallsSubMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = SubWithPrints()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        x = x.sin()
        x = self.sub.scaled(x)
        return self.out(x)


class CallsSubForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = SubWithPrints()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        x = x.sin()
        x = self.sub(x)
        return self.out(x)


@pytest.mark.usefixtures("without_nested_breaks")
def test_break_inside_method_of_submodule(capsys):
    # sin | sub.scaled: x * 3 | y - 1 | out: the method is compiled on its own (as in Dynamo)
    check_module_same(CallsSubMethod, t(2, 4, grad=True), graphs=4, fullgraph=False, check_cache=True)
    assert stats()["recompiles"] == 0
    assert capsys.readouterr().out.count("in sub.scaled") == 3


def test_break_inside_submodule_forward_matches_eager(capsys):
    check_module_same(CallsSubForward, t(2, 4, grad=True), graphs=None, fullgraph=False, check_cache=True)
    assert stats()["graph_breaks"] >= 1
    assert stats()["recompiles"] == 0
    assert capsys.readouterr().out.count("in sub.forward") == 3


@pytest.mark.usefixtures("without_nested_breaks")
def test_break_inside_submodule_forward_compiles_submodule_separately():
    cnt = check_module_same(CallsSubForward, t(2, 4, grad=True), graphs=None, fullgraph=False)
    # Top before the call (sin) | sub.forward: lin | relu | Top after (out)
    assert cnt.frame_count == 4
    assert any(tg is torch._C._nn.linear or "lin" in str(tg) for i in range(cnt.frame_count)
               for tg in cnt.targets(i) if "relu" not in str(cnt.targets(i)))


# --------------------------------------------------------------------------- #
# reuse on the second call
# --------------------------------------------------------------------------- #

@pytest.mark.parametrize("fn,n_graphs", [(item_in_arithmetic, 2), (tolist_in_python, 2),
                                         (two_breaks, 3), (calls_helper, 4), (outermost, 6)],
                         ids=["item", "tolist", "two_breaks", "helper", "two_deep"])
@pytest.mark.usefixtures("without_nested_breaks")
def test_resume_function_reused_on_second_call(fn, n_graphs, capsys):
    cnt = CompileCounter()
    compiled = compile(fn, backend=cnt)
    x = t(2, 3)
    assert_same(compiled(x), fn(x))
    assert cnt.frame_count == n_graphs
    first = dict(stats())
    for _ in range(2):
        x2 = t(2, 3)  # same values: .item()/.tolist() results are the same floats
        assert_same(compiled(x2), fn(x2))
    assert cnt.frame_count == n_graphs
    assert stats()["recompiles"] == 0, stats()
    assert stats()["frames"] == first["frames"], (first, stats())
    assert stats()["graph_breaks"] == first["graph_breaks"], (first, stats())


@pytest.mark.usefixtures("without_nested_breaks")
def test_new_input_values_reuse_graphs_when_no_scalar_escapes():
    # values change, shapes don't: print/branch breaks need no recompilation
    cnt = CompileCounter()
    compiled = compile(calls_helper, backend=cnt)
    for seed in range(4):
        x = t(5, seed=seed)
        assert_same(compiled(x), calls_helper(x))
    assert cnt.frame_count == 4
    assert stats()["recompiles"] == 0
    # a new shape recompiles each frame once (4 more graphs), not more
    x = t(7)
    assert_same(compiled(x), calls_helper(x))
    assert cnt.frame_count == 8
