"""The AttributeError texts ember writes for objects it models are CPython's own, on every version."""
import pytest

from ember.capture.variables import attr_messages


class Slotted:
    __slots__ = ("a",)


class Plain:
    pass


def _message(action):
    with pytest.raises(AttributeError) as info:
        action()
    return str(info.value)


def test_unset_slot_matches_cpython():
    assert attr_messages.unset_slot(Slotted, "a") == _message(lambda: Slotted().a)


def test_setting_a_non_slot_matches_cpython():
    assert attr_messages.cannot_set(Slotted, "zz") == _message(lambda: setattr(Slotted(), "zz", 1))
    assert attr_messages.cannot_set(Slotted, "zz") == _message(lambda: delattr(Slotted(), "zz"))


def test_missing_matches_cpython():
    assert attr_messages.missing(Plain, "q") == _message(lambda: Plain().q)
    assert attr_messages.missing(Slotted, "q") == _message(lambda: Slotted().q)
