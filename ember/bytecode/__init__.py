"""ember.bytecode — see docs/ and DESIGN.md."""
