"""Test-wide setup: strict ember, a clean compiler state per test, slow tests.

* ``ember.config.strict = True``: internal compiler errors raise instead of
  silently falling back to eager.
* Before each test: ``ember.reset()`` (or ``torch._dynamo.reset()`` under the
  reference switch ``EMBER_TEST_REFERENCE=torch``, see tests/helpers.py).
* Tests marked ``@pytest.mark.slow`` run only with ``EMBER_SLOW=1``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest


def _load_helpers():
    """Register tests/helpers.py as ``ember_test_helpers``.

    Not as ``helpers``: test directories without ``__init__.py`` (tests/aot)
    have their own ``helpers.py`` on sys.path, and one module name cannot serve
    both. Tests write ``from ember_test_helpers import check_same``.
    """
    import importlib.util
    name = "ember_test_helpers"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parent / "helpers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _drop_truncated_inductor_builds():
    """Delete 0-byte shared objects in Inductor's on-disk cache before the run.

    A compile killed while writing (a timeout, a killed CI job) can leave an empty ``.so``
    under ``/tmp/torchinductor_<user>``; Inductor's cache then loads it on a later run and the
    test fails with ``invalid ELF header`` on a machine that keeps /tmp. The walk costs
    milliseconds; valid cache entries are kept so later runs still hit the cache.
    """
    import getpass
    import tempfile
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if not root:
        try:
            user = getpass.getuser()
        except Exception:
            user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
        root = os.path.join(tempfile.gettempdir(), "torchinductor_" + user)
    if not os.path.isdir(root):
        return
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f.endswith(".so"):
                path = os.path.join(dirpath, f)
                try:
                    if os.path.getsize(path) == 0:
                        os.remove(path)
                except OSError:
                    pass


_drop_truncated_inductor_builds()


REFERENCE = os.environ.get("EMBER_TEST_REFERENCE", "").strip().lower() == "torch"
SLOW = os.environ.get("EMBER_SLOW", "") not in ("", "0")

_ember = None
_ember_import_error = None
if not REFERENCE:
    try:
        import ember as _ember
    except ImportError as e:  # other layers may still be being written
        _ember_import_error = e
    else:
        _ember.config.strict = True
        # Every code object ember generates (entries, guard checks, residuals, resume functions)
        # must pass the code validator: stack depth, exception/line/position tables, prologue.
        import ember.bytecode.validate
        ember.bytecode.validate.enabled = True


if REFERENCE or _ember is not None:  # else capture tests fail on import, nothing else does
    _load_helpers()


def pytest_collection_modifyitems(config, items):
    if SLOW:
        return
    skip_slow = pytest.mark.skip(reason="slow test: set EMBER_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(autouse=True)
def _fresh_compiler_state():
    if REFERENCE:
        import torch._dynamo
        import torch._dynamo.utils
        torch._dynamo.reset()
        torch._dynamo.utils.counters.clear()  # reset() keeps these; helpers.stats() reads them
        yield
        torch._dynamo.reset()
        return
    if _ember is not None:
        _ember.reset()
        _ember.config.strict = True
    yield


@pytest.fixture
def without_nested_breaks():
    """For tests that pin the graph counts of a break inside an inlined function as torch.compile
    makes them by default (the caller breaks at the call, the callee is a frame of its own):
    ``ember.config.nested_graph_breaks`` off (tests/capture/test_nested_breaks.py covers it on)."""
    if REFERENCE or _ember is None:
        yield
        return
    with _ember.config.patch(nested_graph_breaks=False):
        yield
