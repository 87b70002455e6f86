"""The demo config's web (`demo:` in crawl.yaml): the built-in mock web served on loopback for the crawl.

A rerun serves the same web on the same ports (kept in the data dir's demo_ports.json), so the crawl resumes
instead of starting anew. Started by the crawl command (frontier.cli.supervisor) before the crawl processes.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from frontier.config import CrawlConfig

if TYPE_CHECKING:
    from frontier.testing.mockweb import MockWebProcess


def start_demo_web(cfg: CrawlConfig) -> tuple[MockWebProcess, CrawlConfig]:
    """Serve the built-in mock web on free loopback ports; point seeds and scope at it."""
    from frontier.testing import SiteSpec
    from frontier.testing.mockweb import MockWebProcess

    demo = cfg.demo
    spec = SiteSpec(pages=demo.pages, hosts=demo.hosts, links_per_page=demo.links_per_page, seed=demo.seed,
                    hostile=demo.hostile)
    ports_file = Path(cfg.storage.data_dir) / "demo_ports.json"
    try:  # a rerun serves the same web on the same ports, so the crawl resumes instead of starting anew
        web = MockWebProcess(spec, ports=json.loads(ports_file.read_text()) if ports_file.exists() else None)
    except Exception:
        web = MockWebProcess(spec)
    ports_file.write_text(json.dumps(web.ports))
    hosts = tuple(url.split("://", 1)[1] for url in web.base_urls)
    scope = dataclasses.replace(cfg.scope, allowed_hosts=hosts)
    print(f"demo: mock web of {demo.pages} pages on {', '.join(hosts)}", flush=True)
    return web, dataclasses.replace(cfg, seeds=(web.seed,), scope=scope)
