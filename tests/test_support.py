"""An unsupported Python or torch gets one clear message naming the supported versions."""
import sys
import warnings

import pytest
import torch

import ember
from ember import support


def test_running_versions_are_supported():
    support.check_supported()  # (the test suite runs on a supported Python)
    assert sys.version_info[:2] in support.SUPPORTED_PYTHON


def test_unsupported_python_raises_at_compile_naming_supported_versions(monkeypatch):
    monkeypatch.setattr(support, "SUPPORTED_PYTHON", ((3, 10),))
    with pytest.raises(support.UnsupportedVersion) as info:
        ember.compile(lambda x: x + 1)
    message = str(info.value)
    assert f"Python {sys.version_info[0]}.{sys.version_info[1]}" in message and "Python 3.10" in message


def test_unsupported_python_in_check():
    with pytest.raises(support.UnsupportedVersion, match=r"ember does not support Python 3\.99: it supports Python 3\.11"):
        support.check_supported(python=(3, 99), torch_version=torch.__version__)


def test_untested_torch_warns_once_and_compiles(monkeypatch):
    monkeypatch.setattr(support, "_warned_torch", False)
    monkeypatch.delenv("EMBER_STRICT_VERSIONS", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        support.check_supported(torch_version="2.99.0+cpu")
        support.check_supported(torch_version="2.99.0+cpu")
    messages = [str(w.message) for w in caught if "torch 2.99.0+cpu" in str(w.message)]
    assert len(messages) == 1 and "supports Python" in messages[0] and "torch 2.13" in messages[0]
    monkeypatch.setenv("EMBER_STRICT_VERSIONS", "1")
    with pytest.raises(support.UnsupportedVersion, match="torch 2.99.0"):
        support.check_supported(torch_version="2.99.0+cpu")


def test_supported_torch_is_the_installed_one():
    assert support._torch_minor(torch.__version__) in support.SUPPORTED_TORCH
