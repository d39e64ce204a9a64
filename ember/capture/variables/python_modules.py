"""Python modules as values: ``PythonModuleVariable`` (``math``, ``torch.nn.functional``, a user's
module). Attribute reads go through the module's ``__dict__`` (writes of the frame first), guarded by
identity where the program could rebind them; writes are recorded like global stores.
"""
from __future__ import annotations

import types

from ember.capture.sources import AttrSource, ConstSource
from ember.capture.variables.base import VariableTracker, unsupported
from ember.capture.variables.objects import MissingAttribute, _guard_absent


class PythonModuleVariable(VariableTracker):
    def __init__(self, module: types.ModuleType, source=None):
        self.module = module
        self.source = source

    def python_type(self):
        return types.ModuleType

    def describe(self):
        return f"module {self.module.__name__}"

    def truth(self, tx):
        return True

    def getattr(self, tx, name):
        from ember.capture.builder import wrap
        # torch's own namespaces are assumed not to be monkeypatched (as Dynamo does).
        trusted = self.module.__name__.split(".")[0] in ("torch", "math", "operator", "functools",
                                                         "itertools", "collections", "typing")
        pending = tx.side_effects.load_global(self.module.__dict__, name)  # written in this frame
        if pending is not None:
            return pending
        if not hasattr(self.module, name):
            if not trusted:
                _guard_absent(tx, self.source, self.module, name)
            raise MissingAttribute(f"module '{self.module.__name__}' has no attribute '{name}'")
        value = getattr(self.module, name)
        if trusted and self.source is not None and callable(value):
            from ember.capture.skipfiles import torch_file
            if not torch_file(tx.code.co_filename):
                # the program's own `F.relu` or `math.floor`: a later `math.floor = my_floor` must
                # recompile, as torch.compile's guard does (torch's own code reading its
                # namespaces is trusted, as Dynamo does)
                tx.guards.id_match(AttrSource(self.source, name), value)
        if trusted and self.module.__name__.startswith("torch.backends") \
                and type(value) in (bool, int, float, str, type(None)):
            # a backend flag the program may switch (torch.backends.cudnn.enabled = False): its
            # value, guarded where the trace uses it (torch guards it too)
            base = self.source if self.source is not None else ConstSource(self.module, self.module.__name__)
            return wrap(tx, value, AttrSource(base, name))
        return wrap(tx, value, None if trusted or self.source is None else AttrSource(self.source, name))

    def setattr(self, tx, name, value):
        """``mod.counter = ...``: a write to the module's globals, replayed after the graph (functions
        of that module read it as a global, and see the recorded value in the rest of the trace)."""
        if self.module.__name__.split(".")[0] in ("torch", "builtins", "math", "operator"):
            raise unsupported("EB0032", f"assigning {self.module.__name__}.{name}")
        if type(self.module) is not types.ModuleType or getattr(type(self.module), "__setattr__", None) \
                is not types.ModuleType.__setattr__:
            raise unsupported("EB0032", f"assigning {name!r} on module {self.module.__name__} of a custom type")
        self.tx_store(tx, name, value)

    def tx_store(self, tx, name, value):
        from ember.capture.sources import GlobalSource
        g = self.module.__dict__
        tx.side_effects.store_global(g, name, value, GlobalSource(g, name, top=g is tx.top_globals))
