"""The package drops its cached numba kernels when any of its sources changes (numba alone would not
notice an edit to a module whose code another module's kernel has inlined)."""

from orbitlaw.orbits.numba_cache import STAMP, drop_stale_cache, sources_digest


def test_stale_kernels_dropped_when_any_source_changes(tmp_path):
    (tmp_path / "kepler.py").write_text("X = 1\n")
    (tmp_path / "generate.py").write_text("Y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    kept = cache / "generate.cpython-311.pyc"
    kept.write_bytes(b"bytecode")
    for name in ("generate._fill_tokens-47.py311.nbi", "generate._fill_tokens-47.py311.1.nbc"):
        (cache / name).write_bytes(b"old kernel")

    assert drop_stale_cache(tmp_path)  # no stamp yet: built from unknown sources
    assert sorted(p.name for p in cache.iterdir()) == sorted([kept.name, STAMP])
    assert (cache / STAMP).read_text() == sources_digest(tmp_path)

    (cache / "generate._fill_tokens-47.py311.nbi").write_bytes(b"new kernel")
    assert not drop_stale_cache(tmp_path)  # same sources: the cache stays
    assert (cache / "generate._fill_tokens-47.py311.nbi").exists()

    (tmp_path / "kepler.py").write_text("X = 3\n")  # an edit to the other module only
    assert drop_stale_cache(tmp_path)
    assert not (cache / "generate._fill_tokens-47.py311.nbi").exists() and kept.exists()


def test_unwritable_cache_is_left_alone(tmp_path):
    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "__pycache__").write_text("not a directory")
    assert not drop_stale_cache(tmp_path)
