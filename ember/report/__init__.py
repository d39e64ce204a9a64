"""ember.report — see docs/ and DESIGN.md."""
