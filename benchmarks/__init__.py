"""ember's benchmarks: the model zoo, the runner and focused measurements.

    python -m benchmarks.run            # the zoo, ember vs torch.compile (see docs/benchmarks.md)
    python -m benchmarks.overhead       # per-call overhead
    python -m benchmarks.compile_time   # capture time
"""
