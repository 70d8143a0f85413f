"""One version, written once (``__version__`` in the package; the build reads it from there), and the
files a library ships with: the licence named in the metadata and the ``py.typed`` marker."""
from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import contextrag

ROOT = Path(__file__).resolve().parents[1]
PEP440 = re.compile(r"^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$")


def test_version_is_pep440_and_matches_the_installed_metadata():
    assert PEP440.match(contextrag.__version__), contextrag.__version__
    assert metadata.version("contextrag") == contextrag.__version__


def test_cli_version_prints_the_package_version():
    out = subprocess.run([sys.executable, "-m", "contextrag.cli", "--version"], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == f"contextrag {contextrag.__version__}"


def test_the_version_is_written_in_one_place():
    pyproject = (ROOT / "pyproject.toml").read_text()
    project = pyproject.split("[project]", 1)[1].split("\n[", 1)[0]
    assert re.search(r'^dynamic = \[.*"version".*\]', project, re.M), "the version must be dynamic"
    assert not re.search(r"^version\s*=", project, re.M), "pyproject.toml must not write a version"
    assert 'input = "python/contextrag/__init__.py"' in pyproject


def test_licence_and_typing_marker_ship_with_the_package():
    meta = metadata.metadata("contextrag")
    assert "Apache-2.0" in (meta.get("License") or meta.get("License-Expression") or "")
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    assert "Version 2.0" in (ROOT / "LICENSE").read_text()
    assert (Path(contextrag.__file__).parent / "py.typed").is_file()
    assert "Typing :: Typed" in meta.get_all("Classifier")
