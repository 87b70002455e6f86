"""A deterministic synthetic site graph: pure data, no I/O, no aiohttp.

`SiteGraph(SiteSpec(...))` lays out `spec.pages` pages over `spec.hosts` hosts ("127.0.0.1:PORT", the
ports are only bound when a URL is rendered) and answers two questions: what does each page contain
(`PageRenderer.page`, used by the mock server) and which URLs must a correct crawler fetch from the seed
(`SiteGraph.reachable`, used by the tests). Same spec, same graph, in every process.

Layout
  page 0                   "/index.html" on host 0: the seed; links every popular page (and the hostile hub)
  pages 1..P (layer 1)     the popular pages, P = round(sqrt(pages)); most links on every page point here
  layers 2, 3, ...         a tree: each page of layer d has up to `branch` children in layer d+1, plus
                           extra "cross" links into layer d+1 (some with a query string: a new URL)
  last pages/100 ids       orphans: served (200) but linked from nowhere; a crawler never fetches them

Every link of a page in layer d points to layer d+1, or to the seed or a popular page (layer <= 1, all
known once the seed is parsed). So the depth at which a URL is first discovered equals its BFS depth in
any fetch order, and `reachable(max_depth=k)` is exact for a concurrent crawler, not only for a BFS one.

Page kinds in layers >= 2: NORMAL ("/p/N.html", 200), PRIVATE ("/private/p/N.html", 200, disallowed by
the default robots.txt; its children are unreachable unless also linked from elsewhere), NOT_FOUND (404),
SERVER_ERROR (500, permanent), REDIRECT_301 / REDIRECT_302 (to a NORMAL page of the same layer; half of
those targets are linked from nowhere else). Error and redirect responses carry no links.

Links are written in mixed forms that all canonicalise to the same URL: absolute, "HTTP://" scheme case,
protocol-relative, root-relative, relative ("5.html", "../p/5.html", "./p/5.html"), "/x/../" dot
segments, percent-encoded unreserved characters ("/p/%35.html", "/p/5%2ehtml"), fragments, single or
double quotes; queries appear in either parameter order ("?b=2&a=1" is "?a=1&b=2"). Out-of-scope links
go to a closed loopback port and to http://example.invalid/. Host case cannot vary: hosts are IP literals.

What `reachable()` counts: the canonical URL ("http://127.0.0.1:PORT/path", query sorted by key, no
fragment) of every URL a correct crawler requests from the seed: a BFS over links; a URL at depth d is
fetched if d <= max_depth and (obey_robots=False or no robots prefix matches its path+query); its links
get depth d+1 and are followed only from 200 pages; a redirect target gets the depth of the redirecting
URL; links out of scope never count. Error URLs (404/500) and redirect sources are fetched, so they count
(redirect sources can be left out with include_redirect_sources=False). A query variant
("/p/5.html?a=1&b=2") is its own URL: the server serves page 5 for it, with page 5's links. Nothing
under /hostile/ is ever in it: hostile pages link only to /hostile/ paths and to popular pages.
"""

from __future__ import annotations

import bisect
import enum
import math
import posixpath
import random
from array import array
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from frontier.errors import ConfigError

LOOPBACK = "127.0.0.1"
INDEX_PATH = "/index.html"
ROBOTS_PATH = "/robots.txt"
STATS_PATH = "/__stats__"
HOSTILE_PREFIX = "/hostile/"
HOSTILE_HUB = "/hostile/index.html"
INVALID_ORIGIN = "http://example.invalid"

DEFAULT_PAGES = 2000
DEFAULT_HOSTS = 3
DEFAULT_LINKS_PER_PAGE = 20
DEFAULT_REPEAT_SHARE = 0.8
DEFAULT_ROBOTS_DISALLOW = ("/private/",)

# Share of layer >= 2 pages of each kind (the rest is NORMAL), and other knobs of the layout.
PRIVATE_SHARE = 0.05
NOT_FOUND_SHARE = 0.02
SERVER_ERROR_SHARE = 0.01
REDIRECT_SHARE = 0.04  # half 301, half 302
QUERY_SHARE = 0.2  # of cross links that carry a query string
OUT_OF_SCOPE_SHARE = 0.1  # of pages that carry one out-of-scope link
INDEX_LINK_WEIGHT = 0.5  # weight of the seed among the popular pages (rank 1 weighs 1.0)

# Canonical query strings (parameters sorted by key); index 0 is "no query".
QUERIES = ("", "a=1&b=2", "page=2&sort=asc", "k=v&z=9")
_QUERIES_SWAPPED = ("", "b=2&a=1", "sort=asc&page=2", "z=9&k=v")

# Negative link targets.
_CLOSED = -1  # http://127.0.0.1:<closed port>/...
_INVALID = -2  # http://example.invalid/...
_HUB = -3  # the hostile hub, linked from the index when spec.hostile

# Link style byte: bits 0-2 form, 3-4 query index, 5 swapped query order, 6 fragment, 7 single quotes.
_F_ABS, _F_UPPER, _F_PROTO, _F_ROOT, _F_REL, _F_UPDOWN, _F_PCT, _F_DOTABS = range(8)
_Q_SHIFT = 3
_Q_MASK = 0b11 << _Q_SHIFT
_SWAP = 1 << 5
_FRAG = 1 << 6
_SQUOTE = 1 << 7


class PageKind(enum.IntEnum):
    """What the server answers for a page's path."""

    NORMAL = 0  # 200 with links
    PRIVATE = 1  # 200 with links, under /private/
    NOT_FOUND = 2  # 404, no links
    SERVER_ERROR = 3  # 500, no links, every time
    REDIRECT_301 = 4  # 301 to redirect_target(page)
    REDIRECT_302 = 5  # 302 to redirect_target(page)


_LINKED_KINDS = (PageKind.NORMAL, PageKind.PRIVATE)
_REDIRECT_KINDS = (PageKind.REDIRECT_301, PageKind.REDIRECT_302)


@dataclass(frozen=True, kw_only=True)
class SiteSpec:
    """The shape of the synthetic web; see the module docstring for the layout."""

    pages: int = DEFAULT_PAGES
    hosts: int = DEFAULT_HOSTS
    links_per_page: int = DEFAULT_LINKS_PER_PAGE
    repeat_share: float = DEFAULT_REPEAT_SHARE
    seed: int = 1
    robots_disallow: tuple[str, ...] = DEFAULT_ROBOTS_DISALLOW
    crawl_delay: float | None = None
    hostile: bool = False
    redirects: bool = True
    errors: bool = True
    page_padding: int = 0
    out_of_scope_links: bool = True

    def __post_init__(self) -> None:
        def _int(key: str, low: int, high: int) -> None:
            value = getattr(self, key)
            if type(value) is not int or not low <= value <= high:
                raise ConfigError(f"must be an int in [{low}, {high}], got {value!r}", key)

        _int("pages", 2, 10_000_000)
        _int("hosts", 1, 256)
        _int("links_per_page", 1, 10_000)
        _int("seed", -(2**63), 2**63)
        _int("page_padding", 0, 64 * 2**20)
        share = self.repeat_share
        if not isinstance(share, (int, float)) or isinstance(share, bool) or not 0.0 <= share <= 1.0:
            raise ConfigError(f"must be a number in [0, 1], got {share!r}", "repeat_share")
        delay = self.crawl_delay
        if delay is not None and (
            not isinstance(delay, (int, float)) or isinstance(delay, bool) or not 0 <= delay < math.inf
        ):
            raise ConfigError(f"must be None or a finite number >= 0, got {delay!r}", "crawl_delay")
        disallow = self.robots_disallow
        if isinstance(disallow, str) or not all(isinstance(p, str) for p in disallow):
            raise ConfigError(f"must be a sequence of path prefixes, got {disallow!r}", "robots_disallow")
        disallow = tuple(disallow)
        for prefix in disallow:
            if not prefix.startswith("/") or any(c.isspace() or c == "#" for c in prefix):
                raise ConfigError(f"a prefix starts with '/' and has no space or '#': {prefix!r}", "robots_disallow")
        object.__setattr__(self, "robots_disallow", disallow)
        for key in ("hostile", "redirects", "errors", "out_of_scope_links"):
            if type(getattr(self, key)) is not bool:
                raise ConfigError(f"must be a bool, got {getattr(self, key)!r}", key)


class SiteGraph:
    """The pages, kinds, hosts and links of one `SiteSpec`; building it is deterministic.

    A node of the crawl is (page, query index); URLs are only formed when ports are given.
    """

    def __init__(self, spec: SiteSpec | None = None) -> None:
        self.spec = spec if spec is not None else SiteSpec()
        s = self.spec
        rng = random.Random(s.seed)
        n = s.pages
        self.fresh = max(1, s.links_per_page - round(s.links_per_page * s.repeat_share))
        self.repeats = s.links_per_page - self.fresh
        self.branch = max(1, self.fresh // 2)
        self.popular = min(n - 1, max(1, round(math.sqrt(n))))
        self.orphans = min(n // 100, max(0, n - 2 - self.popular))
        end = n - self.orphans

        # Per page: its PageKind value and its host index (read directly by the mock web's request handler).
        self.page_kinds = bytearray(n)
        self.page_hosts = array("H", [0]) + array("H", (rng.randrange(s.hosts) for _ in range(n - 1)))
        self._redirect: dict[int, int] = {}
        self.layers: list[range] = [range(0, 1), range(1, self.popular + 1)]
        children: dict[int, list[int]] = {}
        cross_pool: dict[int, list[int]] = {}  # layer index -> pages other pages may link to
        redirect_only = bytearray(n)

        # Lay out layers >= 2: kinds, redirect targets, tree parents.
        cur, start = self.layers[1], self.popular + 1
        while start < end:
            expanders = [p for p in cur if self.page_kinds[p] <= PageKind.PRIVATE]
            layer = range(start, min(end, start + self.branch * len(expanders)))
            for p in layer[1:]:
                self.page_kinds[p] = self._draw_kind(rng)
            normals = [p for p in layer if self.page_kinds[p] == PageKind.NORMAL]
            rng.shuffle(normals)
            for p in layer:
                if self.page_kinds[p] in _REDIRECT_KINDS:
                    if not normals:
                        self.page_kinds[p] = PageKind.NORMAL
                        continue
                    target = normals.pop()
                    self._redirect[p] = target
                    if len(self._redirect) % 2:
                        redirect_only[target] = 1
            for j, c in enumerate(layer):
                if not redirect_only[c]:
                    children.setdefault(expanders[j % len(expanders)], []).append(c)
            cross_pool[len(self.layers)] = [c for c in layer if not redirect_only[c]]
            self.layers.append(layer)
            cur, start = layer, layer.stop

        # Links, stored flat: page p's links are _targets/_styles[_offsets[p]:_offsets[p + 1]].
        ranked = [0] + list(range(1, self.popular + 1))
        weights = [INDEX_LINK_WEIGHT] + [1.0 / r for r in range(1, self.popular + 1)]
        cum, total = [], 0.0
        for w in weights:
            total += w
            cum.append(total)
        self._offsets = array("L", [0])
        self._targets = array("l")
        self._styles = bytearray()
        layer_starts = [layer.start for layer in self.layers]
        oos_count = 0
        for p in range(n):
            links: list[tuple[int, int]] = []
            kind = self.page_kinds[p]
            if p == 0:
                links = [(t, rng.getrandbits(8) & ~(_Q_MASK | _SWAP)) for t in range(1, self.popular + 1)]
                if s.hostile:
                    links.append((_HUB, 0))
                if s.out_of_scope_links:
                    links += [(_CLOSED, 0), (_INVALID, 0)]
            elif kind in _LINKED_KINDS:
                if p >= end:
                    layer_index = -1
                else:
                    layer_index = bisect.bisect_right(layer_starts, p) - 1
                kids = children.get(p, ())
                links = [(c, rng.getrandbits(8) & ~(_Q_MASK | _SWAP)) for c in kids]
                pool = cross_pool.get(layer_index + 1) if layer_index >= 0 else None
                n_cross = self.fresh - len(kids)
                if pool:
                    for _ in range(n_cross):
                        style = rng.getrandbits(8) & ~_Q_MASK
                        if rng.random() < QUERY_SHARE:
                            style |= rng.randrange(1, len(QUERIES)) << _Q_SHIFT
                        links.append((pool[rng.randrange(len(pool))], style))
                    n_repeat = self.repeats
                else:
                    n_repeat = self.repeats + n_cross
                for t in rng.choices(ranked, cum_weights=cum, k=n_repeat):
                    links.append((t, rng.getrandbits(8) & ~(_Q_MASK | _SWAP)))
                rng.shuffle(links)
                # drawn whatever the flag, so the flag only removes these links and changes nothing else
                out_of_scope, style, where = rng.random() < OUT_OF_SCOPE_SHARE, rng.getrandbits(8), rng.random()
                if out_of_scope and s.out_of_scope_links:
                    oos_count += 1
                    link = (_CLOSED if oos_count % 2 else _INVALID, style & _FRAG)
                    links.insert(int(where * (len(links) + 1)), link)
            for t, style in links:
                self._targets.append(t)
                self._styles.append(style)
            self._offsets.append(len(self._targets))

        self._paths = [self._make_path(p) for p in range(n)]

    def _draw_kind(self, rng: random.Random) -> PageKind:
        kind = _DRAW_TABLE[min(int(rng.random() * 100), 99)]
        if (kind in _REDIRECT_KINDS and not self.spec.redirects) or (
            kind in (PageKind.NOT_FOUND, PageKind.SERVER_ERROR) and not self.spec.errors
        ):
            return PageKind.NORMAL
        return kind

    def _make_path(self, page: int) -> str:
        if page == 0:
            return INDEX_PATH
        if self.page_kinds[page] == PageKind.PRIVATE:
            return f"/private/p/{page}.html"
        return f"/p/{page}.html"

    # --- pages ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.spec.pages

    def path(self, page: int) -> str:
        """The path of a page ("/index.html", "/p/N.html" or "/private/p/N.html")."""
        return self._paths[page]

    def host_of(self, page: int) -> int:
        """Index of the page's host in the ports list (the seed is on host 0)."""
        return self.page_hosts[page]

    def kind(self, page: int) -> PageKind:
        return PageKind(self.page_kinds[page])

    def redirect_target(self, page: int) -> int | None:
        """The page a REDIRECT_30x page points to, else None."""
        return self._redirect.get(page)

    def is_orphan(self, page: int) -> bool:
        """True for pages served but linked from nowhere."""
        return page >= self.spec.pages - self.orphans

    def page_at(self, path: str) -> int | None:
        """The page served at a decoded request path, or None (then the answer is 404).

        Dot segments are resolved; a query never changes the page; "/p/05.html" is not "/p/5.html".
        """
        if "/." in path:
            trailing = path.endswith(("/.", "/.."))
            path = posixpath.normpath(path) + ("/" if trailing else "")
        if path == INDEX_PATH:
            return 0
        if path.startswith("/p/"):
            private, number = False, path[3:]
        elif path.startswith("/private/p/"):
            private, number = True, path[11:]
        else:
            return None
        if not number.endswith(".html"):
            return None
        number = number[:-5]
        if not (number.isascii() and number.isdigit()) or (number[0] == "0") or len(number) > 9:
            return None
        page = int(number)
        if page >= self.spec.pages or (self.page_kinds[page] == PageKind.PRIVATE) != private:
            return None
        return page

    def outlinks(self, page: int) -> list[tuple[int, int]]:
        """(target page, query index) of every in-scope link of a page, in document order."""
        lo, hi = self._offsets[page], self._offsets[page + 1]
        return [
            (t, (st & _Q_MASK) >> _Q_SHIFT)
            for t, st in zip(self._targets[lo:hi], self._styles[lo:hi])
            if t >= 0
        ]

    def stats(self) -> dict[str, int]:
        """Counts of pages per kind, layers, links: for logs and the README."""
        kinds = Counter(PageKind(k).name.lower() for k in self.page_kinds)
        return {
            "pages": self.spec.pages,
            "layers": len(self.layers),
            "popular": self.popular,
            "orphans": self.orphans,
            "links": len(self._targets),
            **{f"kind_{k}": v for k, v in sorted(kinds.items())},
        }

    # --- robots ------------------------------------------------------------------------------

    def robots_txt(self) -> str:
        """The robots.txt served on every host."""
        lines = ["User-agent: *"]
        lines += [f"Disallow: {prefix}" for prefix in self.spec.robots_disallow]
        if self.spec.crawl_delay is not None:
            lines.append(f"Crawl-delay: {self.spec.crawl_delay:g}")
        return "\n".join(lines) + "\n"

    def is_disallowed(self, path_and_query: str) -> bool:
        """True if a robots.txt Disallow prefix matches the path (with its query, if any)."""
        return bool(self.spec.robots_disallow) and path_and_query.startswith(self.spec.robots_disallow)

    # --- what a crawler fetches ----------------------------------------------------------------

    def _node_path(self, node: int) -> str:
        page, q = divmod(node, 4)
        return self._paths[page] + ("?" + QUERIES[q] if q else "")

    def _node_url(self, node: int, origins: Sequence[str]) -> str:
        return origins[self.page_hosts[node >> 2]] + self._node_path(node)

    def _walk(self, max_depth: int | None, obey_robots: bool) -> tuple[dict[int, int], list[int]]:
        """0-1 BFS from the seed: (depth of every discovered node, fetched nodes in order)."""
        if max_depth is not None and (type(max_depth) is not int or max_depth < 0):
            raise ConfigError(f"must be None or an int >= 0, got {max_depth!r}", "max_depth")
        depth = {0: 0}
        done: set[int] = set()
        fetched: list[int] = []
        queue = deque([0])
        targets, styles, offsets, kinds = self._targets, self._styles, self._offsets, self.page_kinds
        disallow = self.spec.robots_disallow if obey_robots else ()
        while queue:
            node = queue.popleft()
            if node in done:
                continue
            done.add(node)
            d = depth[node]
            if disallow and self._node_path(node).startswith(disallow):
                continue
            fetched.append(node)
            page = node >> 2
            kind = kinds[page]
            if kind >= PageKind.REDIRECT_301:
                target = self._redirect[page] << 2
                if depth.get(target, d + 1) > d:
                    depth[target] = d
                    queue.appendleft(target)
            elif kind <= PageKind.PRIVATE and (max_depth is None or d < max_depth):
                for i in range(offsets[page], offsets[page + 1]):
                    t = targets[i]
                    if t < 0:
                        continue
                    child = (t << 2) | ((styles[i] & _Q_MASK) >> _Q_SHIFT)
                    if child not in depth:
                        depth[child] = d + 1
                        queue.append(child)
        return depth, fetched

    def _origins(self, ports: Sequence[int]) -> list[str]:
        ports = list(ports)
        if len(ports) != self.spec.hosts:
            raise ConfigError(f"expected {self.spec.hosts} ports, got {len(ports)}", "ports")
        return [f"http://{LOOPBACK}:{p}" for p in ports]

    def reachable(
        self,
        ports: Sequence[int],
        *,
        max_depth: int | None = None,
        obey_robots: bool = True,
        include_redirect_sources: bool = True,
    ) -> set[str]:
        """Canonical URLs a correct crawler fetches from the seed (see the module docstring)."""
        origins = self._origins(ports)
        _, fetched = self._walk(max_depth, obey_robots)
        if not include_redirect_sources:
            fetched = [n for n in fetched if self.page_kinds[n >> 2] < PageKind.REDIRECT_301]
        return {self._node_url(n, origins) for n in fetched}

    def depths(self, ports: Sequence[int], *, obey_robots: bool = True) -> dict[str, int]:
        """Depth of every URL in reachable(ports, obey_robots=...): seed 0, redirect targets as their source."""
        origins = self._origins(ports)
        depth, fetched = self._walk(None, obey_robots)
        return {self._node_url(n, origins): depth[n] for n in fetched}

    def expected_requests(
        self, ports: Sequence[int], *, max_depth: int | None = None, obey_robots: bool = True
    ) -> Counter[str]:
        """What `MockWeb.counts` holds after a correct crawl (hostile routes left out).

        Each URL of reachable(..., include_redirect_sources=True) once, plus, when obey_robots,
        "http://127.0.0.1:PORT/robots.txt" once for every host with a discovered URL within max_depth
        (disallowed URLs count: the crawler needs robots.txt to know they are disallowed). Keys are as
        the server records them, so they match when the crawler requests canonical URLs. A crawler that
        retries 5xx requests the URLs of `error_urls(ports, PageKind.SERVER_ERROR)` more than once.
        """
        origins = self._origins(ports)
        depth, fetched = self._walk(max_depth, obey_robots)
        expected = Counter(self._node_url(n, origins) for n in fetched)
        if obey_robots:
            for host in sorted({self.page_hosts[n >> 2] for n in depth}):
                expected[origins[host] + ROBOTS_PATH] = 1
        return expected

    def page_urls(self, ports: Sequence[int], *, kinds: Sequence[PageKind] | None = None) -> set[str]:
        """Plain URLs (no query) of every page the server knows, optionally of some kinds only."""
        origins = self._origins(ports)
        wanted = set(PageKind) if kinds is None else set(kinds)
        return {origins[self.page_hosts[p]] + self._paths[p] for p in range(self.spec.pages)
                if self.page_kinds[p] in wanted}

    def orphan_urls(self, ports: Sequence[int]) -> set[str]:
        """URLs of pages served with 200 that no page links to."""
        origins = self._origins(ports)
        return {origins[self.page_hosts[p]] + self._paths[p]
                for p in range(self.spec.pages - self.orphans, self.spec.pages)}

    def renderer(self, ports: Sequence[int], closed_port: int) -> PageRenderer:
        """Something that turns pages into bytes for these ports."""
        return PageRenderer(self, ports, closed_port)


_DRAW_TABLE: list[PageKind] = []


def _build_draw_table() -> None:
    """Percent buckets for the kinds of layer >= 2 pages (spec flags are applied by _draw_kind)."""
    shares = [
        (PageKind.PRIVATE, PRIVATE_SHARE),
        (PageKind.NOT_FOUND, NOT_FOUND_SHARE),
        (PageKind.SERVER_ERROR, SERVER_ERROR_SHARE),
        (PageKind.REDIRECT_301, REDIRECT_SHARE / 2),
        (PageKind.REDIRECT_302, REDIRECT_SHARE / 2),
    ]
    for kind, share in shares:
        _DRAW_TABLE.extend([kind] * round(share * 100))
    _DRAW_TABLE.extend([PageKind.NORMAL] * (100 - len(_DRAW_TABLE)))


_build_draw_table()


class PageRenderer:
    """Renders a graph's pages for concrete ports; cheap enough to call per request.

    Per-target strings (absolute, protocol-relative, percent-encoded...) are built once here, so a
    page of 60 links costs one table lookup and one concatenation per link.
    """

    def __init__(self, graph: SiteGraph, ports: Sequence[int], closed_port: int) -> None:
        self.graph = graph
        self.origins = graph._origins(ports)
        self.ports = list(ports)
        self.closed_port = closed_port
        self._closed_origin = f"http://{LOOPBACK}:{closed_port}"
        pad = graph.spec.page_padding
        filler = b"lorem ipsum dolor sit amet, consectetur adipiscing elit. " * (pad // 58 + 1)
        self._padding = b"<p>" + filler[:pad] + b"</p>\n" if pad else b""
        paths, hosts = graph._paths, graph.page_hosts
        origins = self.origins
        upper = [f"HTTP://{LOOPBACK}:{p}" for p in ports]
        proto = [f"//{LOOPBACK}:{p}" for p in ports]
        pct = [_pct(path, t) for t, path in enumerate(paths)]
        self._abs = [origins[hosts[t]] + path for t, path in enumerate(paths)]
        # forms that do not depend on the source page, indexed by form
        self._fixed: dict[int, list[str]] = {
            _F_ABS: self._abs,
            _F_UPPER: [upper[hosts[t]] + path for t, path in enumerate(paths)],
            _F_PROTO: [proto[hosts[t]] + path for t, path in enumerate(paths)],
            _F_DOTABS: [origins[hosts[t]] + "/x/.." + path for t, path in enumerate(paths)],
        }
        # host-relative forms written for a page on another host: absolute or protocol-relative
        self._cross = [(origins if t % 2 else proto)[hosts[t]] + path for t, path in enumerate(paths)]
        self._cross_pct = [(origins if t % 2 else proto)[hosts[t]] + pct[t] for t in range(len(paths))]
        self._paths = paths
        self._pct = pct
        dirs = ("/", "/p/", "/private/p/")
        self._dir = bytearray(dirs.index(_dir(path)) for path in paths)
        self._name = [path.rpartition("/")[2] for path in paths]
        self._rel = [[_rel_prefix(a, b) for b in dirs] for a in dirs]
        self._up = [("../" * (a.count("/") - 1)) or "./" for a in dirs]
        # per style byte: the query and fragment after the href, and the quote around it
        self._suffix = []
        self._quote = []
        for style in range(256):
            q = (style & _Q_MASK) >> _Q_SHIFT
            suffix = "?" + (_QUERIES_SWAPPED if style & _SWAP else QUERIES)[q].replace("&", "&amp;") if q else ""
            if style & _FRAG:
                suffix += f"#s{style % 7}"
            self._suffix.append(suffix)
            self._quote.append("'" if style & _SQUOTE else '"')

    def url(self, page: int, query: int = 0) -> str:
        """Canonical absolute URL of a page (with one of QUERIES)."""
        return self._abs[page] + ("?" + QUERIES[query] if query else "")

    def location(self, page: int) -> str:
        """Location header of a redirect page: relative or root-relative on the same host, else absolute."""
        g = self.graph
        target = g._redirect[page]
        if g.page_hosts[target] != g.page_hosts[page]:
            return self._abs[target]
        if target % 2:
            return self._paths[target]
        return self._rel[self._dir[page]][self._dir[target]] + self._name[target]

    def _links(self, page: int) -> list[tuple[str, int]]:
        """(href without query and fragment, style byte) of every link of a page, in order."""
        g = self.graph
        src_host = g.page_hosts[page]
        src_dir = self._dir[page]
        hosts, fixed = g.page_hosts, self._fixed
        rel, up = self._rel[src_dir], self._up[src_dir]
        out = []
        lo, hi = g._offsets[page], g._offsets[page + 1]
        for i, t, style in zip(range(lo, hi), g._targets[lo:hi], g._styles[lo:hi]):
            if t < 0:
                if t == _HUB:
                    out.append((HOSTILE_HUB, 0))
                else:
                    origin = self._closed_origin if t == _CLOSED else INVALID_ORIGIN
                    out.append((f"{origin}/p/{i}.html", style & (_FRAG | _SQUOTE)))
                continue
            form = style & 7
            table = fixed.get(form)
            if table is not None:
                href = table[t]
            elif hosts[t] != src_host:
                href = (self._cross_pct if form == _F_PCT else self._cross)[t]
            elif form == _F_ROOT:
                href = self._paths[t]
            elif form == _F_REL:
                href = rel[self._dir[t]] + self._name[t]
            elif form == _F_UPDOWN:
                href = up + self._paths[t][1:]
            else:
                href = self._pct[t]
            out.append((href, style))
        return out

    def hrefs(self, page: int) -> list[tuple[str, str]]:
        """(href as written in the page's HTML, its quote char) for every link of the page."""
        suffix, quote = self._suffix, self._quote
        return [(href + suffix[style], quote[style]) for href, style in self._links(page)]

    def text(self, page: int) -> str:
        """A paragraph of its own for every page (the same on every run of the same graph seed): pages of a
        real site differ in their text, and frontier's trap detection marks a URL pattern whose pages are
        near-duplicates of each other, which pages of only a title and links would be."""
        rng = random.Random(self.graph.spec.seed * 1_000_003 + page)
        return " ".join(rng.choices(_WORDS, k=_TEXT_WORDS))

    def page(self, page: int) -> bytes:
        """The HTML of a 200 page (NORMAL or PRIVATE; orphans too)."""
        suffix, quote = self._suffix, self._quote
        lines = "".join(
            f"<li><a href={quote[style]}{href}{suffix[style]}{quote[style]}>link</a></li>\n"
            for href, style in self._links(page)
        )
        head = (
            f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Page {page} \u00b7 frontier mock</title>'
            f"</head>\n<body><h1>Page {page}</h1>\n<p>{self.text(page)}</p>\n<ul>\n"
        )
        return (head + lines + "</ul>\n").encode() + self._padding + b"</body></html>\n"


_WORDS = tuple(
    "crawl frontier queue host page link fetch robots seen filter bloom shard lease retry delay scope depth "
    "canonical query fragment server client header status redirect sitemap archive index token window river "
    "mountain garden silver orange violet harbor bridge lantern meadow quiet rapid gentle bright hollow ancient "
    "north south east west winter summer autumn spring morning evening island forest desert valley canyon "
    "engine signal vector matrix packet socket kernel thread buffer cursor record ledger report margin "
    "number letter table chair window door street market station garden school library museum theatre".split())
_TEXT_WORDS = 120


def _dir(path: str) -> str:
    return path[: path.rfind("/") + 1]


def _rel_prefix(src_dir: str, dst_dir: str) -> str:
    rel = posixpath.relpath(dst_dir, src_dir)
    return "" if rel == "." else rel + "/"


def _pct(path: str, page: int) -> str:
    """The path with one unreserved character percent-encoded: "/p/%35.html" or "/p/5%2ehtml"."""
    head, _, name = path.rpartition("/")
    if page % 2:
        return f"{head}/%{ord(name[0]):02X}{name[1:]}"
    stem, _, ext = name.rpartition(".")
    return f"{head}/{stem}%2e{ext}"
