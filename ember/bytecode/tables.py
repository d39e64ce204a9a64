"""Encoders for the two side tables of a 3.11+ code object.

``co_exceptiontable`` and ``co_linetable`` are compact byte formats documented
in CPython's ``Objects/exception_handling_notes.txt`` and
``Objects/locations.md``.  The encoders below follow CPython's own assembler
(``Python/compile.c``, 3.11) choice by choice, so that re-encoding an unchanged
function reproduces the compiler's bytes exactly: that lets the round-trip
tests compare bytes rather than merely behaviour.

Exception table: a sequence of entries ``(start, length, target, depth<<1 |
lasti)``, each number in code units (2 bytes), each written as a big-endian
varint of 6-bit chunks; bit 0x40 means "more chunks follow" and bit 0x80 marks
the first byte of an entry.

Line table: a sequence of entries, each covering 1..8 code units.  The first
byte is ``0x80 | code << 3 | (length - 1)``; ``code`` selects the form:
15 no location, 14 long form, 13 line only, 10..12 one-line form with line
delta ``code - 10``, 0..9 short form (same line, small columns).  Line numbers
are deltas from the previous entry's line (starting at ``co_firstlineno``);
varints here are little-endian 6-bit chunks with 0x40 as continuation.
"""

from __future__ import annotations

import sys
from typing import Iterable, Optional, Sequence

__all__ = ["encode_exception_table", "encode_location_table", "Location"]

# (lineno, end_lineno, col_offset, end_col_offset); None members as in co_positions().
Location = tuple


# --------------------------------------------------------------------------
# exception table
# --------------------------------------------------------------------------


def _exn_item(out: bytearray, value: int, msb: int) -> None:
    if not 0 <= value < (1 << 30):
        raise ValueError(f"exception table value out of range: {value}")
    for shift in (24, 18, 12, 6):
        if value >= (1 << shift):
            out.append(((value >> shift) & 0x3F) | 0x40 | msb)
            msb = 0
    out.append((value & 0x3F) | msb)


def encode_exception_table(entries: Iterable[tuple[int, int, int, int, bool]]) -> bytes:
    """Encode ``(start, end, target, depth, lasti)`` entries; offsets in bytes,
    ``end`` exclusive (the convention of ``dis._parse_exception_table``)."""
    out = bytearray()
    for start, end, target, depth, lasti in entries:
        if start % 2 or end % 2 or target % 2 or end <= start:
            raise ValueError(f"bad exception table entry {(start, end, target)}")
        _exn_item(out, start // 2, 0x80)
        _exn_item(out, (end - start) // 2, 0)
        _exn_item(out, target // 2, 0)
        _exn_item(out, (depth << 1) | int(bool(lasti)), 0)
    return bytes(out)


# --------------------------------------------------------------------------
# location table
# --------------------------------------------------------------------------

_NONE, _LONG, _NO_COLUMN, _ONE_LINE0 = 15, 14, 13, 10


def _varint(out: bytearray, value: int) -> None:
    while value >= 64:
        out.append(0x40 | (value & 0x3F))
        value >>= 6
    out.append(value)


def _svarint(out: bytearray, value: int) -> None:
    _varint(out, ((-value) << 1) | 1 if value < 0 else value << 1)


class _LocationWriter:
    """Mirror of ``write_location_info_entry`` in CPython 3.11's compile.c."""

    def __init__(self, firstlineno: int):
        self.out = bytearray()
        self.lineno = firstlineno

    def _first(self, code: int, length: int) -> None:
        self.out.append(0x80 | (code << 3) | (length - 1))

    def entry(self, loc: Optional[Location], length: int) -> None:
        lineno, end_lineno, col, end_col = loc if loc is not None else (None,) * 4
        if lineno is None or lineno < 0:
            self._first(_NONE, length)
            return
        col = -1 if col is None else col
        end_col = -1 if end_col is None else end_col
        end_lineno = -1 if end_lineno is None else end_lineno
        delta = lineno - self.lineno
        if col < 0 or end_col < 0:
            if end_lineno == lineno or end_lineno == -1:
                self._first(_NO_COLUMN, length)
                _svarint(self.out, delta)
                self.lineno = lineno
                return
        elif end_lineno == lineno:
            if delta == 0 and col < 80 and 0 <= end_col - col < 16:
                self._first(col >> 3, length)
                self.out.append(((col & 7) << 4) | (end_col - col))
                return
            if 0 <= delta < 3 and col < 128 and end_col < 128:
                self._first(_ONE_LINE0 + delta, length)
                self.out.append(col)
                self.out.append(end_col)
                self.lineno = lineno
                return
        # Long form.  end_lineno below lineno cannot be encoded; clamp it.
        self._first(_LONG, length)
        _svarint(self.out, delta)
        _varint(self.out, max(end_lineno - lineno, 0))
        _varint(self.out, col + 1)
        _varint(self.out, end_col + 1)
        self.lineno = lineno

    def instruction(self, loc: Optional[Location], size: int) -> None:
        # One entry per instruction (3.11) or run of equal locations (3.12+),
        # split into chunks of at most 8 code units.
        while size > 8:
            self.entry(loc, 8)
            size -= 8
        self.entry(loc, size)


# 3.12+ (assemble.c) merges consecutive instructions with the same location
# into one run before splitting it into entries of at most 8 code units; 3.11
# writes each instruction on its own.  The entry forms are the same.
MERGE_EQUAL_LOCATIONS = sys.version_info >= (3, 12)


def encode_location_table(firstlineno: int, items: Sequence[tuple[Optional[Location], int]],
                          merge: Optional[bool] = None) -> bytes:
    """Encode ``(location, size_in_code_units)`` per instruction into co_linetable.

    ``size`` includes the instruction's EXTENDED_ARG prefixes and CACHE entries.
    ``merge`` (default: as the running Python's compiler does) joins neighbours
    with equal locations.
    """
    writer = _LocationWriter(firstlineno)
    if merge is None:
        merge = MERGE_EQUAL_LOCATIONS
    if merge:
        runs: list[list] = []
        for loc, size in items:
            if size <= 0:
                continue
            if runs and runs[-1][0] == loc:
                runs[-1][1] += size
            else:
                runs.append([loc, size])
        items = runs
    for loc, size in items:
        if size > 0:
            writer.instruction(loc, size)
    return bytes(writer.out)
