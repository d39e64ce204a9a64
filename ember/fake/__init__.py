"""ember.fake — see docs/ and DESIGN.md."""
