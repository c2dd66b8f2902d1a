import os

from hf_ext._cache import cache_root, cached_text, source_stamp


def test_the_cache_lives_under_hf_ext_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    assert cache_root() == tmp_path


def test_a_text_is_computed_once_per_key(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    calls = []

    def compute():
        calls.append(1)
        return f"page {len(calls)}"

    assert cached_text("pages", ["a", b"1"], compute) == "page 1"
    assert cached_text("pages", ["a", b"1"], compute) == "page 1"
    assert cached_text("pages", ["a", b"2"], compute) == "page 2"
    assert cached_text("pages", ["a1", b""], compute) == "page 3"  # parts are separated, not concatenated
    assert len(calls) == 3


def test_an_unwritable_cache_only_costs_the_recomputation(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("HF_EXT_CACHE", str(blocker))
    assert cached_text("pages", ["a"], lambda: "page") == "page"


def test_the_stamp_follows_a_change_to_any_source_file(tmp_path):
    module = tmp_path / "pkg" / "mod.py"
    module.parent.mkdir()
    module.write_text("x = 1\n")
    before = source_stamp([tmp_path])
    assert source_stamp([tmp_path]) == before
    module.write_text("x = 2\n")
    os.utime(module, ns=(1, 1))  # an edit within the clock's tick, same size: the stamp still sees the time
    assert source_stamp([tmp_path]) != before
