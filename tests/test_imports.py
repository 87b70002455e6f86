"""The import direction, guarded: every module imports alone, `import frontier` stays light and starts no
process, and `frontier` never imports `workers`. Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("aiohttp", "yaml", "protego", "selectolax", "rich", "uvloop", "warcio")
# frontier modules that are not part of the library core and may import the crawler's dependencies
NOT_CORE = ("frontier.bench", "frontier.testing", "frontier.crawl.process")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted(module_name(p) for package in ("frontier", "workers") for p in (ROOT / package).rglob("*.py"))


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_the_module_list_is_complete() -> None:
    for expected in ("frontier", "frontier.seen.bloom", "frontier.seen.urlseen", "frontier.seen.fplog", "frontier.__main__",
                     "workers", "workers.fetcher"):
        assert expected in MODULES


def _import_alone(names: list[str]) -> dict[str, str]:
    """Import each module in its own fresh interpreter, two at a time; {module: error output}."""
    failures: dict[str, str] = {}
    running: list[tuple[str, subprocess.Popen[str]]] = []

    def reap(name: str, process: subprocess.Popen[str]) -> None:
        _, err = process.communicate(timeout=120)
        if process.returncode != 0:
            failures[name] = err

    for name in names:
        if len(running) == 2:
            reap(*running.pop(0))
        running.append((name, subprocess.Popen([sys.executable, "-c", f"import {name}"], cwd=ROOT, text=True,
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    for item in running:
        reap(*item)
    return failures


@pytest.fixture(scope="module")
def import_failures() -> dict[str, str]:
    return _import_alone(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_alone(module: str, import_failures: dict[str, str]) -> None:
    assert module not in import_failures, import_failures.get(module)


def test_import_frontier_is_light_and_starts_no_process() -> None:
    done = run_python(f"""
        import json, multiprocessing, sys
        from multiprocessing import resource_tracker
        import frontier
        print(json.dumps({{
            "heavy": [m for m in {HEAVY!r} if m in sys.modules],
            "workers": [m for m in sys.modules if m == "workers" or m.startswith("workers.")],
            "children": len(multiprocessing.active_children()),
            "tracker": resource_tracker._resource_tracker._pid,
        }}))
    """)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"heavy": [], "workers": [], "children": 0, "tracker": None}


def test_frontier_never_imports_workers() -> None:
    core = [m for m in MODULES if m.split(".")[0] == "frontier" and not m.startswith(NOT_CORE)]
    done = run_python(f"""
        import importlib, json, sys
        for name in {core!r}:
            importlib.import_module(name)
        print(json.dumps([m for m in sys.modules if m == "workers" or m.startswith("workers.")]))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []


def test_no_frontier_core_source_imports_workers() -> None:
    """Also imports inside functions, which the sys.modules check above cannot see."""
    pattern = re.compile(r"^\s*(from\s+workers(\.|\s)|import\s+workers\b)", re.M)
    core = [p for p in (ROOT / "frontier").rglob("*.py") if not module_name(p).startswith(NOT_CORE)]
    assert len(core) > 10
    offenders = [str(p.relative_to(ROOT)) for p in core if pattern.search(p.read_text())]
    assert offenders == []


def test_public_api() -> None:
    import frontier
    from frontier import (  # noqa: F401  (the names other code and users depend on)
        BloomParameters,
        CanonicalRules,
        ConfigError,
        DiskFull,
        FrontierError,
        InvalidURL,
        MemorySeen,
        SeenBatch,
        SeenTest,
        SharedBloom,
        StorageError,
        URLSeen,
        VersionMismatch,
        bloom_parameters,
        canonicalize,
        fingerprint,
    )

    assert frontier.__version__ == "0.1.0"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^version = "0\.1\.0"$', pyproject, re.M)
    assert all(hasattr(frontier, name) for name in frontier.__all__)
    assert issubclass(InvalidURL, FrontierError) and issubclass(InvalidURL, ValueError)
    assert issubclass(VersionMismatch, StorageError) and issubclass(DiskFull, StorageError)
    assert canonicalize("HTTP://Example.COM:80/a/./b/../c?b=2&a=1#x") == "http://example.com/a/c?a=1&b=2"
    assert len(fingerprint("http://example.com/")) == 16


def test_the_docstring_example_runs(tmp_path: Path) -> None:
    import frontier

    example = "\n".join(line[4:] for line in frontier.__doc__.splitlines() if line.startswith("    "))
    assert "URLSeen" in example
    check = """
from frontier import URLSeen
with URLSeen("data/seen", capacity=10_000_000, error_rate=1e-4) as seen:
    assert len(seen) == 2, len(seen)
    assert "http://example.com/a" in seen and "http://example.com/b" in seen
"""
    done = subprocess.run([sys.executable, "-c", example + "\n" + check], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
