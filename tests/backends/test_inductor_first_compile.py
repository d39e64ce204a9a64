"""The first Inductor compile in a process registers ABCs (``abc.get_cache_token()`` moves): a
guard on that token taken by the trace before the compile must not make the new entry fail its
own guards (it did: an internal error, then the function ran eagerly)."""
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import collections.abc, torch, ember
    ember.config.strict = True
    def f(x, d):
        if isinstance(d, collections.abc.Mapping):
            x = x + d["b"]
        return x.sin() * 2
    cf = ember.compile(f, backend="inductor")
    for n in (8, 9, 12):
        x, d = torch.randn(2, n), {"b": torch.randn(n)}
        torch.testing.assert_close(cf(x, d), f(x, d))
    s = ember.stats()
    assert s["fallbacks"] == 0 and s["recompiles"] == 1, s
    print("OK")
""")


def test_isinstance_abc_guard_survives_the_first_inductor_compile():
    out = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and "OK" in out.stdout, out.stderr[-3000:]
