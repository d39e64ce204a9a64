"""Container behaviours from PyTorch's test_dicts.py / test_list.py / test_sets.py, compared with
eager: guards on dicts keyed by objects, and the fixes made for those suites."""
import torch

from ember_test_helpers import CompileCounter, assert_same, compile


def test_dict_keyed_by_modules_guards_key_order():
    # torch.compile guards the key order of a dict whose keys are objects: the same keys in
    # another order are a new graph (and the answer stays right either way)
    def fn(d, m):
        return d[m](torch.ones(2, 2))

    x, y, z = (torch.nn.Linear(2, 2) for _ in range(3))
    counter = CompileCounter()
    opt = compile(fn, backend=counter)
    d1 = {x: y, 3: z}
    assert_same(opt(d1, x), fn(d1, x))
    assert_same(opt(d1, x), fn(d1, x))
    assert counter.frame_count == 1
    d2 = {3: z, x: y}
    assert_same(opt(d2, x), fn(d2, x))
    assert counter.frame_count == 2
