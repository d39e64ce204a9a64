"""ember.distributed — see docs/ and DESIGN.md."""
