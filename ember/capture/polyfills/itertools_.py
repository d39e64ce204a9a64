"""``itertools`` constructors ember has no dedicated tracker for, as generators with the semantics
of the C versions: the argument is turned into an iterator when the object is made (``iter(5)``
raises then, not at the first ``next``), and items are pulled one at a time, only when asked for.
The traced result is a generator rather than an instance of the itertools class."""
from __future__ import annotations


def dropwhile(predicate, iterable):
    return _dropwhile(predicate, iter(iterable))


def _dropwhile(predicate, it):
    for x in it:
        if not predicate(x):
            yield x
            break
    for x in it:
        yield x


def takewhile(predicate, iterable):
    return _takewhile(predicate, iter(iterable))


def _takewhile(predicate, it):
    for x in it:
        if predicate(x):
            yield x
        else:
            break


def filterfalse(predicate, iterable):
    return _filterfalse(predicate, iter(iterable))


def _filterfalse(predicate, it):
    for x in it:
        if not (bool(x) if predicate is None else predicate(x)):
            yield x


def starmap(function, iterable):
    return _starmap(function, iter(iterable))


def _starmap(function, it):
    for args in it:
        yield function(*args)


def zip_longest(*iterables, fillvalue=None):
    return _zip_longest([iter(i) for i in iterables], fillvalue)


def _zip_longest(iterators, fillvalue):
    active = len(iterators)
    done = [False] * len(iterators)
    if not active:
        return
    while True:
        values = []
        for i, it in enumerate(iterators):
            if done[i]:
                values.append(fillvalue)
                continue
            try:
                value = next(it)
            except StopIteration:
                done[i] = True
                active -= 1
                if not active:
                    return
                value = fillvalue
            values.append(value)
        yield tuple(values)


def cycle(iterable):
    return _cycle(iter(iterable))


def _cycle(it):
    saved = []
    for element in it:
        yield element
        saved.append(element)
    while saved:
        for element in saved:
            yield element


def groupby(iterable, key=None):
    return _groupby(iter(iterable), key)


def _groupby(it, key):
    keyfunc = (lambda v: v) if key is None else key
    exhausted = False
    current = 0  # which group may still yield (an older group stops, as in CPython)
    try:
        curr_value = next(it)
    except StopIteration:
        return
    curr_key = keyfunc(curr_value)

    def grouper(target_key, me):
        nonlocal curr_value, curr_key, exhausted
        if me != current:
            return
        yield curr_value
        for curr_value in it:
            curr_key = keyfunc(curr_value)
            if curr_key != target_key:
                return
            if me != current:
                return
            yield curr_value
        exhausted = True

    while not exhausted:
        target_key = curr_key
        current += 1
        group = grouper(target_key, current)
        yield curr_key, group
        if curr_key == target_key:  # the group was not read to its end: skip the rest of it
            for _ in group:
                pass


def tee(iterable, n=2):
    if n < 0:
        raise ValueError("n must be >= 0")
    it = iter(iterable)
    buffers = [[] for _ in range(n)]  # what each copy has not read yet (items pulled by another)
    return tuple([_tee(it, buffers, i) for i in range(n)])


def _tee(it, buffers, i):
    mine = buffers[i]
    while True:
        if not mine:
            try:
                value = next(it)
            except StopIteration:
                return
            for b in buffers:
                b.append(value)
        yield mine.pop(0)


POLYFILLS = {"tee": tee, "groupby": groupby, "dropwhile": dropwhile, "takewhile": takewhile, "filterfalse": filterfalse, "starmap": starmap,
             "zip_longest": zip_longest, "cycle": cycle}
