"""FakeSnapshot over inference tensors (made under torch.inference_mode): they have no version
counter (reading it raises), so a change is seen by comparing size, stride and offset."""
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from ember.fake.snapshot import NO_VERSION, FakeSnapshot, version_of


def test_version_of_an_inference_tensor():
    with torch.inference_mode():
        t = torch.ones(2)
    assert version_of(t) == NO_VERSION
    u = torch.ones(2)
    u.add_(1)
    assert version_of(u) == 1


def test_snapshot_restores_an_inference_fake_after_a_metadata_change():
    mode = FakeTensorMode()
    with torch.inference_mode():
        t = mode.from_tensor(torch.ones(2, 3))
        snap = FakeSnapshot.take([t])
        assert snap.changed() == []
        with mode:
            t.t_()
        assert snap.changed() == [t]
        assert snap.restore()
        assert tuple(t.shape) == (2, 3) and t.stride() == (3, 1)


def test_snapshot_of_an_unchanged_inference_fake_is_clean():
    mode = FakeTensorMode()
    with torch.inference_mode():
        t = mode.from_tensor(torch.ones(2, 3))
        snap = FakeSnapshot.take([t])
        with mode:
            _ = t * 2  # (an out-of-place op: nothing to restore)
        assert snap.changed() == [] and snap.restore()
