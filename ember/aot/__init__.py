"""ember.aot — see docs/ and DESIGN.md."""
