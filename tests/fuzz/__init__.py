"""Differential fuzzer: random programs run eagerly and through ember, compared."""
