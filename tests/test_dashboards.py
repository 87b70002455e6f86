"""deploy/: the Grafana dashboard and the Prometheus alert rules read metrics a real crawl exports.

The oracle is a scrape of output.metrics during a real crawl of the mock web: every metric an expression of the
dashboard or of the rules names must be among the scrape's samples, and every label it matches on must be a
label of that metric. A family renamed in frontier/crawl/metrics.py fails here. The rules' own syntax and their
unit tests are promtool's (.ci/run: promtool check rules, promtool test rules).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from crawlcmd import ROOT
from faultkit import CrawlRun, mock_config, wait_for, write_config
from frontier.testing import MockWeb, SiteSpec
from test_metrics import free_port

DASHBOARD = ROOT / "deploy" / "grafana" / "frontier-dashboard.json"
RULES = ROOT / "deploy" / "prometheus" / "frontier-alerts.yml"
RUN_TIMEOUT = 90.0

# A metric in PromQL: a name of ours (frontier_*, process_*), then optionally {matchers}
METRIC = re.compile(r"\b((?:frontier|process)_[a-zA-Z0-9_]+)\b(\{[^}]*\})?")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
# labels Prometheus adds to every target's samples; $job is the dashboard's variable
TARGET_LABELS = {"job", "instance"}


def dashboard_exprs() -> Iterator[tuple[str, str]]:
    """(panel title, expr) of every query of the dashboard, rows' nested panels included."""
    def walk(panels: list[dict]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets", []):
                yield panel["title"], target["expr"]
            yield from walk(panel.get("panels", []))
    yield from walk(json.loads(DASHBOARD.read_text())["panels"])


def rule_exprs() -> Iterator[tuple[str, str]]:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule["record"], rule["expr"]


def scrape_labels(text: str) -> dict[str, set[str]]:
    """sample name -> the label names its samples carry."""
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, set()).update(sample.labels)
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The samples (and their label names) a crawl's /metrics serves once it has fetched pages."""
    import urllib.request

    tmp = tmp_path_factory.mktemp("metrics")
    port = free_port()

    def scrape() -> dict[str, set[str]] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
                labels = scrape_labels(response.read().decode())
        except OSError:
            return None
        return labels if "frontier_pages_fetched_total" in labels and "frontier_outcomes_total" in labels else None

    with MockWeb.serve_in_thread(SiteSpec(pages=300, hosts=2, seed=5)) as web:
        cfg = mock_config(web, tmp / "data", output={"progress": "off", "metrics": f"127.0.0.1:{port}"},
                          workers={"processes": 1, "concurrency": 4}, politeness={"delay": 0.02})
        run = CrawlRun(write_config(tmp / "crawl.yaml", cfg), tmp, "crawl")
        try:
            labels = wait_for(scrape, RUN_TIMEOUT, "a scrape with pages fetched")
            assert run.wait(RUN_TIMEOUT) == 0, run.output()
        finally:
            if run.running():
                run.kill_group()
    return labels


@pytest.mark.parametrize("source, exprs", [("dashboard", list(dashboard_exprs())), ("rules", list(rule_exprs()))])
def test_every_expression_reads_metrics_the_crawl_exports(source: str, exprs: list[tuple[str, str]],
                                                         exported: dict[str, set[str]]) -> None:
    assert exprs, f"no expression in the {source}"
    problems = []
    for title, expr in exprs:
        found = METRIC.findall(expr)
        if not found:
            problems.append(f"{title}: names no frontier_ or process_ metric: {expr}")
        for name, matchers in found:
            if name not in exported:
                problems.append(f"{title}: {name} is not exported")
                continue
            for label in MATCHER.findall(matchers):
                if label not in exported[name] | TARGET_LABELS:
                    problems.append(f"{title}: {name} has no label {label!r}")
    assert not problems, "\n".join(problems)


def test_the_metric_pattern_finds_names_and_labels() -> None:
    """The check above can fail: a renamed family or a wrong label is reported."""
    expr = 'sum(rate(frontier_outcomes_total{job=~"$job", outcome="http_429"}[5m])) / max(frontier_pages_fetched)'
    assert METRIC.findall(expr) == [("frontier_outcomes_total", '{job=~"$job", outcome="http_429"}'),
                                    ("frontier_pages_fetched", "")]
    assert MATCHER.findall('{job=~"$job", outcome!="ok"}') == ["job", "outcome"]


def test_the_dashboard_is_importable_json() -> None:
    dash = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    assert dash["uid"] and dash["title"]
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "job"} <= names
    for panel in dash["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
