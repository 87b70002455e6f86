"""The import direction, guarded: the parts of frontier import one way (cli, scrapy and service on top; crawl over
state; state over seen and url; config and errors at the bottom), no two modules import each other even through
others, every module imports alone, `import frontier` stays light and starts no process, and `frontier` never
imports `workers`. Imports are read with ast from every module's source, those inside functions and under
TYPE_CHECKING included (a circle hidden in a function is still one a reader must follow); the import of a parent
package that every `import a.b` implies is not counted (it is the same for every layout)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crawlcmd import PACKAGES, ROOT

HEAVY = ("aiohttp", "yaml", "protego", "selectolax", "rich", "uvloop", "warcio", "grpc", "scrapy", "redis", "lmdb",
         "numpy")
# frontier modules outside the library core, which may import the crawler's dependencies: the benchmarks (which
# also run the fetch side, workers, to profile it) and the test support
CRAWL_COMMAND = ("frontier.cli.supervisor", "frontier.cli.supervision", "frontier.cli.demo_web",
                 "frontier.cli.crawl_summary")
NOT_CORE = ("frontier.bench", "frontier.testing", *CRAWL_COMMAND)
# (frontier.cli.supervisor, `frontier crawl` and run_frontier.py, starts both the frontier process and the workers:
# with its parts, the only modules of the package that import workers, to name the workers' spawn target and files)

# part -> the parts it may import (besides itself). `base` is errors, lazy and native (the C extension's bridge,
# which url's canonicalize and the seen-test both use); `frontier` is the package's own __init__ (the public API,
# imported lazily from every part). bench and testing are tools beside the library, workers the fetch side.
BELOW = {
    "base": set(),
    "url": {"base"},
    "config": {"base", "url"},
    "seen": {"base", "config", "url"},
    "state": {"base", "config", "url", "seen"},
    "crawl": {"base", "config", "url", "seen", "state"},
}
TOP = {"base", "config", "url", "seen", "state", "crawl"}
BELOW |= {"cli": TOP, "scrapy": TOP, "service": TOP | {"cli"}, "testing": {"base"},
          "workers": TOP, "bench": TOP | {"testing", "scrapy", "cli", "workers", "service", "supervisor"}}
BELOW["main"] = TOP | {"cli", "service", "frontier"}
BELOW["supervisor"] = TOP | {"cli", "workers", "testing"}  # a demo config starts the mock web
BELOW["cli"] = TOP | {"supervisor", "frontier", "console"}  # `frontier crawl` hands over to the supervisor
BELOW["frontier"] = TOP  # frontier/__init__.py: the public API, imported lazily (TYPE_CHECKING for the types)
# the operator's console reads the crawl; the frontier process (frontier.crawl.process) serves it beside its loop
BELOW["console"] = TOP
BELOW["process"] = TOP | {"console"}
for _part in ("supervisor", "bench", "cli", "workers", "main"):
    BELOW[_part] = BELOW[_part] | {"process", "console"}
BASE = {"frontier.errors", "frontier.lazy", "frontier.native"}
# the only modules of the library that import redis: the crawl state's Redis room, and the URL Frontier
# service's own Redis store (a queue model of its own: the API's keys, refetch dates and leases)
REDIS_ROOM = ("frontier.state.redis_", "frontier.urlfrontier.redis_store")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGES).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = sorted(module_name(p) for package in ("frontier", "workers") for p in (PACKAGES / package).rglob("*.py"))


def part_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "workers":
        return "workers"
    if module == "frontier":
        return "frontier"
    if module in BASE:
        return "base"
    if parts[1] == "__main__" or module == "frontier.cli.script":  # `python -m frontier`, `frontier`: every command
        return "main"
    if module in CRAWL_COMMAND:
        return "supervisor"
    if module == "frontier.crawl.process":  # the frontier process: its loop applies the console's actions
        return "process"
    if parts[1] == "urlfrontier":  # the URL Frontier gRPC service (issue of its own)
        return "service"
    return parts[1]


def source_of(module: str) -> ast.Module:
    path = PACKAGES / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    return ast.parse(path.read_text(), str(path))


def foreign_imports(module: str) -> set[str]:
    """The modules outside the project that `module` imports, wherever the statement stands."""
    found = {alias.name for node in ast.walk(source_of(module)) if isinstance(node, ast.Import) for alias in node.names}
    found |= {node.module for node in ast.walk(source_of(module))
              if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}
    return {name for name in found if name.split(".")[0] not in ("frontier", "workers")}


def imports_of(module: str) -> list[tuple[str, int]]:
    """(project module imported, line) for every import statement of `module`, wherever it stands."""
    found = []
    for node in ast.walk(source_of(module)):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:  # `from a import b`: the module a.b if there is one, else a
                sub = f"{node.module}.{alias.name}"
                if sub in MODULES:
                    found.append((sub, node.lineno))
                elif not list((PACKAGES / Path(*sub.split("."))).parent.glob(f"{alias.name}.*")):  # not a C extension
                    found.append((node.module, node.lineno))
    return [(name, line) for name, line in found if name in MODULES]


GRAPH = {module: imports_of(module) for module in MODULES}


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_the_module_list_is_complete() -> None:
    for expected in ("frontier", "frontier.seen.bloom", "frontier.seen.urlseen", "frontier.seen.fplog",
                     "frontier.crawl.process", "frontier.config.schema", "frontier.__main__", "workers",
                     "workers.fetcher"):
        assert expected in MODULES
    assert all(part_of(m) in BELOW for m in MODULES), sorted({part_of(m) for m in MODULES} - set(BELOW))


def test_each_part_imports_only_the_parts_below_it() -> None:
    offenders = [f"{module} ({part_of(module)}) imports {name} ({part_of(name)}) on line {line}"
                 for module, edges in GRAPH.items() for name, line in edges
                 if part_of(name) != part_of(module) and part_of(name) not in BELOW[part_of(module)]]
    assert offenders == []


def test_no_import_circle() -> None:
    """Tarjan's strongly connected components of the module graph: each must be one module importing nothing
    of its own component."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for name, _ in GRAPH[module]:
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in on_stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:
            component = []
            while True:
                name = stack.pop()
                on_stack.discard(name)
                component.append(name)
                if name == module:
                    break
            if len(component) > 1 or any(name == module for name, _ in GRAPH[module]):
                circles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(MODULES)))
    for module in MODULES:
        if module not in index:
            visit(module)
    assert circles == []


def test_the_circle_finder_finds_a_circle() -> None:
    """The check above can fail: the edge that closed the old layout's config <-> scope circle is found."""
    saved = dict(GRAPH)
    try:
        GRAPH["frontier.url.scope"] = [*GRAPH["frontier.url.scope"], ("frontier.config", 1)]
        with pytest.raises(AssertionError):
            test_no_import_circle()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)


def test_only_the_redis_room_imports_redis() -> None:
    library = [m for m in MODULES if m.startswith("frontier") and not m.startswith(NOT_CORE)]
    offenders = [m for m in library if not m.startswith(REDIS_ROOM)
                 and any(name == "redis" or name.startswith("redis.") for name in foreign_imports(m))]
    assert offenders == []


def test_each_part_says_what_it_owns_and_may_import() -> None:
    import importlib

    for package in ("seen", "url", "crawl", "state", "cli", "scrapy", "config", "bench", "testing"):
        doc = importlib.import_module(f"frontier.{package}").__doc__ or ""
        assert re.search(r"may import|imports? (only|no|nothing)|on top|never imports", doc, re.I), package


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
    core = [m for m in MODULES if m.startswith("frontier") and not m.startswith(NOT_CORE)]
    assert len(core) > 10
    offenders = [f"{m}:{line}" for m in core for name, line in GRAPH[m] if part_of(name) == "workers"]
    assert offenders == []


def test_public_api() -> None:
    import frontier
    from frontier import (  # noqa: F401  (the names other code and users depend on)
        Blacklist,
        BloomParameters,
        CanonicalRules,
        ConfigError,
        CountingBloom,
        DiskFull,
        Frontier,
        FrontierError,
        InvalidURL,
        MemorySeen,
        RedisSeen,
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
    # one source of truth: the build reads frontier.__version__, pyproject.toml writes no version of its own
    assert re.search(r'^version = \{attr = "frontier\.__version__"\}$', pyproject, re.M)
    assert not re.search(r'^version = "', pyproject, re.M)
    assert all(hasattr(frontier, name) for name in frontier.__all__)
    assert issubclass(InvalidURL, FrontierError) and issubclass(InvalidURL, ValueError)
    assert issubclass(VersionMismatch, StorageError) and issubclass(DiskFull, StorageError)
    assert canonicalize("HTTP://Example.COM:80/a/./b/../c?b=2&a=1#x") == "http://example.com/a/c?a=1&b=2"
    assert len(fingerprint("http://example.com/")) == 16
    assert sorted(frontier.__all__) == sorted(set(frontier.__all__)) == sorted(dir(frontier))
    undocumented = [name for name in frontier.__all__ if name != "__version__"
                    and not (getattr(frontier, name).__doc__ or "").strip()]
    assert undocumented == []  # docs/api.md renders each one's docstring


def test_public_names_import_lazily() -> None:
    """`frontier.RedisSeen` imports redis only when asked for; the Scrapy settings' dotted names resolve as Scrapy
    resolves them (scrapy.utils.misc.load_object), without the other half of the plugin."""
    done = run_python("""
        import json, sys
        import frontier, frontier.scrapy
        before = sorted(m for m in ("redis", "scrapy") if m in sys.modules)
        from scrapy.utils.misc import load_object
        dupefilter = load_object("frontier.scrapy.DupeFilter")
        scheduler_loaded = "frontier.scrapy.scheduler" in sys.modules
        scheduler = load_object("frontier.scrapy.Scheduler")
        redis_seen = frontier.RedisSeen
        print(json.dumps([before, dupefilter.__name__, scheduler_loaded, scheduler.__name__, redis_seen.__name__,
                          "redis" in sys.modules]))
    """)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[], "DupeFilter", False, "Scheduler", "RedisSeen", True]


def test_the_package_ships_its_type_marker() -> None:
    assert (PACKAGES / "frontier" / "py.typed").is_file()
    assert re.search(r'^frontier = \[.*"py\.typed"', (ROOT / "pyproject.toml").read_text(), re.M)


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
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's frontier, installed or not
    done = subprocess.run([sys.executable, "-c", example + "\n" + check], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
