"""The console page in a real headless browser (Debian's chromium driven by Playwright) during a real crawl.

run_frontier.py crawls the mock web, served from a thread of this process so its request log is the oracle: the
page loads and its numbers rise; its rate chart (uPlot) draws both series, keeps its canvas from poll to poll and
follows the page's width; its Pause button stops the requests (the fetches in flight finish, then none for
seconds while URLs are still queued) and Resume starts them again; a seed added through its form is requested; a
bad regex in its exclusion form shows the server's error next to the form and the crawl goes on. A second crawl
steers hosts from the page: an excluded host (its purged count shown) and a blocked one get no request, a delay
spaces a host's requests, retire shows in the table, a checkpoint lands in the directory typed; and the page served
without its token tag (as to another machine) asks for the token and refuses a wrong one. A third releases a
suspected trap pattern with its row's button: the URLs the pattern held are fetched by the next run (without the
release they are not). The page finds the crawl
at the address in DATA_DIR/console.json. Playwright drives the system's chromium (`executable_path`): no browser is
downloaded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from faultkit import LOOPBACK, CrawlRun, mock_config, wait_for, write_config
from frontier.crawl.process import EXIT_STOPPED
from frontier.crawl.traps import url_pattern
from frontier.testing import MockWeb, SiteSpec
from frontier.testing.traps import TrapSpec, TrapWeb

RUN_TIMEOUT = 120.0
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN_TAG = re.compile(r'<meta name="frontier-token"[^>]*>\s*')
QUIET = 3.0  # seconds without a request that show a pause holds (the crawl makes about 40 requests a second)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None:
        reason = "chromium is not installed (apt-get install chromium, as .ci/run does)"
        if os.geteuid() == 0:  # a root run could have installed it: a skip there would leave the page untested
            pytest.fail(reason)
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def console_address(data_dir: Path) -> str | None:
    """The console's URL from console.json once the crawl has written it."""
    try:
        return json.loads((data_dir / "console.json").read_text())["url"]
    except (OSError, ValueError, KeyError):
        return None


def number(page: Any, selector: str) -> int:
    """An integer the page shows ("1,234"), -1 while it shows none."""
    text = page.inner_text(selector).replace(",", "").strip()
    return int(text) if text.isdigit() else -1


def requests(web: MockWeb) -> int:
    return web.snapshot()["total"]


def quiet_for(web: MockWeb, seconds: float) -> bool:
    """True if the mock web gets no request for `seconds`."""
    before = requests(web)
    time.sleep(seconds)
    return requests(web) == before


def wait_text(page: Any, selector: str, predicate: Any, what: str, timeout: float = 30.0) -> str:
    """The text of `selector` once `predicate` holds for it; the failure names the last text shown."""
    seen = [""]

    def check() -> str | None:
        seen[0] = page.inner_text(selector)
        return seen[0] if predicate(seen[0]) else None
    try:
        return wait_for(check, timeout, what, interval=0.2)
    except AssertionError as e:
        raise AssertionError(f"{e}; {selector} shows {seen[0]!r}") from None


def test_the_page_watches_and_steers_a_crawl(tmp_path: Path, browser: Any) -> None:
    data_dir = tmp_path / "data"
    # `extra` is in scope but no page links to it: a request to it comes only from the seed added on the page
    with MockWeb.serve_in_thread(SiteSpec(pages=1500, hosts=2, seed=21)) as web, \
            MockWeb.serve_in_thread(SiteSpec(pages=3, hosts=1, seed=22)) as extra:
        cfg = mock_config(web, data_dir, workers={"processes": 1, "concurrency": 4},
                          politeness={"delay": 0.05},
                          scope={"allowed_hosts": [f"{LOOPBACK}:{p}" for p in web.ports + extra.ports]})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: d.accept())  # Stop asks to confirm
        try:
            url = wait_for(lambda: console_address(data_dir), RUN_TIMEOUT, "console.json with the console's URL")
            page.goto(url)

            # the page loads during the crawl, and its numbers rise
            wait_text(page, "#state", lambda t: t == "running", "the state 'running'")
            first = wait_for(lambda: (n := number(page, "#fetched")) > 0 and n, 30, "a fetched count on the page")
            wait_for(lambda: number(page, "#fetched") > first, 10, "the fetched count to rise")
            assert number(page, "#queued") > 0
            assert page.inner_text("#log-tail").strip(), "no crawl-log line on the page"
            shown = page.inner_text("#updated")
            wait_for(lambda: page.inner_text("#updated") != shown, 2.5, "the page to update within 2 s")

            # the rate chart: one uPlot chart of two series, drawn, kept across polls (setData), as wide as the page
            wait_text(page, "#rate-summary", lambda t: t.startswith("the last "), "the rate chart's caption")
            assert page.locator("#rate-chart .uplot").count() == 1
            canvas = page.query_selector("#rate-chart .uplot canvas")
            box = canvas.bounding_box()
            assert box and box["width"] > 800 and box["height"] > 100, box
            series = page.locator("#rate-chart .u-legend .u-series th").all_inner_texts()
            assert [s.strip() for s in series[1:]] == ["pages/s", "bytes/s"], series
            page.hover("#rate-chart .u-over")  # the legend shows the values under the cursor
            values = page.locator("#rate-chart .u-legend .u-series .u-value").all_inner_texts()
            assert re.fullmatch(r"[\d,.]+", values[1]) and re.fullmatch(r"[\d.]+ [KMG]?B/s", values[2]), values
            shown = page.inner_text("#updated")
            wait_for(lambda: page.inner_text("#updated") != shown, 2.5, "another poll")
            assert canvas.evaluate("c => c.isConnected") and page.locator("#rate-chart .uplot").count() == 1
            page.set_viewport_size({"width": 900, "height": 900})
            wait_for(lambda: canvas.bounding_box()["width"] < box["width"] - 300, 5, "the chart narrower with the page")
            page.set_viewport_size({"width": 1280, "height": 900})

            # the hosts table: searched and sorted by the server
            wait_for(lambda: page.locator("#hosts tr").count() == 2, 10, "the two hosts in the hosts table")
            page.fill("#hosts-q", str(web.ports[1]))
            wait_for(lambda: page.locator("#hosts tr").count() == 1, 10, "one host left by the search")
            assert str(web.ports[1]) in page.inner_text("#hosts tr")
            page.fill("#hosts-q", "")
            wait_for(lambda: page.locator("#hosts tr").count() == 2, 10, "both hosts again")
            page.click("#hosts-table th[data-key=host] button")
            for desc, order in (("ascending", sorted), ("descending", lambda h: sorted(h, reverse=True))):
                assert page.get_attribute("#hosts-table th[data-key=host]", "aria-sort") == desc
                hosts = [f"{LOOPBACK}:{p}" for p in web.ports]
                wait_for(lambda: page.locator("#hosts tr td:first-child").all_inner_texts() == order(hosts), 10,
                         f"the hosts sorted {desc}")
                page.click("#hosts-table th[data-key=host] button")

            # Pause, from the keyboard: the fetches in flight finish, then no request while URLs wait
            page.focus("#pause")
            page.keyboard.press("Enter")
            wait_text(page, "#crawl-result", lambda t: t.startswith("pause:"), "pause's effect on the page")
            assert "error" not in (page.get_attribute("#crawl-result", "class") or "")
            wait_text(page, "#state", lambda t: t == "paused", "the state 'paused'")
            wait_for(lambda: quiet_for(web, 1.0), 15, "the requests to stop")
            assert quiet_for(web, QUIET), "the mock web was requested during a pause"
            wait_for(lambda: number(page, "#in-flight") == 0, 10, "no fetch in flight on the page")
            assert number(page, "#queued") > 0 and run.running()
            paused_at = requests(web)

            # Resume: requests again
            page.click("#resume")
            wait_text(page, "#state", lambda t: t == "running", "the state 'running' again")
            wait_for(lambda: requests(web) > paused_at + 20, 20, "requests after resume")

            # a seed added through the form is fetched
            page.fill("#seed-urls", extra.seed)
            page.click("#seeds-add")
            effect = wait_text(page, "#seeds-result", lambda t: t.startswith("seeds:") or "failed" in t,
                               "the seeds' effect on the page")
            assert "added: 1" in effect, effect
            wait_for(lambda: extra.snapshot()["counts"].get(extra.seed), 30, "the added seed requested")

            # a bad regex: the server's one-line error next to the form, and the crawl goes on
            page.select_option("#exclude-kind", "regex")
            page.fill("#exclude-value", "([unclosed")
            page.click("#exclude-add")
            error = wait_text(page, "#exclude-result", lambda t: "failed" in t or t.startswith("exclude:"),
                              "the exclusion's answer on the page")
            assert "error" in (page.get_attribute("#exclude-result", "class") or ""), error
            assert error.startswith("exclude failed: ") and len(error) > len("exclude failed: "), error
            assert "regex" in error and "HTTP" not in error, f"not the server's own message: {error}"
            before = requests(web)
            wait_for(lambda: requests(web) > before, 10, "requests after the refused exclusion")
            assert page.inner_text("#state") == "running"

            # the audit log on the page lists what was done
            audit = wait_text(page, "#audit", lambda t: "seeds" in t, "the audit log on the page")
            for action in ("pause", "resume", "seeds"):
                assert action in audit, audit

            # Stop (confirmed): the crawl stops cleanly, as on SIGTERM, with URLs left for a rerun
            page.click("#stop")
            assert run.wait(RUN_TIMEOUT) == EXIT_STOPPED, run.output()
            assert "crawl stopped; rerun the same command to resume" in run.stdout, run.output()
        finally:
            page.close()
            if run.running():
                run.kill_group()
    assert not errors, errors
    assert "Traceback" not in run.stderr, run.output()


def strip_token(route: Any) -> None:
    """Serve the page as to another machine: without the token tag."""
    response = route.fetch()
    route.fulfill(response=response, body=TOKEN_TAG.sub("", response.text()))


def requests_to(web: MockWeb, host: str) -> list[float]:
    """The monotonic start times of the mock web's requests to `host` ("127.0.0.1:PORT")."""
    return web.snapshot()["times"][host]


def silent(web: MockWeb, host: str, seconds: float) -> bool:
    """True if `host` gets no request for `seconds`."""
    before = len(requests_to(web, host))
    time.sleep(seconds)
    return len(requests_to(web, host)) == before


def host_row(page: Any, host: str) -> str:
    """The hosts table's row of `host`, as text ("" while it is not on the page)."""
    row = page.locator("#hosts tr", has_text=host)
    return row.inner_text() if row.count() == 1 else ""


def act(page: Any, button: str, result: str, name: str) -> str:
    """Click `button`; the effect the page shows in `result` (the test fails on an error shown there)."""
    page.click(button)
    text = wait_text(page, result, lambda t: t.startswith(f"{name}:") or "failed" in t, f"{name}'s answer")
    assert text.startswith(f"{name}: "), text
    return text


def test_the_page_asks_for_a_token_and_steers_hosts(tmp_path: Path, browser: Any) -> None:
    data_dir = tmp_path / "data"
    with MockWeb.serve_in_thread(SiteSpec(pages=3000, hosts=3, seed=23)) as web:
        h0, h1, h2 = (f"{LOOPBACK}:{p}" for p in web.ports)
        cfg = mock_config(web, data_dir, workers={"processes": 1, "concurrency": 6}, politeness={"delay": 0.05})
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: d.accept())
        try:
            url = wait_for(lambda: console_address(data_dir), RUN_TIMEOUT, "console.json with the console's URL")
            token = json.loads((data_dir / "console.json").read_text())["token"]

            # without the token tag the page asks for the token; a wrong one is refused, the right one works
            page.route(url, strip_token)
            page.goto(url)
            page.wait_for_selector("#token-form", state="visible")
            wait_text(page, "#problem", lambda t: "token" in t, "the page asking for a token")
            page.fill("#token", "not-the-token")
            page.press("#token", "Enter")
            time.sleep(1.5)
            assert "token" in page.inner_text("#problem") and number(page, "#fetched") == -1
            page.fill("#token", token)
            page.click("#token-form button")
            wait_for(lambda: number(page, "#fetched") > 0, 15, "the numbers once the token is given")
            wait_for(lambda: all(host_row(page, h) for h in (h0, h1, h2)), 15, "the three hosts in the table")

            # exclude a host: the queued URLs it matches are purged (the count shown), and it gets no request
            page.select_option("#exclude-kind", "host")
            page.fill("#exclude-value", h2)
            effect = act(page, "#exclude-add", "#exclude-result", "exclude")
            purged = int(re.fullmatch(r"exclude: purged: ([\d,]+)", effect)[1].replace(",", ""))
            assert purged > 0, effect
            wait_for(lambda: silent(web, h2, 1.0), 10, f"{h2}'s requests to stop")
            assert silent(web, h2, QUIET), f"{h2} requested after its exclusion"

            # block a host picked from the table: none of its requests while blocked, the others go on
            page.click(f"#hosts button.link:text-is('{h1}')")
            assert page.input_value("#host-name") == h1
            page.fill("#host-seconds", "60")
            act(page, "#host-form button[data-action=block]", "#host-result", "block")
            wait_for(lambda: "blocked" in host_row(page, h1), 10, f"{h1} shown blocked")
            wait_for(lambda: silent(web, h1, 1.0), 10, f"{h1}'s requests to stop")
            before = len(requests_to(web, h0))
            assert silent(web, h1, QUIET), f"{h1} requested while blocked"
            assert len(requests_to(web, h0)) > before, f"{h0} not requested while {h1} is blocked"
            act(page, "#host-form button[data-action=unblock]", "#host-result", "unblock")
            before = len(requests_to(web, h1))
            wait_for(lambda: len(requests_to(web, h1)) > before, 15, f"{h1} requested after unblock")

            # a host's delay set on the page spaces its requests
            page.fill("#host-name", h0)
            page.fill("#host-seconds", "0.5")
            act(page, "#host-form button[data-action=delay]", "#host-result", "delay")
            time.sleep(1.0)  # a fetch leased before the order may still start
            start = len(requests_to(web, h0))
            wait_for(lambda: len(requests_to(web, h0)) >= start + 5, 20, f"five requests to {h0}")
            times = requests_to(web, h0)[start:]
            gaps = [b - a for a, b in zip(times, times[1:])]
            assert min(gaps) >= 0.45, gaps

            # retire and unretire a host; the table shows its state
            page.fill("#host-name", h1)
            act(page, "#host-form button[data-action=retire]", "#host-result", "retire")
            wait_for(lambda: "retired" in host_row(page, h1), 10, f"{h1} shown retired")
            act(page, "#host-form button[data-action=unretire]", "#host-result", "unretire")
            wait_for(lambda: "retired" not in host_row(page, h1), 10, f"{h1} no longer shown retired")

            # a checkpoint to a directory typed on the page
            target = tmp_path / "checkpoint"
            page.fill("#checkpoint-dir", str(target))
            effect = act(page, "#checkpoint", "#crawl-result", "checkpoint")
            assert str(target) in effect and target.is_dir() and any(target.iterdir()), effect

            # the exclusion lifted
            page.select_option("#exclude-kind", "host")
            page.fill("#exclude-value", h2)
            assert act(page, "#exclude-remove", "#exclude-result", "unexclude") == "unexclude: removed: 1"

            actions = ("exclude", "block", "unblock", "delay", "retire", "unretire", "checkpoint", "unexclude")
            wait_text(page, "#audit", lambda t: all(re.search(rf"\b{a}\b", t) for a in actions), "every action audited")
            page.click("#stop")
            assert run.wait(RUN_TIMEOUT) == EXIT_STOPPED, run.output()
        finally:
            page.close()
            if run.running():
                run.kill_group()
    assert not errors, errors
    assert "Traceback" not in run.stderr, run.output()


def test_the_page_releases_a_suspected_trap(tmp_path: Path, browser: Any) -> None:
    data_dir = tmp_path / "data"
    calendar = "/cal/N/N"

    def calendar_requests(web: TrapWeb) -> int:
        return sum(n for url, n in web.snapshot()["counts"].items() if url_pattern(url) == calendar)

    # the trap site's calendar, and the mock web to keep the crawl going while the calendar waits
    with TrapWeb.serve_in_thread(TrapSpec(traps=("calendar",), items=0)) as web, \
            MockWeb.serve_in_thread(SiteSpec(pages=3000, hosts=2, seed=24)) as busy:
        cfg = {"seeds": [web.seed, busy.seed], "storage": {"data_dir": str(data_dir)},
               "scope": {"allowed_hosts": [f"{LOOPBACK}:{p}" for p in web.ports + busy.ports]},
               "output": {"progress": "off"}, "politeness": {"delay": 0.05},
               "workers": {"processes": 1, "concurrency": 4}, "traps": {"max_suspect_pages": 10}}
        run = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "crawl")
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: d.accept())
        try:
            page.goto(wait_for(lambda: console_address(data_dir), RUN_TIMEOUT, "console.json with the console's URL"))
            row = page.locator("#traps tr", has_text=calendar)
            wait_for(lambda: row.count() == 1 and "suspected" in row.inner_text(), 30, "the calendar suspected")
            # its budget spent, the pattern's URLs wait for a rerun: no more of its requests
            wait_for(lambda: (n := calendar_requests(web)) and time.sleep(2.0) is None and calendar_requests(web) == n,
                     30, "the calendar's requests to stop")
            held = calendar_requests(web)
            row.get_by_role("button", name="Release").click()
            effect = wait_text(page, "#traps-result", lambda t: t.startswith("release:") or "failed" in t,
                               "release's answer")
            assert effect.startswith("release: ") and "cleared: true" in effect, (effect, run.output())
            wait_for(lambda: row.count() == 0 or "suspected" not in row.inner_text(), 10,
                     "the calendar no longer shown suspected")
            wait_text(page, "#audit", lambda t: "release" in t, "the release audited")
            page.click("#stop")
            assert run.wait(RUN_TIMEOUT) == EXIT_STOPPED, run.output()
        finally:
            page.close()
            if run.running():
                run.kill_group()
        assert not errors, errors
        assert "Traceback" not in run.stderr, run.output()

        # the URLs it held in that run are fetched by the next
        rerun = CrawlRun(write_config(tmp_path / "crawl.yaml", cfg), tmp_path, "rerun")
        try:
            wait_for(lambda: calendar_requests(web) > held + 10, RUN_TIMEOUT, "the released calendar requested")
        finally:
            rerun.proc.send_signal(signal.SIGTERM)  # a clean stop: the supervisor passes it on
            assert rerun.wait(RUN_TIMEOUT) == EXIT_STOPPED, rerun.output()
