"""frontier.config: the YAML-shaped dict -> frozen, checked, picklable config objects."""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from frontier.config import (
    ConsoleConfig,
    DEFAULT_CANONICAL,
    DEFAULT_DEDUP,
    DEFAULT_DEMO,
    DEFAULT_LIMITS,
    DEFAULT_OUTPUT,
    DEFAULT_POLITENESS,
    DEFAULT_SCOPE,
    DEFAULT_STORAGE,
    DEFAULT_TRAPS,
    DEFAULT_WORKERS,
    MAX_WORKER_PROCESSES,
    CrawlConfig,
    DedupConfig,
    DemoConfig,
    LimitsConfig,
    OrderingConfig,
    RevisitConfig,
    OutputConfig,
    PolitenessConfig,
    ScopeConfig,
    StorageConfig,
    TrapsConfig,
    WorkersConfig,
    config_key_reference,
    dump_config,
    load_config,
)
from frontier.errors import ConfigError
from frontier.url.canonical import CanonicalRules
from frontier.url.scope import Scope

ROOT = Path(__file__).resolve().parents[1]
SEED = "http://127.0.0.1:8081/index.html"
MINIMAL = {"seeds": [SEED]}

SECTIONS = {
    "scope": ScopeConfig,
    "limits": LimitsConfig,
    "workers": WorkersConfig,
    "politeness": PolitenessConfig,
    "traps": TrapsConfig,
    "ordering": OrderingConfig,
    "revisit": RevisitConfig,
    "dedup": DedupConfig,
    "canonical": CanonicalRules,
    "storage": StorageConfig,
    "output": OutputConfig,
    "console": ConsoleConfig,
    "demo": DemoConfig,
}


def read_yaml(name: str) -> dict:
    with open(ROOT / "configs" / name, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def with_(section: str, key: str, value: object) -> dict:
    return {**MINIMAL, section: {key: value}}


# -- the shipped files -------------------------------------------------------------------------------


def test_crawl_yaml_loads(tmp_path: Path) -> None:
    """The template's seed is an obviously fake public example: a copied template crawls nobody's machine."""
    cfg = load_config(read_yaml("crawl.yaml"), base_dir=tmp_path)
    assert cfg.seeds == ("https://www.example.com/",)
    assert cfg.scope.allowed_hosts == ()
    assert cfg.effective_scope().allowed_hosts == ("www.example.com",)  # the seeds' hosts
    assert cfg.demo is None
    assert cfg.storage.data_dir == tmp_path / "crawl-data"
    assert cfg.log_path == tmp_path / "crawl-data" / "crawl.jsonl"


def test_crawl_yaml_documents_every_key_with_its_default(tmp_path: Path) -> None:
    data = read_yaml("crawl.yaml")
    for key, _default, _meaning in config_key_reference():
        section, _, name = key.partition(".")
        assert section in data, key
        if name and section != "demo":
            assert name in data[section], f"crawl.yaml does not show {key}"
    cfg = load_config(data, base_dir=tmp_path)
    assert cfg.limits == DEFAULT_LIMITS
    assert cfg.workers == DEFAULT_WORKERS
    assert cfg.politeness == DEFAULT_POLITENESS
    assert cfg.dedup == DEFAULT_DEDUP
    assert cfg.canonical == DEFAULT_CANONICAL
    assert cfg.output == DEFAULT_OUTPUT
    assert cfg.scope == DEFAULT_SCOPE


def test_crawl_yaml_values_are_the_defaults(tmp_path: Path) -> None:
    """Copied and given other seeds, the template crawls them: every value in it is the schema's default,
    except `seeds` (an example to replace). It used to pin scope.allowed_hosts to the example's host."""
    data = read_yaml("crawl.yaml")
    assert load_config(data, base_dir=tmp_path) == load_config({"seeds": data["seeds"]}, base_dir=tmp_path)
    data["seeds"] = ["http://example.org:8082/index.html"]
    assert load_config(data, base_dir=tmp_path).effective_scope().allowed_hosts == ("example.org:8082",)


@pytest.mark.parametrize(("scope", "seed", "named"), [
    ({"allowed_hosts": ["127.0.0.1:8081"]}, "http://127.0.0.1:8082/index.html",
     "(out_of_scope: scope.allowed_hosts ['127.0.0.1:8081'])"),
    ({"allowed_domains": ["example.com"]}, "http://example.org/",
     "(out_of_scope: scope.allowed_domains ['example.com'])"),
    ({"exclude": ["/private/"]}, "http://example.org/private/", "(excluded: scope.exclude ['/private/'])"),
    ({"max_path_segments": 2}, "http://example.org/a/b/c", "(too_many_segments: scope.max_path_segments 2)"),
    ({"block_private": True}, "http://127.0.0.1/", "(private_address: scope.block_private true)"),
])
def test_a_seed_out_of_scope_names_the_rule_and_its_value(scope: dict, seed: str, named: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)) as info:
        load_config({"seeds": [seed], "scope": scope})
    assert info.value.key == "seeds[0]"


def test_demo_yaml_loads(tmp_path: Path) -> None:
    cfg = load_config(read_yaml("demo.yaml"), base_dir=tmp_path)
    assert cfg.seeds == ()
    assert cfg.demo == DemoConfig(pages=3000, hosts=3, links_per_page=20, seed=1)
    assert cfg.storage.data_dir == tmp_path / "crawl-data" / "demo"
    assert (cfg.workers.processes, cfg.workers.concurrency) == (2, 32)
    assert cfg.politeness.delay == 0.0 and cfg.politeness.obey_robots is True


def test_demo_seeds_filled_in_later() -> None:
    """What run_frontier does once the mock web is up."""
    cfg = load_config(read_yaml("demo.yaml"))
    hosts = ("127.0.0.1:40001", "127.0.0.1:40002", "127.0.0.1:40003")
    filled = dataclasses.replace(
        cfg, seeds=("http://127.0.0.1:40001/",), scope=dataclasses.replace(cfg.scope, allowed_hosts=hosts)
    )
    assert filled.seeds == ("http://127.0.0.1:40001/",)
    assert Scope.from_config(filled).allows("http://127.0.0.1:40003/p/1")
    assert not Scope.from_config(filled).allows("http://127.0.0.1:40004/p/1")


# -- unknown keys ----------------------------------------------------------------------------------------


def test_unknown_top_level_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**MINIMAL, "sedes": []})
    assert err.value.key == "sedes"
    assert "seeds" in str(err.value)


@pytest.mark.parametrize("section", list(SECTIONS))
def test_unknown_section_key(section: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(with_(section, "no_such_key", 1))
    assert err.value.key == f"{section}.no_such_key"
    assert f"{section}.no_such_key" in str(err.value)


def test_unknown_key_suggests_the_closest() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'delay'") as err:
        load_config(with_("politeness", "dealy", 1.0))
    assert err.value.key == "politeness.dealy"


def test_non_string_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**MINIMAL, "dedup": {1: 2}})
    assert err.value.key == "dedup.1"


# -- bad values --------------------------------------------------------------------------------------------

BAD_VALUES = [
    # (section, key, value, the dotted key the error must name)
    ("scope", "allowed_hosts", "example.com", "scope.allowed_hosts"),
    ("scope", "allowed_hosts", ["ok.example", "http://x.example/"], "scope.allowed_hosts[1]"),
    ("scope", "allowed_hosts", ["exa mple.com"], "scope.allowed_hosts[0]"),
    ("scope", "allowed_hosts", [12], "scope.allowed_hosts[0]"),
    ("scope", "allowed_domains", ["example.com:8080"], "scope.allowed_domains[0]"),
    ("scope", "max_depth", -1, "scope.max_depth"),
    ("scope", "max_depth", "3", "scope.max_depth"),
    ("scope", "include", ["a", "b", "(unclosed"], "scope.include[2]"),
    ("scope", "exclude", ["[z-a]"], "scope.exclude[0]"),
    ("scope", "block_private", "yes", "scope.block_private"),
    ("scope", "block_private", 1, "scope.block_private"),
    ("limits", "max_pages", 0, "limits.max_pages"),
    ("limits", "max_pages", True, "limits.max_pages"),
    ("limits", "max_pages_per_host", 2.5, "limits.max_pages_per_host"),
    ("limits", "max_url_length", 15, "limits.max_url_length"),
    ("limits", "max_body_bytes", 0, "limits.max_body_bytes"),
    ("limits", "max_body_bytes", 2**30 + 1, "limits.max_body_bytes"),  # one page's cost grows with it
    ("limits", "max_redirects", -1, "limits.max_redirects"),
    ("limits", "max_retries", None, "limits.max_retries"),
    ("limits", "max_links_per_page", "many", "limits.max_links_per_page"),
    ("workers", "processes", 0, "workers.processes"),
    ("workers", "processes", True, "workers.processes"),
    ("workers", "processes", 10_000, "workers.processes"),  # once spawned for 11 minutes
    ("workers", "processes", MAX_WORKER_PROCESSES + 1, "workers.processes"),
    ("workers", "concurrency", 0, "workers.concurrency"),
    ("workers", "timeout", 0, "workers.timeout"),
    ("workers", "timeout", "30", "workers.timeout"),
    ("workers", "timeout", float("nan"), "workers.timeout"),
    ("workers", "connect_timeout", -1.0, "workers.connect_timeout"),
    ("workers", "lease_timeout", 0, "workers.lease_timeout"),
    ("workers", "lease_timeout", 20.0, "workers.lease_timeout"),  # <= timeout (30)
    ("politeness", "delay", -0.5, "politeness.delay"),
    ("politeness", "delay", False, "politeness.delay"),
    ("politeness", "max_per_host", 0, "politeness.max_per_host"),
    ("politeness", "obey_robots", "true", "politeness.obey_robots"),
    ("politeness", "user_agent", "", "politeness.user_agent"),
    ("politeness", "user_agent", "a\r\nX-Evil: 1", "politeness.user_agent"),
    ("politeness", "robots_ttl", -1, "politeness.robots_ttl"),
    ("politeness", "max_crawl_delay", "1s", "politeness.max_crawl_delay"),
    ("politeness", "honor_nofollow", None, "politeness.honor_nofollow"),
    ("dedup", "capacity", 0, "dedup.capacity"),
    ("dedup", "capacity", "1e7", "dedup.capacity"),
    ("dedup", "capacity", 1.5e3 + 0.5, "dedup.capacity"),
    ("dedup", "error_rate", 0, "dedup.error_rate"),
    ("dedup", "error_rate", 1.0, "dedup.error_rate"),
    ("dedup", "error_rate", "1e-4", "dedup.error_rate"),
    ("dedup", "exact", 0, "dedup.exact"),
    ("dedup", "lru_size", -1, "dedup.lru_size"),
    ("dedup", "partitions", 0, "dedup.partitions"),
    ("dedup", "partitions", 48, "dedup.partitions"),
    ("dedup", "partitions", 8192, "dedup.partitions"),
    ("dedup", "blocked", "yes", "dedup.blocked"),
    ("canonical", "sort_query", "yes", "canonical.sort_query"),
    ("canonical", "keep_fragment", 1, "canonical.keep_fragment"),
    ("storage", "data_dir", None, "storage.data_dir"),
    ("storage", "data_dir", "", "storage.data_dir"),
    ("storage", "data_dir", 5, "storage.data_dir"),
    ("storage", "fsync", "no", "storage.fsync"),
    ("output", "log", 3, "output.log"),
    ("output", "warc", [], "output.warc"),
    ("output", "progress", "fancy", "output.progress"),
    ("output", "progress", True, "output.progress"),
    ("output", "progress_interval", 0, "output.progress_interval"),
    ("demo", "pages", 0, "demo.pages"),
    ("demo", "hosts", 0, "demo.hosts"),
    ("demo", "hosts", 5000, "demo.hosts"),  # more hosts than pages
    ("demo", "links_per_page", -1, "demo.links_per_page"),
    ("demo", "seed", "one", "demo.seed"),
    ("demo", "hostile", "no", "demo.hostile"),
]


@pytest.mark.parametrize(("section", "key", "value", "dotted"), BAD_VALUES)
def test_bad_value_names_its_key(section: str, key: str, value: object, dotted: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(with_(section, key, value))
    assert err.value.key == dotted
    assert str(err.value).startswith(dotted + ":")


@pytest.mark.parametrize("section", [s for s in SECTIONS])
def test_section_must_be_a_mapping(section: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config({**MINIMAL, section: [1, 2]})
    assert err.value.key == section


@pytest.mark.parametrize(
    ("data", "dotted"),
    [
        ({"seeds": SEED}, "seeds"),
        ({"seeds": ["ftp://example.com/"]}, "seeds[0]"),
        ({"seeds": [SEED, "http://exa mple.com/"]}, "seeds[1]"),
        ({"seeds": [SEED, 42]}, "seeds[1]"),
        ({"seeds": [SEED, "http://other.example/"], "scope": {"allowed_hosts": ["127.0.0.1:8081"]}}, "seeds[1]"),
        ({"seeds": [SEED], "scope": {"exclude": ["index"]}}, "seeds[0]"),
        ({"seeds": [SEED], "scope": {"block_private": True}}, "seeds[0]"),
        ({"seeds": ["http://example.com/" + "a" * 100], "limits": {"max_url_length": 50}}, "seeds[0]"),
    ],
)
def test_bad_seeds(data: dict, dotted: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(data)
    assert err.value.key == dotted


@pytest.mark.parametrize("data", [{}, {"seeds": []}])
def test_a_config_without_seeds_loads_and_only_a_crawl_requires_them(data: dict) -> None:
    """serve, status, export and fresh read a crawl.yaml that may have no seeds; a crawl needs one."""
    cfg = load_config(data)
    with pytest.raises(ConfigError, match="give at least one seed URL") as err:
        cfg.require_seeds()
    assert err.value.key == "seeds"
    load_config({"demo": {"pages": 10}}).require_seeds()


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError):
        load_config([SEED])  # type: ignore[arg-type]


# -- defaults, coercion, normalisation ------------------------------------------------------------------


def test_defaults_equal_the_named_constants(tmp_path: Path) -> None:
    cfg = load_config(MINIMAL, base_dir=tmp_path)
    assert cfg.scope == DEFAULT_SCOPE == ScopeConfig()
    assert cfg.limits == DEFAULT_LIMITS == LimitsConfig()
    assert cfg.workers == DEFAULT_WORKERS == WorkersConfig()
    assert cfg.politeness == DEFAULT_POLITENESS == PolitenessConfig()
    assert cfg.dedup == DEFAULT_DEDUP == DedupConfig()
    assert cfg.traps == DEFAULT_TRAPS == TrapsConfig()
    # a crawl strips session ids by default; canonicalize()'s own default rules do not
    assert cfg.canonical == DEFAULT_CANONICAL == CanonicalRules(strip_session_ids=True) != CanonicalRules()
    assert cfg.output == DEFAULT_OUTPUT == OutputConfig()
    assert cfg.storage == dataclasses.replace(DEFAULT_STORAGE, data_dir=tmp_path / DEFAULT_STORAGE.data_dir)
    assert cfg.demo is None
    assert load_config({"demo": {}}).demo == DEFAULT_DEMO == DemoConfig()
    assert load_config({**MINIMAL, "dedup": None}).dedup == DEFAULT_DEDUP  # `dedup:` left empty in YAML


def test_reference_defaults_match_the_dataclasses() -> None:
    rows = {key: (default, meaning) for key, default, meaning in config_key_reference()}
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            assert f"{section}.{f.name}" in rows
    assert all(meaning for _default, meaning in rows.values())
    assert rows["dedup.capacity"][0] == "10000000"
    assert rows["dedup.error_rate"][0] == "1.0e-4"
    assert rows["storage.data_dir"][0] == "./crawl-data"
    assert rows["output.log"][0] == "null"
    # each default, written as YAML, loads back to the default
    for key, (default, _meaning) in rows.items():
        section, _, name = key.partition(".")
        if name and section != "demo":
            value = yaml.safe_load(f"v: {default}")["v"]
            built = load_config(with_(section, name, value))
            expected = getattr(DEFAULT_CANONICAL if section == "canonical" else SECTIONS[section](), name)
            got = getattr(getattr(built, section), name)
            assert got == expected or (isinstance(expected, Path) and got.name == expected.name), key


def test_integral_floats_accepted_for_int_fields() -> None:
    cfg = load_config({**MINIMAL, "dedup": {"capacity": 1.0e7, "lru_size": 0.0}, "workers": {"processes": 4.0}})
    assert cfg.dedup.capacity == 10_000_000 and type(cfg.dedup.capacity) is int
    assert cfg.dedup.lru_size == 0 and type(cfg.dedup.lru_size) is int
    assert cfg.workers.processes == 4 and type(cfg.workers.processes) is int
    yaml_cfg = load_config(yaml.safe_load(f"seeds: [{SEED}]\ndedup: {{capacity: 1.0e+7}}"))
    assert yaml_cfg.dedup.capacity == 10_000_000


def test_worker_processes_are_bounded_by_the_cpus() -> None:
    assert MAX_WORKER_PROCESSES == max(4, 4 * (os.cpu_count() or 1))
    cfg = load_config({**MINIMAL, "workers": {"processes": MAX_WORKER_PROCESSES}})
    assert cfg.workers.processes == MAX_WORKER_PROCESSES
    with pytest.raises(ConfigError, match=rf"must be <= {MAX_WORKER_PROCESSES} \(4 per CPU"):
        WorkersConfig(processes=MAX_WORKER_PROCESSES + 1)


def test_ints_accepted_for_float_fields() -> None:
    cfg = load_config({**MINIMAL, "workers": {"timeout": 5, "lease_timeout": 60}})
    assert cfg.workers.timeout == 5.0 and type(cfg.workers.timeout) is float


def test_yaml_numeric_string_gets_a_hint() -> None:
    data = yaml.safe_load(f"seeds: [{SEED}]\ndedup: {{capacity: 1e7}}")
    with pytest.raises(ConfigError, match=r"1\.0e\+7") as err:
        load_config(data)
    assert err.value.key == "dedup.capacity"


def test_yaml_bare_off_means_off() -> None:
    data = yaml.safe_load(f"seeds: [{SEED}]\noutput: {{progress: off}}")
    assert load_config(data).output.progress == "off"


def test_lists_become_tuples_and_hosts_are_normalised() -> None:
    cfg = load_config(
        {
            "seeds": ["HTTP://WWW.Example.COM:80/a/../b"],
            "scope": {
                "allowed_hosts": ["WWW.Example.COM:80", "example.com:443", "Example.com:8080", "[::1]:8081",
                                  "www.example.com"],
                "allowed_domains": ["Example.ORG", ".example.net", "*.example.info"],
                "include": ["/b"],
            },
        }
    )
    assert cfg.seeds == ("http://www.example.com/b",)
    assert cfg.scope.allowed_hosts == ("www.example.com", "example.com", "example.com:8080", "[::1]:8081")
    assert cfg.scope.allowed_domains == ("example.org", "example.net", "example.info")
    assert cfg.scope.include == ("/b",)
    assert isinstance(cfg.seeds, tuple)


def test_idna_host_is_normalised() -> None:
    cfg = load_config({**MINIMAL, "scope": {"allowed_hosts": ["127.0.0.1:8081", "Bücher.example"]}})
    assert cfg.scope.allowed_hosts[1] == "xn--bcher-kva.example"


def test_seeds_are_canonical_and_deduplicated() -> None:
    cfg = load_config({"seeds": ["http://Example.com", "http://example.com:80/", "http://example.com/x#frag"]})
    assert cfg.seeds == ("http://example.com/", "http://example.com/x")


def test_scope_defaults_to_the_seed_hosts() -> None:
    cfg = load_config({"seeds": ["http://a.example/", "http://b.example:8080/x", "http://a.example/y"]})
    assert cfg.scope.allowed_hosts == ()  # what the user wrote
    assert cfg.effective_scope().allowed_hosts == ("a.example", "b.example:8080")
    scope = Scope.from_config(cfg)
    assert scope.allows("http://b.example:8080/z")
    assert scope.check("http://b.example/z") == "out_of_scope"
    assert scope.check("http://sub.a.example/") == "out_of_scope"
    # the late resolution follows a replaced seed list
    other = dataclasses.replace(cfg, seeds=("http://c.example/",))
    assert Scope.from_config(other).allows("http://c.example/q")
    assert not Scope.from_config(other).allows("http://a.example/")


def test_explicit_domains_replace_the_seed_default() -> None:
    cfg = load_config({"seeds": ["http://www.example.com/"], "scope": {"allowed_domains": ["example.com"]}})
    assert cfg.effective_scope() == cfg.scope
    assert Scope.from_config(cfg).allows("http://img.example.com/")


def test_open_web_scope() -> None:
    cfg = load_config({"seeds": ["http://www.example.com/"], "scope": {"allowed_domains": ["*"]}})
    assert Scope.from_config(cfg).allows("http://anything.example.org:8000/")


# -- paths -----------------------------------------------------------------------------------------------


def test_relative_paths_resolve_against_base_dir(tmp_path: Path) -> None:
    data = {
        **MINIMAL,
        "storage": {"data_dir": "runs/one"},
        "output": {"log": "logs/../crawl.log", "warc": "out.warc.gz"},
    }
    cfg = load_config(data, base_dir=tmp_path)
    assert cfg.storage.data_dir == tmp_path / "runs" / "one"
    assert cfg.output.log == tmp_path / "crawl.log"
    assert cfg.output.warc == tmp_path / "out.warc.gz"
    assert cfg.log_path == tmp_path / "crawl.log"
    assert all(isinstance(p, Path) for p in (cfg.storage.data_dir, cfg.output.log, cfg.output.warc))


def test_relative_paths_default_to_the_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cfg = load_config({**MINIMAL, "storage": {"data_dir": "d"}})
    assert cfg.storage.data_dir == Path.cwd() / "d"
    assert cfg.log_path == Path.cwd() / "d" / "crawl.jsonl"


def test_absolute_paths_are_kept(tmp_path: Path) -> None:
    target = tmp_path / "abs"
    cfg = load_config({**MINIMAL, "storage": {"data_dir": str(target)}}, base_dir=Path("/elsewhere"))
    assert cfg.storage.data_dir == target


# -- frozen, picklable, built directly ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["crawl.yaml", "demo.yaml"])
def test_frozen_and_picklable(name: str, tmp_path: Path) -> None:
    cfg = load_config(read_yaml(name), base_dir=tmp_path)
    copy = pickle.loads(pickle.dumps(cfg))
    assert copy == cfg
    assert hash(copy) == hash(cfg)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seeds = ()  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.dedup.capacity = 1  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        cfg.workers.extra = 1  # type: ignore[attr-defined]


def test_full_config_pickles_with_patterns() -> None:
    cfg = load_config({**MINIMAL, "scope": {"include": [r"\d+", "(?i)index"], "exclude": [r"\.pdf$"]}})
    copy = pickle.loads(pickle.dumps(cfg))
    assert copy == cfg
    assert Scope.from_config(copy).allows(SEED)


def test_direct_construction_checks_too() -> None:
    with pytest.raises(ConfigError) as err:
        DedupConfig(partitions=3)
    assert err.value.key == "dedup.partitions"
    with pytest.raises(ConfigError, match="no blocked layout") as err:
        DedupConfig(blocked=True, deletable=True)
    assert err.value.key == "dedup.blocked"
    with pytest.raises(ConfigError) as err:
        CrawlConfig(seeds=(SEED,), dedup={"capacity": 1})  # type: ignore[arg-type]
    assert err.value.key == "dedup"
    with pytest.raises(TypeError):
        DedupConfig(10)  # type: ignore[misc]  # keyword-only
    built = CrawlConfig(seeds=[SEED], workers=WorkersConfig(processes=1))  # type: ignore[arg-type]
    assert built.seeds == (SEED,)
    assert StorageConfig(data_dir="rel").data_dir == Path("rel")  # kept relative when built directly


def test_dump_config_round_trips(tmp_path: Path) -> None:
    for name in ("crawl.yaml", "demo.yaml"):
        cfg = load_config(read_yaml(name), base_dir=tmp_path)
        dumped = dump_config(cfg)
        assert load_config(yaml.safe_load(yaml.safe_dump(dumped))) == cfg


def test_import_pulls_in_no_yaml_or_aiohttp() -> None:
    code = (
        "import sys, frontier.config, frontier.url.scope\n"
        "bad = [m for m in ('yaml', 'aiohttp') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
