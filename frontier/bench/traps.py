"""`python -m frontier.bench traps`: the trap defences on full-size webs, crawled by run_frontier.py with the
default config (configs/crawl.yaml) on loopback; one row per check:

    trap-site          the trap site with every trap on (frontier.testing.traps: templated, its fan-out's pages
                       distinct items that keep linking more), politeness.delay 0: normal pages fetched of 50,
                       trap requests (everything but the normal pages, the item site and robots.txt)
    trap-site-polite   the same with the template's polite default (1 s per host, adaptive), stopped after
                       --polite-seconds: the request number of the last normal page among the trap site's requests (crawl
                       log order, robots.txt not counted; the item site is another host, crawled meanwhile)
    template-web       a 100-host web of 20,000 plain template pages (frontier.testing.templateweb) with hosts of
                       3,647 and 1,133 pages of one pattern: pages missed
    corpus             tests/test_traps_corpus.py (Debian documentation packages): run by pytest, its rows

Each crawl runs with a temporary data dir and prints its end line's suspected-traps lines when there are some.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from frontier.bench.profiling import PACKAGES
from frontier.cli.commands import crawl_command

ROOT = PACKAGES  # the checkout, whose tests/test_traps_corpus.py the corpus check runs
CHECKS = ("trap-site", "trap-site-polite", "template-web", "corpus")


def _crawl(cfg: dict[str, Any], workdir: Path, timeout: float) -> tuple[int | None, str, float]:
    """Run `frontier crawl` on `cfg`; (exit status or None when stopped at `timeout`, stdout, seconds)."""
    path = workdir / "crawl.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    start = time.monotonic()
    proc = subprocess.Popen([*crawl_command(), "--config", str(path)], cwd=PACKAGES,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out, time.monotonic() - start
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
        return None, out, time.monotonic() - start


def _config(seeds: list[str], data: Path, **extra: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"seeds": seeds, "storage": {"data_dir": str(data)}, "output": {"progress": "off"}}
    cfg.update(extra)
    return cfg


def _suspected_lines(out: str) -> list[str]:
    lines = out.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("suspected traps:")), None)
    return [] if at is None else [lines[at]] + [line for line in lines[at + 1: at + 12] if line.startswith("  ")]


def trap_site(workdir: Path, polite: bool, seconds: float) -> dict[str, Any]:
    from frontier.testing.traps import TrapSpec, TrapWeb

    with TrapWeb.serve_in_thread(TrapSpec(items=600, templated=True, fanout_items=True)) as web:
        extra = {} if polite else {"politeness": {"delay": 0}}
        code, out, took = _crawl(_config([web.seed, web.items_seed], workdir / "data", **extra), workdir,
                                 seconds if polite else 600)
        snap = web.snapshot()
        kinds = web.requests_by_kind(snap["counts"])
        normal = set(web.normal_urls())
        fetched = {url for url in snap["counts"] if url in normal}
        row: dict[str, Any] = {"check": "trap-site-polite" if polite else "trap-site", "exit": code,
                               "seconds": round(took, 1), "normal": f"{len(fetched)}/{len(normal)}",
                               "trap_requests": sum(n for k, n in kinds.items() if k not in ("normal", "items", "robots")),
                               "requests": snap["total"], "suspected": _suspected_lines(out)}
        if polite:
            order = [url for url in _logged_urls(workdir / "data" / "crawl.jsonl") if url.startswith(web.seed)]
            row["last_normal_at"] = max((i + 1 for i, url in enumerate(order) if url in normal), default=None)
        return row


def _logged_urls(log: Path) -> list[str]:
    """The URLs of a crawl log's records, in order: the crawl's requests (robots.txt is not logged)."""
    import json

    urls = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            urls.append(json.loads(line).get("url", ""))
        except ValueError:
            continue
    return urls


def template_web(workdir: Path) -> dict[str, Any]:
    from frontier.testing.templateweb import TemplateSpec, TemplateWeb

    with TemplateWeb.serve_in_thread(TemplateSpec()) as web:
        seeds = [base + "/" for base in web.base_urls]  # the default scope keeps a crawl on its seeds' hosts
        code, out, took = _crawl(_config(seeds, workdir / "data", politeness={"delay": 0}), workdir, 1800)
        counts = web.snapshot()["counts"]
        missed = [url for url in web.urls() if not counts.get(url)]
        return {"check": "template-web", "exit": code, "seconds": round(took, 1), "pages": len(web.urls()),
                "missed": len(missed), "requests": sum(counts.values()), "suspected": _suspected_lines(out)}


def corpus() -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                           "tests/test_traps_corpus.py"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=1800)
    rows = [line for line in proc.stdout.splitlines() if "missed" in line or "passed" in line or "skipped" in line]
    return {"check": "corpus", "exit": proc.returncode, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m frontier.bench traps", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checks", default=",".join(CHECKS), help=f"comma-separated, from {','.join(CHECKS)}")
    p.add_argument("--polite-seconds", type=float, default=240.0, help="how long the polite crawl runs")
    args = p.parse_args(argv)
    checks = [c for c in args.checks.split(",") if c]
    unknown = set(checks) - set(CHECKS)
    if unknown:
        p.error(f"unknown checks: {', '.join(sorted(unknown))}")
    rows = []
    for check in checks:
        with tempfile.TemporaryDirectory(prefix="bench-traps-") as tmp:
            if check == "trap-site":
                row = trap_site(Path(tmp), False, 0)
            elif check == "trap-site-polite":
                row = trap_site(Path(tmp), True, args.polite_seconds)
            elif check == "template-web":
                row = template_web(Path(tmp))
            else:
                row = corpus()
        rows.append(row)
        lines = row.pop("suspected", None) or row.pop("rows", None) or []
        print(" | ".join(f"{k} {v}" for k, v in row.items()), flush=True)
        for line in lines:
            print("    " + line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
