"""Code ember never compiles as a frame of its own: the Python standard library.

A graph break inside an inlined standard-library function (``collections.namedtuple``
calling ``sys.intern``, ``copy.deepcopy`` on an opaque object, ...) would otherwise
compile that library function on its own at the breaking call, with resume functions
inside it that recompile on every new constant the library loops over. Dynamo skips
these files for frame compilation (its skipfiles); ember does the same: the callee at
the break is called as it is, and the caller's frame still resumes compiled after it.
Inlining them into a caller's graph is unaffected.
"""
from __future__ import annotations

import functools
import os
import sysconfig
import types


def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {os.path.realpath(paths[k]) for k in ("stdlib", "platstdlib") if paths.get(k)}
    return tuple(d + os.sep for d in sorted(dirs))


_STDLIB = _stdlib_dirs()
_PACKAGES = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


@functools.lru_cache(maxsize=4096)
def _skipped_file(filename: str) -> bool:
    path = os.path.realpath(filename)
    if any(p in path for p in _PACKAGES):
        return False
    return path.startswith(_STDLIB)


def skipped_code(code: types.CodeType) -> bool:
    """True for code ember runs as it is when it would be compiled as a frame at a break."""
    return _skipped_file(code.co_filename)
