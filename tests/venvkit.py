"""Fresh venvs outside the checkout, for the tests of what a user installs (test_console_script, test_release).

A venv is made with `python -m venv --without-pip`; its dependencies come from this venv's site-packages through a
.pth file, so nothing is downloaded: either all of them, or (`core_site`) only the distributions the package
requires without extras, linked one by one into a folder of their own, so that grpc, scrapy and redis are missing
as they are after a plain `pip install`. frontier itself is installed by this venv's pip (`--no-deps --no-index`)
from a copy of the source or from a built wheel, so the script and the package are what a user's install makes.
When the suite runs against an installed wheel (.ci/run), FRONTIER_TEST_DIST names the folder of the sdist and the
wheel it built: `built_dist()`; there is no source to copy then.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import site
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from crawlcmd import INSTALLED

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "frontier", "workers")  # what a build reads
INSTALL_TIMEOUT = 240.0
DIST_ENV = "FRONTIER_TEST_DIST"


def built_dist() -> Path | None:
    """The folder DIST_ENV names (an sdist and a wheel already built), or None: build from the checkout. Against an
    installed package without it, the test skips: it has no source to build."""
    if os.environ.get(DIST_ENV):
        return Path(os.environ[DIST_ENV])
    if INSTALLED:
        pytest.skip(f"checkout only: builds the checkout's source ({DIST_ENV} names no built sdist and wheel)")
    return None


def copy_source(dest: Path, *, extensions: bool = True) -> Path:
    """The checkout's buildable files under dest; `extensions`: with build/ and the compiled *.so (no recompile),
    else without them (a release build compiles its own)."""
    dest.mkdir(parents=True)
    skip = ["__pycache__"] if extensions else ["__pycache__", "*.so"]
    for name in SOURCE + (("build",) if extensions else ()):
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, dest / name, ignore=shutil.ignore_patterns(*skip))  # keeps mtimes
        elif path.exists():
            shutil.copy2(path, dest / name)
    return dest


def core_site(dest: Path, requirements: Iterable[str]) -> Path:
    """A folder of links to the installed distributions `requirements` need (with their own requirements, markers
    evaluated, extras only where a requirement names them), and to nothing else."""
    dest.mkdir(parents=True)
    wanted = [Requirement(r) for r in requirements]
    seen: set[str] = set()
    while wanted:
        req = wanted.pop()
        name = canonicalize_name(req.name)
        if req.marker is not None and not any(req.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
            continue
        dist = importlib.metadata.distribution(name)
        extras = set(req.extras)
        wanted += [r for r in map(Requirement, dist.requires or ())
                   if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("", *extras))]
        if name in seen:
            continue
        seen.add(name)
        top = {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")} - {"__pycache__"}
        for entry in top:
            if not (dest / entry).exists():
                (dest / entry).symlink_to(Path(dist.locate_file(entry)))
    return dest


def make_venv(env_dir: Path, site_dirs: Iterable[Path | str] = tuple(site.getsitepackages())) -> Path:
    """A venv whose imports also look in site_dirs (default: all of this venv's); returns its bin directory."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=60)
    (site_packages,) = env_dir.glob("lib/python*/site-packages")
    (site_packages / "deps.pth").write_text("".join(f"{d}\n" for d in site_dirs))
    return env_dir / "bin"


def install(bin_dir: Path, target: Path) -> None:
    """pip-install a source tree or a wheel into the venv, without its dependencies and without the index; into the
    venv itself even where it sees frontier already installed through a site dir (the suite run against a wheel)."""
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "-q", "--no-deps",
                    "--ignore-installed", "--no-build-isolation", "--no-index", "--disable-pip-version-check",
                    str(target)],
                   check=True, timeout=INSTALL_TIMEOUT, capture_output=True)


def outside(bin_dir: Path) -> dict[str, str]:
    """The environment of a user of the venv: its bin first on PATH, no PYTHONPATH to find the checkout by."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


def run(bin_dir: Path, cwd: Path, *argv: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    """A command of the venv (argv[0] looked up on its PATH), run from `cwd` (outside the checkout)."""
    return subprocess.run(list(argv), cwd=cwd, env=outside(bin_dir), capture_output=True, text=True, timeout=timeout)
