"""The library examples of the README and of the library guide (docs/guide/library.md) run as written (with a
loopback mock web and a tmp data dir), and the configuration reference (docs/config.md) is the one frontier.config
documents."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from frontier.config import config_key_reference
from frontier.testing import SiteSpec
from frontier.testing.mockweb import MockWeb

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
LIBRARY = (ROOT / "docs" / "guide" / "library.md").read_text()
CONFIG_REFERENCE = (ROOT / "docs" / "config.md").read_text()


def block(marker: str, text: str = LIBRARY) -> str:
    """The one python block of `text` that contains `marker`."""
    (found,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if marker in b]
    return found


def test_custom_crawler_example_crawls_exactly_the_reachable_pages(tmp_path: Path) -> None:
    with MockWeb.serve_in_thread(SiteSpec(pages=200, hosts=1)) as web:
        code = block("async def crawl").replace('"http://127.0.0.1:8081/"', repr(web.seed))
        # the mock web at full speed and counted exactly: no politeness delay, no trap detection (the soft-404
        # probe is one more request than the site's own); see faultkit.mock_config
        code = code.replace('"storage": {"data_dir": "my-crawl"}', '"storage": {"data_dir": "my-crawl"}, '
                            '"politeness": {"delay": 0}, "traps": {"patterns": False, "soft_404": False}')
        exec(compile(code.replace('"my-crawl"', repr(str(tmp_path / "crawl"))), "README", "exec"), {})
        assert web.counts == web.graph.expected_requests(web.ports)


@pytest.mark.parametrize("text", [README, LIBRARY], ids=["README", "library guide"])
def test_seen_test_example(tmp_path: Path, text: str) -> None:
    code = block("capacity=10_000_000", text).replace("data/seen", str(tmp_path / "seen"))
    exec(compile(code, "README", "exec"), {"links": ["http://a.example/", "mailto:x", "http://a.example/"]})


def test_discard_and_whitelist_example(tmp_path: Path) -> None:
    exec(compile(block("deletable=True").replace("data/seen", str(tmp_path / "seen")), "README", "exec"), {})


def test_shared_bloom_example() -> None:
    exec(compile(block("SharedBloom.create"), "README", "exec"), {})


def test_the_configuration_reference_lists_every_key_with_its_default() -> None:
    """docs/config.md's table is config_key_reference(), row for row: a key added, renamed or given another
    default without the docs following fails here."""
    start = CONFIG_REFERENCE.index("| key | default | meaning |")
    table = CONFIG_REFERENCE[start:CONFIG_REFERENCE.index("\n\n", start)].splitlines()[2:]
    assert table == [f"| `{key}` | `{default}` | {meaning} |" for key, default, meaning in config_key_reference()]


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a file's headings (lowercased, punctuation dropped, spaces to hyphens)."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
            for title in re.findall(r"^#{1,6} (.+)$", prose, re.M)}


def local_links(markdown: str) -> list[tuple[str, str]]:
    """(path, anchor) of every Markdown link that is not a URL: a path relative to the file, or '' for the file."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    targets = re.findall(r"\]\(([^)\s]+)\)", prose)
    return [tuple(t.partition("#")[::2]) for t in targets if not re.match(r"[a-z]+:", t)]  # type: ignore[misc]


def broken_links(markdown: str, page: Path) -> list[str]:
    """The relative links of `page` (whose text is `markdown`) to a file that does not exist, or to an anchor that
    is not one of its target's headings."""
    broken = []
    for path, anchor in local_links(markdown):
        target = page.parent / path if path else page
        if not target.is_file() or anchor and anchor not in heading_anchors(target.read_text()):
            broken.append(f"{path}#{anchor}" if anchor else path)
    return broken


def test_the_readme_links_to_files_and_anchors_that_exist() -> None:
    """README.md is outside the docs site, whose links and anchors `mkdocs build --strict` checks (mkdocs.yml
    `validation:`): its own relative links are checked here."""
    assert len(local_links(README)) > 10  # the check found the links
    assert broken_links(README, ROOT / "README.md") == []


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    text = ("# Install and run\n\n```\n# not a heading\n```\n"
            "[a](docs/no-such-page.md) [b](#install-and-run) [c](#not-a-heading) [d](page.md#install-and-run)")
    (tmp_path / "page.md").write_text(text)
    assert heading_anchors(text) == {"install-and-run"}
    assert broken_links(text, tmp_path / "page.md") == ["docs/no-such-page.md", "#not-a-heading"]
