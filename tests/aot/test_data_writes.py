"""Writes through ``Tensor.data`` (manual SGD ``p.data.add_``, WGAN clipping ``p.data.clamp_``) compile,
and as in eager they leave the input's version counter alone: a backward that saved the tensor
earlier still runs (ember/aot/data_writes.py). The frame used to run eagerly for any ``.data`` of an
input that requires grad."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from ember_test_helpers import CompileCounter, assert_same, compile, stats


def _model():
    torch.manual_seed(0)
    m = nn.Linear(3, 2)
    for p in m.parameters():
        p.grad = torch.full_like(p, 0.5)
    return m


def _run_both(fn_of_model, backend, calls=2):
    """Eager and compiled on equal models; a forward taken before the calls is backpropagated after."""
    results = []
    for compiled in (False, True):
        m = _model()
        x = torch.ones(1, 3, requires_grad=True)
        saved = m(x)  # saves m.weight for its backward
        f = fn_of_model(m)
        cnt = CompileCounter()
        run = compile(f, backend=cnt if backend == "eager" else backend) if compiled else f
        versions = [p._version for p in m.parameters()]
        outs = [run(0.1 * (i + 1)) for i in range(calls)]
        bumped = [p._version != v for p, v in zip(m.parameters(), versions)]
        saved.sum().backward()
        results.append((outs, [p.detach().clone() for p in m.parameters()], bumped, x.grad, cnt.frame_count))
    return results


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_manual_sgd_through_data_compiles_and_keeps_versions(backend):
    def make(m):
        def step(lr):
            for p in m.parameters():
                p.data.add_(-lr * p.grad.data)
            return m(torch.ones(1, 3)), m.weight.is_leaf
        return step

    (e_out, e_params, e_bumped, e_xgrad, _), (c_out, c_params, c_bumped, c_xgrad, graphs) = _run_both(make, backend)
    assert_same(c_out, e_out)
    assert_same(c_params, e_params)
    assert c_bumped == e_bumped == [False, False]
    assert_same(c_xgrad, e_xgrad)
    assert stats()["fallbacks"] == 0
    if backend == "eager":
        assert graphs >= 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_clamp_and_view_writes_through_data(backend):
    def make(m):
        def clip(c):
            for p in m.parameters():
                p.data.clamp_(-c, c)
            m.weight.data[0].zero_()
            m.bias.data[1:] = 0.25
            return m.weight * 1
        return clip

    (e_out, e_params, e_bumped, e_xgrad, _), (c_out, c_params, c_bumped, c_xgrad, _) = _run_both(make, backend)
    assert_same(c_out, e_out)
    assert_same(c_params, e_params)
    assert c_bumped == e_bumped == [False, False]
    assert_same(c_xgrad, e_xgrad)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_direct_write_still_bumps_the_version(backend):
    def make(m):
        def step(lr):
            m.weight.data.mul_(0.5)
            with torch.no_grad():
                m.bias.sub_(lr)
            return m.bias * 1
        return step

    results = []
    for compiled in (False, True):
        m = _model()
        x = torch.ones(1, 3, requires_grad=True)
        saved = m(x)
        f = make(m)
        run = compile(f, backend=backend) if compiled else f
        versions = [p._version for p in m.parameters()]
        out = run(0.1)
        bumped = [p._version != v for p, v in zip(m.parameters(), versions)]
        # m.bias was written directly: eager's backward saved nothing of the bias, so it still runs
        saved.sum().backward()
        results.append((out, bumped, x.grad, [p.detach().clone() for p in m.parameters()]))
    (e_out, e_bumped, e_xgrad, e_params), (c_out, c_bumped, c_xgrad, c_params) = results
    assert e_bumped == [False, True]
    assert c_bumped == e_bumped
    assert_same(c_out, e_out)
    assert_same(c_xgrad, e_xgrad)
    assert_same(c_params, e_params)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batchnorm_eval_then_train_backpropagates_through_both(backend, momentum):
    """Batch norm's running-stat updates bump no version in eager: the eval call's backward (which
    saved the running stats) still runs after a train call updated them."""
    results = []
    for compiled in (False, True):
        torch.manual_seed(0)
        bn = nn.BatchNorm1d(2, momentum=momentum)
        run = compile(bn, backend=backend) if compiled else bn
        x = torch.randn(5, 2, requires_grad=True)
        versions = [bn.running_mean._version, bn.running_var._version]
        bn.eval()
        a = run(x)
        bn.train()
        b = run(x)
        (a.sum() + b.pow(2).sum()).backward()
        bumped = [bn.running_mean._version != versions[0], bn.running_var._version != versions[1]]
        results.append((a, b, x.grad, bn.weight.grad, bn.running_mean, bn.running_var, bn.num_batches_tracked, bumped))
    assert results[1][-1] == results[0][-1] == [False, False]
    assert_same(results[1][:-1], results[0][:-1])
