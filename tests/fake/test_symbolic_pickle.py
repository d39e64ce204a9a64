"""ember's ShapeEnv class is importable by name: Inductor's FX-graph cache pickles a graph's key,
and a class local to a function made every symbolic compile log "Failed to pickle cache key" with a
traceback (and skip the cache)."""
import pickle

from ember.fake.symbolic import _shape_env_class


def test_shape_env_class_pickles_by_reference():
    cls = _shape_env_class()
    assert pickle.loads(pickle.dumps(cls)) is cls
    import ember.fake.symbolic as symbolic
    assert symbolic.EmberShapeEnv is cls
