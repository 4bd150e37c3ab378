"""The locked set-up: what is installed is what requirements/ pins (make installs from it), and the lock covers
every dependency pyproject.toml names."""

import re
import tomllib
from importlib import metadata

import pytest

from tests.conftest import REPO

LOCKS = ("base.txt", "dev.txt", "docs.txt")  # what `make test` installs


def pins(name: str) -> dict[str, str]:
    lines = (REPO / "requirements" / name).read_text().splitlines()
    return dict(line.split("==") for line in lines if line and not line.startswith("#"))


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@pytest.mark.parametrize("lock", LOCKS)
def test_every_pinned_package_is_installed_at_its_pinned_version(lock):
    wrong = {name: (pinned, metadata.version(name)) for name, pinned in pins(lock).items()
             if metadata.version(name) != pinned}
    assert not wrong, f"installed versions differ from requirements/{lock} (run make setup): {wrong}"


def test_the_lock_pins_every_dependency_the_package_names():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    named = project["dependencies"] + [d for extra in project["optional-dependencies"].values() for d in extra]
    locked = {canonical(name) for lock in LOCKS for name in pins(lock)}
    unpinned = {canonical(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in named} - locked - {"torch"}
    assert not unpinned, f"not in requirements/: {sorted(unpinned)}"
