"""Compiler collectives: every rank makes the same automatic-dynamic decisions.

Automatic dynamic decides per rank which sizes are symbols (a size that changed between compiles).
Under ``torch.distributed`` ranks see different sizes — the last batch of an epoch is smaller on
some ranks, sequence lengths differ — so without coordination rank 0 can compile a static graph
while rank 1 compiles a dynamic one: their guards differ, one recompiles where the other does not,
and a collective inside the step waits forever on a rank that is still compiling.

With ``ember.config.enable_compiler_collectives`` (off by default, as in torch), after the first
trace of a frame every rank all-gathers what it observed at each input source (sizes of tensors,
values of ints and floats) and merges them: a size or value that differs between ranks is marked
changed on every rank, and every rank whose decisions the merge changed traces again. The merge
is deterministic over the gathered list, so all ranks trace with the same dynamic decisions and
compile the same graph with the same guards.

Cost: one ``all_gather_object`` per frame's first compile (not per call, not per recompile), on
the default group; the payload per rank is the frame's input observations — a few hundred bytes
for a typical model (one tuple of sizes per tensor input; parameters are static and not sent
unless marked). For 1,000 ranks that is ~1,000 × a few hundred bytes gathered on each rank once
per compiled frame: well under a megabyte, dominated by the collective's latency (log(N) rounds on
a tree/ring all-gather), paid only at compile time. Like torch, it assumes SPMD: every rank
compiles the same frames in the same order (a rank that compiles a frame alone would wait).
"""
from __future__ import annotations

_MISSING = object()


def active() -> bool:
    """Whether compiler collectives run: enabled, and a process group of more than one rank."""
    from ember.config import config
    if not config.enable_compiler_collectives:
        return False
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def merge_sizes(observations: list[dict]) -> dict:
    """Merge per-rank ``{source name: sizes tuple}``: a dimension any rank saw differently (or as
    changed, None) is None; a source not every rank read keeps what the ranks that read it agree on."""
    merged: dict = {}
    for obs in observations:
        for name, sizes in obs.items():
            prev = merged.get(name, _MISSING)
            if prev is _MISSING:
                merged[name] = sizes
            elif prev is None or sizes is None or len(prev) != len(sizes):
                merged[name] = None if (prev is None or sizes is None) else prev
            else:
                merged[name] = tuple(None if a is None or b is None or a != b else a for a, b in zip(prev, sizes))
    return merged


def merge_values(observations: list[dict]) -> dict:
    """Merge per-rank ``{source name: int/float value}``: None where any rank differs."""
    merged: dict = {}
    for obs in observations:
        for name, value in obs.items():
            prev = merged.get(name, _MISSING)
            merged[name] = value if prev is _MISSING else (prev if prev == value and type(prev) is type(value)
                                                           else None)
    return merged


def exchange(sizes: dict, values: dict) -> tuple[dict, dict]:
    """All-gather this rank's observations of a frame and return the merge (the same on every rank)."""
    import torch.distributed as dist
    gathered: list = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, (sizes, values))
    return merge_sizes([g[0] for g in gathered]), merge_values([g[1] for g in gathered])
