"""ember.capture — see docs/ and DESIGN.md."""
