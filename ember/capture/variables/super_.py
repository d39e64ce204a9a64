"""``super()`` inside inlined methods."""
from __future__ import annotations

import types

from ember.capture.variables.base import VariableTracker, unsupported


class SuperVariable(VariableTracker):
    def __init__(self, cls: type, obj: VariableTracker):
        self.cls = cls
        self.obj = obj

    def describe(self):
        return f"super({self.cls.__name__})"

    def getattr(self, tx, name):
        from ember.capture.builder import wrap
        from ember.capture.variables.functions import UserFunctionVariable, UserMethodVariable
        real_type = self.obj.python_type()
        mro = real_type.__mro__
        start = mro.index(self.cls) + 1 if self.cls in mro else len(mro)
        for klass in mro[start:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if isinstance(attr, types.FunctionType):
                    return UserMethodVariable(UserFunctionVariable(attr), self.obj)
                if isinstance(attr, property):
                    return UserFunctionVariable(attr.fget).call(tx, [self.obj], {})
                if isinstance(attr, staticmethod):
                    return wrap(tx, attr.__func__, None)
                if attr is object.__init__ or isinstance(attr, (types.WrapperDescriptorType,)):
                    raise unsupported(f"super().{name} resolves to a builtin slot")
                return wrap(tx, attr, None)
        raise unsupported(f"super() has no attribute {name!r}")
