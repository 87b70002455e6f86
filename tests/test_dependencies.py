"""Every third-party import is declared in pyproject.toml, in the extra that installs it.

A machine whose global site-packages already hold a package hides a missing declaration: the
suite passes there and fails for a user in a fresh venv. This reads the imports of the source
(ast, no import) and maps each to the distribution that provides it in this environment.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

import pytest

from crawlcmd import PACKAGES, ROOT

FIRST_PARTY = {"frontier", "workers", "run_frontier", "tests"} | {p.stem for p in (ROOT / "tests").glob("*.py")}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(requirements: list[str]) -> set[str]:
    return {_normalize(re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0]) for req in requirements}


PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
RUNTIME = _requirement_names(PROJECT["dependencies"])
EXTRAS = {name: _requirement_names(reqs) for name, reqs in PROJECT["optional-dependencies"].items()}
PACKAGE_EXTRAS = {"frontier/urlfrontier/": "service", "frontier/scrapy/": "scrapy"}  # a sub-package whose every module needs an extra
PROVIDERS = {module: {_normalize(d) for d in dists}
             for module, dists in importlib.metadata.packages_distributions().items()}


def third_party_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names if n not in sys.stdlib_module_names and n not in FIRST_PARTY}


def allowed_for(path: Path) -> tuple[str, set[str]]:
    """Which declaration must cover a file's imports: the runtime dependencies, plus its extra."""
    rel = relative(path)
    if rel.startswith("tests/"):
        return "test", RUNTIME | EXTRAS.get("test", set())
    if rel.startswith("frontier/bench/"):
        return "bench", RUNTIME | EXTRAS.get("bench", set())
    for extra in EXTRAS:  # an optional room of the package, e.g. frontier/state/redis*.py -> extra "redis"
        if re.search(rf"(^|/){re.escape(extra)}[^/]*\.py$", rel):
            return extra, RUNTIME | EXTRAS[extra]
    for package, extra in PACKAGE_EXTRAS.items():
        if rel.startswith(package):
            return extra, RUNTIME | EXTRAS[extra]
    return "dependencies", RUNTIME


def relative(path: Path) -> str:
    """A source's path as in the checkout: the packages' files may be installed apart from tests/."""
    return path.relative_to(PACKAGES if path.is_relative_to(PACKAGES / "frontier") or
                            path.is_relative_to(PACKAGES / "workers") else ROOT).as_posix()


SOURCES = sorted([p for pattern in ("frontier/**/*.py", "workers/**/*.py") for p in PACKAGES.glob(pattern)]
                 + [p for pattern in ("tests/**/*.py", "run_frontier.py") for p in ROOT.glob(pattern)])


@pytest.mark.parametrize("path", SOURCES, ids=relative)
def test_imports_are_declared(path: Path) -> None:
    where, declared = allowed_for(path)
    missing = {}
    for module in third_party_imports(path):
        # not installed here (an extra CI does not install): its distribution is taken to share its name
        providers = PROVIDERS.get(module) or {_normalize(module)}
        if not providers & declared:
            missing[module] = sorted(providers)
    assert not missing, f"imported but not declared in pyproject.toml ({where}): {missing}"


def test_the_check_can_fail() -> None:
    assert "yaml" in third_party_imports(PACKAGES / "frontier" / "cli" / "prestart.py")
    assert not {"pyyaml"} & EXTRAS["test"] - RUNTIME  # pyyaml is a runtime dependency, not a test-only one
    assert PROVIDERS["yaml"] & RUNTIME
