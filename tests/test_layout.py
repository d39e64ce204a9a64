"""The test tree's layout: pytest imports test files without packages by their basename
(rootdir-relative "rootdir" import mode), so two test files of the same name in different
folders make collection fail with "import file mismatch" on a clean checkout."""
import collections
import pathlib

ROOT = pathlib.Path(__file__).parent


def test_test_file_basenames_are_unique_outside_packages():
    seen = collections.defaultdict(list)
    for path in ROOT.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            seen[path.name].append(str(path.relative_to(ROOT)))
    clashes = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not clashes, f"test files sharing a basename (rename one): {clashes}"
