"""The SDK's version is clients/VERSION, shared with the TypeScript SDK (no server needed)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import better_compute

PYTHON = Path(__file__).resolve().parents[1]
VERSION = (PYTHON.parent / "VERSION").read_text().strip()


def test_pyproject_has_the_shared_version() -> None:
    project = tomllib.loads((PYTHON / "pyproject.toml").read_text())["project"]
    assert project["version"] == VERSION, "set pyproject.toml's version to clients/VERSION"


def test_installed_version_is_the_shared_version() -> None:
    # scripts/setup reinstalls the editable package when pyproject.toml changes.
    assert better_compute.__version__ == VERSION


def test_changelog_describes_the_version() -> None:
    released = re.findall(r"^## \[(\d[^\]]*)\]", (PYTHON / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert released, "CHANGELOG.md has no released version"
    assert released[0] == VERSION, "CHANGELOG.md's newest entry must be clients/VERSION"
