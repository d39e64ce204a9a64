"""``operator.itemgetter`` / ``attrgetter`` / ``methodcaller`` objects made in the frame."""
from __future__ import annotations

import operator

from ember.capture.variables.base import VariableTracker
from ember.capture.variables.containers import TupleVariable
from ember.capture.variables.tensor import TensorVariable


class OperatorGetterVariable(VariableTracker):
    """``operator.itemgetter(...)`` / ``attrgetter(...)`` / ``methodcaller(...)`` made in the frame."""

    def __init__(self, kind, args, kwargs):
        self.kind = kind
        self.args = list(args)
        self.kwargs = dict(kwargs)

    def describe(self):
        return f"operator.{self.kind.__name__}"

    def truth(self, tx):
        return True

    def call(self, tx, args, kwargs):
        (obj,) = args
        results = []
        if self.kind is operator.methodcaller:
            name = self.args[0].as_constant()
            return tx.getattr(obj, name).call(tx, self.args[1:], self.kwargs)
        for a in self.args:
            if self.kind is operator.itemgetter:
                if isinstance(obj, TensorVariable):
                    results.append(tx.output.call_function(operator.getitem, [obj, a], {}))
                else:
                    results.append(obj.call_method(tx, "__getitem__", [a], {}))
            else:
                value = obj
                for part in a.as_constant().split("."):
                    value = tx.getattr(value, part)
                results.append(value)
        return results[0] if len(results) == 1 else TupleVariable(results)
