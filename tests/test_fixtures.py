"""The committed tiny models (tests/fixtures/tiny8) are what tests/fixtures/make_fixtures.py writes: a file
edited by hand, or a recipe changed without a rebuild, fails here, saying how to rebuild."""

from __future__ import annotations

from helpers.fixture_drafts import TINY8, manifest, recipe
from helpers.paths import FIXTURES

REBUILD = "rebuild with `python tests/fixtures/make_fixtures.py` and commit tests/fixtures/tiny8"


def test_fixtures_match_their_manifest_and_recipe():
    import sys

    sys.path.insert(0, str(FIXTURES))
    try:
        from make_fixtures import file_hashes, recipe_sha256
    finally:
        sys.path.remove(str(FIXTURES))
    written = manifest()
    assert written["recipe_sha256"] == recipe_sha256(), f"make_fixtures.RECIPE changed since the build: {REBUILD}"
    found = file_hashes(TINY8)
    stale = sorted(k for k in found.keys() | written["files"].keys() if found.get(k) != written["files"].get(k))
    assert not stale, f"fixture files differ from MANIFEST.json: {stale}; {REBUILD}"
    assert {f"drafts/{name}/model.safetensors" for name in recipe()["drafts"]} <= set(found)


def test_fixtures_are_safetensors_and_json_only_and_small():
    files = [p for p in TINY8.rglob("*") if p.is_file()]
    assert {p.suffix for p in files} <= {".json", ".safetensors"}, sorted({p.suffix for p in files})
    assert all(p.stat().st_size < 400_000 for p in files), {p.name: p.stat().st_size for p in files}
    assert sum(p.stat().st_size for p in files) < 1_500_000
    # written whole or not at all: no temporary folder of an interrupted build left beside it
    assert not [p.name for p in FIXTURES.iterdir() if p.name.startswith(".tiny8")]
