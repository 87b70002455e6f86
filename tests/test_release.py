"""What a release publishes: `python -m build` makes an sdist and, from it, a wheel; the wheel installed without
extras into a fresh venv outside the checkout (tests/venvkit.py: only the distributions the package requires) runs
every command, and `frontier serve` says in one line which extra it needs.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import venvkit
from faultkit import mock_config, read_summary, write_config
from frontier import __version__
from frontier.__main__ import COMMANDS
from frontier.testing import MockWeb, SiteSpec

pytestmark = pytest.mark.timeout(300)

EXTRA_MODULES = ("grpc", "google.protobuf", "scrapy", "redis")  # what the service, scrapy and redis extras bring
UPLOT_LICENCE = "frontier/console/static/vendor/uplot/LICENSE"
CONSOLE_PAGE = ("frontier/console/static/index.html", "frontier/console/static/console.js",
                "frontier/console/static/console.css", "frontier/console/static/vendor/uplot/uPlot.iife.min.js",
                "frontier/console/static/vendor/uplot/uPlot.min.css", "frontier/console/static/vendor/uplot/README",
                UPLOT_LICENCE)
SDIST_FILES = ("frontier/_native.c", "workers/_linkscan.c", "workers/_linkscan_impl.h", "frontier/vendor/xxhash.h",
               "frontier/vendor/LICENSE-xxhash", "frontier/urlfrontier/urlfrontier.proto", "frontier/py.typed",
               "frontier/state/lua/frontier.lua", "frontier/state/lua/seen.lua",
               "frontier/urlfrontier/lua/urlfrontier.lua", "LICENSE", "setup.py", "pyproject.toml", "README.md",
               *CONSOLE_PAGE)
WHEEL_FILES = ("frontier/py.typed", "frontier/urlfrontier/urlfrontier.proto", "frontier/vendor/LICENSE-xxhash",
               "frontier/state/lua/frontier.lua", "frontier/state/lua/seen.lua", "frontier/urlfrontier/lua/urlfrontier.lua",
               "frontier/__main__.py", "workers/fetcher.py", *CONSOLE_PAGE)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel `python -m build` makes from a copy of the checkout (no compiled files in it), or those
    .ci/run built (venvkit.built_dist): the wheel the suite runs against."""
    built = venvkit.built_dist()
    if built is not None:
        return built
    base = tmp_path_factory.mktemp("release")
    src = venvkit.copy_source(base / "src", extensions=False)
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(base / "dist"), str(src)],
                   check=True, timeout=venvkit.INSTALL_TIMEOUT, capture_output=True)
    return base / "dist"


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("frontier_crawl-*.whl")
    return wheel


def plain_venv(base: Path, wheel: Path) -> Path:
    """`wheel` installed into a fresh venv that holds only the package's required distributions (no extras)."""
    with zipfile.ZipFile(wheel) as z:
        metadata = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    requirements = re.findall(r"^Requires-Dist: (.+)$", metadata, flags=re.M)
    bin_dir = venvkit.make_venv(base / "env", [venvkit.core_site(base / "core", requirements)])
    venvkit.install(bin_dir, wheel)
    return bin_dir


@pytest.fixture(scope="module")
def plain(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plain_venv(tmp_path_factory.mktemp("plain"), _wheel(dist))


def frontier(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return venvkit.run(bin_dir, cwd, "frontier", *args)


def test_sdist_holds_the_sources_a_build_needs(dist: Path) -> None:
    (sdist,) = dist.glob("frontier_crawl-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {name.partition("/")[2] for name in tar.getnames()}
    assert not [f for f in SDIST_FILES if f not in names], sorted(names)


def test_wheel_holds_the_package_data_and_the_licences(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as z:
        names = set(z.namelist())
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        fields = z.read(metadata).decode()
    assert not [f for f in WHEEL_FILES if f not in names], sorted(names)
    licences = {n.split(".dist-info/licenses/", 1)[1] for n in names if ".dist-info/licenses/" in n}
    assert licences == {"LICENSE", "frontier/vendor/LICENSE-xxhash", UPLOT_LICENCE}, licences
    assert "License-Expression: MIT AND BSD-2-Clause" in fields
    assert f"\nVersion: {__version__}\n" in fields and "\nName: frontier-crawl\n" in fields


def test_the_plain_install_has_no_extra(plain: Path, tmp_path: Path) -> None:
    """The venv really lacks the extras (else the tests below would prove nothing), and runs the installed wheel."""
    probe = "import importlib.util as u, frontier; print([m for m in %r if u.find_spec(m.split('.')[0])]); " \
            "print(frontier.__file__, frontier.__version__)" % (EXTRA_MODULES,)
    done = venvkit.run(plain, tmp_path, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    found, where = done.stdout.splitlines()
    assert found == "[]", found
    assert "site-packages" in where and str(venvkit.ROOT) not in where and where.endswith(f" {__version__}"), where


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_every_command_has_help_without_the_extras(plain: Path, tmp_path: Path, command: str | None) -> None:
    done = frontier(plain, tmp_path, *([command] if command else []), "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: frontier"), done.stdout + done.stderr


def test_version_is_the_package_version(plain: Path, tmp_path: Path) -> None:
    done = frontier(plain, tmp_path, "--version")
    assert (done.returncode, done.stdout) == (0, f"frontier-crawl {__version__}\n"), done.stdout + done.stderr
    installed = venvkit.run(plain, tmp_path, "python", "-c",
                            "import importlib.metadata as m; print(m.version('frontier-crawl'))")
    assert installed.stdout == f"{__version__}\n", installed.stdout + installed.stderr


def test_serve_names_the_extra_in_one_line(plain: Path, tmp_path: Path) -> None:
    done = frontier(plain, tmp_path, "serve", "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "pip install 'frontier-crawl[service]'" in done.stderr, done.stderr
    assert not (tmp_path / "data").exists()


@pytest.fixture
def web() -> Iterator[MockWeb]:
    with MockWeb.serve_in_thread(SiteSpec(pages=30, hosts=1, seed=42, errors=False)) as w:
        yield w


def test_crawl_and_status_without_the_extras(plain: Path, tmp_path: Path, web: MockWeb) -> None:
    data = tmp_path / "data"
    config = write_config(tmp_path / "crawl.yaml", mock_config(web, data, workers={"processes": 1}))
    done = frontier(plain, tmp_path, "crawl", "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    fetched = read_summary(data)["fetched"]
    status = frontier(plain, tmp_path, "status", str(data))
    assert status.returncode == 0 and f"{fetched:,}" in status.stdout, status.stdout + status.stderr


def test_the_sdist_installs_without_a_compiler(dist: Path, tmp_path: Path) -> None:
    """No C compiler (CC=false): the optional extensions are left out and frontier runs its numpy and lexbor path."""
    (sdist,) = dist.glob("frontier_crawl-*.tar.gz")
    env = {**venvkit.outside(Path(sys.executable).parent), "CC": "false"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--disable-pip-version-check", "-w", str(tmp_path / "wheel"), str(sdist)],
                   check=True, timeout=venvkit.INSTALL_TIMEOUT, capture_output=True, env=env)
    wheel = _wheel(tmp_path / "wheel")
    with zipfile.ZipFile(wheel) as z:
        assert not [n for n in z.namelist() if n.endswith(".so")], z.namelist()
    bin_dir = plain_venv(tmp_path / "venv", wheel)
    probe = ("import frontier, frontier.native, workers.links as links; "
             "print(frontier.native.native(), links._built_scan, frontier.canonicalize('HTTP://A.example:80/./x'))")
    done = venvkit.run(bin_dir, tmp_path, "python", "-c", probe)
    assert done.stdout == "None None http://a.example/x\n", done.stdout + done.stderr
    assert frontier(bin_dir, tmp_path, "--help").returncode == 0


def test_the_installed_wheel_joins_the_same_functions_library(plain: Path, tmp_path: Path) -> None:
    """The .lua files ship as package data: the installed package joins the library this checkout joins (the URL
    Frontier service's needs the redis extra, which this venv lacks; its files are in WHEEL_FILES)."""
    from frontier.state.redis_lua import FRONTIER

    probe = "from frontier.state.redis_lua import FRONTIER; print(FRONTIER.version)"
    done = venvkit.run(plain, tmp_path, "python", "-c", probe)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == FRONTIER.version
