"""EMBER_LOGS takes TORCH_LOGS's artifact names: each produces its output."""
import logging

import pytest
import torch

import ember
from ember.report.logs import set_logs


def breaks(x):
    y = x.sin() + 1
    print("break")
    return y.cos()


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(f"{record.name}: {record.getMessage()}")


# TORCH_LOGS name -> text its output must contain
EXPECTED = {
    "graph_breaks": "graph break in breaks",
    "recompiles": "recompiling breaks",
    "guards": "guards for breaks",
    "graph_code": "sin = l_x_.sin()",   # the captured fx graph's code
    "aot_graphs": "aten.sin",    # the AOT layer's forward graph
    "bytecode": "generated entry for breaks",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_torch_logs_name_produces_its_output(name):
    handler = _Collect()
    loggers = [logging.getLogger(f"ember.{n}") for n in
               ("graph_breaks", "recompiles", "guards", "graph", "aot_graphs", "bytecode")]
    for lg in loggers:
        lg.addHandler(handler)
    try:
        set_logs(name)
        compiled = ember.compile(breaks, backend="aot_eager", dynamic=False)
        for n in (2, 3):  # a recompile on the new size
            x = torch.randn(n, requires_grad=True)
            torch.testing.assert_close(compiled(x), breaks(x))
    finally:
        set_logs("")
        for lg in loggers:
            lg.removeHandler(handler)
    text = "\n".join(handler.messages)
    assert EXPECTED[name] in text, text[:2000]
    # only the named artifact is on: the others stay quiet
    assert not [v for k, v in EXPECTED.items() if k != name and v in text]


def test_unknown_name_still_errors_clearly():
    with pytest.raises(ValueError, match=r"unknown EMBER_LOGS artifact\(s\) \['inductor'\].*aot_graphs"):
        set_logs("graph_code,inductor")
