"""The crawl configuration as frozen objects (the bottom of the tree with errors: it imports only frontier.url's
rule types and defaults, frontier.errors and frontier.lazy). No YAML here: run_frontier.py parses crawl.yaml and
hands the resulting dict to `load_config`.

    load_config(data, base_dir=None) -> CrawlConfig      raises ConfigError naming the dotted key

The YAML shape (configs/crawl.yaml documents every key; `config_key_reference()` lists them with their
defaults and meanings, one source of truth for the README's table):

    seeds:      [url, ...]        required unless `demo` is given; canonicalised with the `canonical` rules
    seeds_from_sitemaps: bool     also the seed hosts' sitemaps (frontier.crawl.sitemaps)
    scope:      ScopeConfig       which URLs may be fetched (see frontier.url.scope)
    limits:     LimitsConfig      caps on pages, URL length, body size, redirects, retries, links
    workers:    WorkersConfig     fetch processes, concurrency, timeouts, lease expiry
    politeness: PolitenessConfig  per-host delay (adaptive by default) and concurrency, robots.txt, user agent
    traps:      TrapsConfig       crawler-trap detection: near-duplicate URL patterns, soft 404s
    ordering:   OrderingConfig    which URL next: the scorer (frontier.crawl.ordering)
    revisit:    RevisitConfig     when again: a schedule per fetched URL, conditional GET (frontier.crawl.revisit)
    dedup:      DedupConfig       the seen-test: Bloom capacity and error rate, exact mode, LRU, partitions
    canonical:  CanonicalRules    the configurable canonicalisation rules (frontier.url.canonical)
    storage:    StorageConfig     the backend (lmdb or redis), the data dir (LMDB, Bloom snapshot), fsync, redis
    output:     OutputConfig      crawl log, WARC, progress display
    console:    ConsoleConfig     the operator's console: its address, token, TLS (frontier.console)
    demo:       DemoConfig|null   run_frontier starts the mock web itself and crawls it

Rules, checked when each object is built (also when built directly in Python, not only from YAML):
  * Unknown keys at any level are a ConfigError naming the dotted key ("politeness.dealy"), with the
    closest valid key suggested. A section given as `null` (or left empty in YAML) means its defaults.
  * Types are strict: a string where a number is expected is an error (note that YAML 1.1, which PyYAML
    speaks, reads `1e7` and `1.0e7` as strings: write `10000000` or `1.0e+7`); a bool is not an int.
    Integral floats (`1.0e+7`) are accepted for integer keys. Lists become tuples.
  * Every section's defaults are a named module-level constant (`DEFAULT_DEDUP = DedupConfig()`, ...).
  * Paths (`storage.data_dir`, `output.log`, `output.warc`) become `pathlib.Path`; `load_config` resolves
    relative ones against `base_dir`, else the current directory (run_frontier passes the CWD, so paths
    in crawl.yaml are relative to where the crawl is started, not to the YAML file). Objects built
    directly keep a relative path as given.
  * If `scope.allowed_hosts` and `scope.allowed_domains` are both empty, the scope is the seeds' hosts
    (exact host:port). This is resolved late, by `CrawlConfig.effective_scope()` (used by
    `Scope.from_config`), so `dataclasses.replace(cfg, seeds=...)` keeps it right. Use
    `allowed_domains: ["*"]` for the open web.
  * `output.log: null` means `<data_dir>/crawl.jsonl`, again resolved late: `CrawlConfig.log_path`.
  * Every seed must be in the crawl's scope (a seed the crawl would skip is a ConfigError).

Everything here pickles (it is sent to spawned processes): regexes are kept as source strings and
compiled by `frontier.url.scope.Scope`.

`schema` holds the sections and their defaults, `checks` the value checks, `load` the loading, dumping and the key
reference. The names below are the part's interface; import them from `frontier.config`.
"""

from __future__ import annotations

from frontier.config.load import config_key_reference, dump_config, load_config
from frontier.config.schema import (AuthConfig, ConsoleConfig, CrawlConfig, DEFAULT_CONSOLE, DEFAULT_CANONICAL, DEFAULT_DEDUP, DEFAULT_DEMO,
                                    DEFAULT_LIMITS, DEFAULT_ORDERING, DEFAULT_OUTPUT, DEFAULT_POLITENESS,
                                    DEFAULT_REDIS, DEFAULT_REVISIT, DEFAULT_SCOPE, DEFAULT_SCORER, DEFAULT_STORAGE, DEFAULT_TRAPS,
                                    DEFAULT_WORKERS, DedupConfig, DemoConfig, LOG_FILE_NAME, LimitsConfig,
                                    MAX_WORKER_PROCESSES, OrderingConfig, OutputConfig, PROGRESS_MODES,
                                    PolitenessConfig, RedisStorageConfig, RevisitConfig, REVISIT_ADAPTIVE, SCORERS, ScopeConfig, StorageConfig,
                                    TrapsConfig, WorkersConfig)

__all__ = [
    "LOG_FILE_NAME",
    "DEFAULT_CANONICAL",
    "DEFAULT_CONSOLE",
    "DEFAULT_DEDUP",
    "DEFAULT_DEMO",
    "DEFAULT_LIMITS",
    "DEFAULT_ORDERING",
    "DEFAULT_OUTPUT",
    "DEFAULT_POLITENESS",
    "DEFAULT_REDIS",
    "DEFAULT_REVISIT",
    "DEFAULT_SCOPE",
    "DEFAULT_SCORER",
    "DEFAULT_STORAGE",
    "DEFAULT_TRAPS",
    "DEFAULT_WORKERS",
    "MAX_WORKER_PROCESSES",
    "PROGRESS_MODES",
    "REVISIT_ADAPTIVE",
    "SCORERS",
    "AuthConfig",
    "ConsoleConfig",
    "CrawlConfig",
    "DedupConfig",
    "DemoConfig",
    "LimitsConfig",
    "OrderingConfig",
    "OutputConfig",
    "PolitenessConfig",
    "RedisStorageConfig",
    "RevisitConfig",
    "ScopeConfig",
    "StorageConfig",
    "TrapsConfig",
    "WorkersConfig",
    "config_key_reference",
    "dump_config",
    "load_config",
]
