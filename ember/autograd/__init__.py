"""ember.autograd — see docs/ and DESIGN.md."""
