"""The `frontier` console script, installed for real into a fresh venv: `frontier --help`, `frontier
crawl`, `frontier status` and `frontier fresh`, run outside the checkout.

The venv (tests/venvkit.py) sees every dependency of this venv; frontier is installed by pip from a copy of the
source, so the script and the package are what a user's install makes.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import venvkit
from faultkit import mock_config, read_summary, write_config
from frontier.testing import MockWeb, SiteSpec
from venvkit import outside

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with frontier installed from a copy of this checkout (or the wheel .ci/run built); returns its bin
    directory."""
    base = tmp_path_factory.mktemp("venv")
    built = venvkit.built_dist()
    bin_dir = venvkit.make_venv(base / "env")
    venvkit.install(bin_dir, next(built.glob("frontier_crawl-*.whl")) if built else venvkit.copy_source(base / "src"))
    return bin_dir


def frontier(bin_dir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed script, run from `cwd` (outside the checkout)."""
    return venvkit.run(bin_dir, cwd, "frontier", *args)


@pytest.fixture
def web() -> Iterator[MockWeb]:
    with MockWeb.serve_in_thread(SiteSpec(pages=60, hosts=1, seed=27, errors=False)) as w:
        yield w


def test_the_installed_package_is_the_one_run(venv: Path, tmp_path: Path) -> None:
    done = subprocess.run([str(venv / "python"), "-c", "import frontier; print(frontier.__file__)"], cwd=tmp_path,
                          env=outside(venv), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the venv's own copy (not one a site dir of the venv shows it, as this venv's, when the suite tests a wheel)
    assert done.stdout.startswith(f"{venv.parent}/") and "site-packages" in done.stdout, done.stdout
    assert str(ROOT) not in done.stdout, done.stdout


def test_help_lists_every_command(venv: Path, tmp_path: Path) -> None:
    done = frontier(venv, tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    for command in ("crawl", "fresh", "status", "export", "params", "blacklist", "recrawl"):
        assert f"    {command}" in done.stdout, done.stdout
    crawl_help = frontier(venv, tmp_path, "crawl", "--help")
    assert crawl_help.returncode == 0 and "then crawl" in " ".join(crawl_help.stdout.split()), crawl_help.stdout


def test_crawl_status_and_fresh_from_outside_the_checkout(venv: Path, tmp_path: Path, web: MockWeb) -> None:
    data = tmp_path / "data"
    config = write_config(tmp_path / "crawl.yaml", mock_config(web, data, workers={"processes": 1}))
    done = frontier(venv, tmp_path, "crawl", "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    summary = read_summary(data)
    assert summary["done"] and summary["fetched"] >= 60, summary  # the site's pages, and the links to missing ones
    status = frontier(venv, tmp_path, "status", str(data))
    assert status.returncode == 0 and f"{summary['fetched']:,}" in status.stdout, status.stdout + status.stderr
    fresh = frontier(venv, tmp_path, "fresh", "--config", str(config), "--yes")
    assert fresh.returncode == 0, fresh.stderr
    assert not (data / "summary.json").exists()
    assert "frontier" in os.listdir(venv)  # the console script, not a module run by path
