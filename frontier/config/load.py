"""Loading and writing the crawl config: the parsed YAML mapping -> `CrawlConfig` (unknown keys are an error that
names the key and suggests the closest), back to plain data, and the key reference the docs' table is made from."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frontier.config.checks import _as_bool, _check_keys, _describe, _resolve
from frontier.config.schema import (AuthConfig, CrawlConfig, DEFAULT_CANONICAL, DemoConfig, RedisStorageConfig,
                                    _CANONICAL_DOCS, _SECTIONS, _SITEMAPS_DOC, _TOP_KEYS)
from frontier.errors import ConfigError
from frontier.url.canonical import CanonicalRules


def _section(name: str, cls: type, raw: Any) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a mapping of keys, got {_describe(raw)}", key=name)
    fields = dataclasses.fields(cls)
    _check_keys(raw, [f.name for f in fields], prefix=f"{name}.")
    if cls is CanonicalRules:  # foreign class: check its (boolean) fields here
        for f in fields:
            if f.name in raw and isinstance(f.default, bool):
                _as_bool(raw[f.name], f"{name}.{f.name}")
        try:
            return dataclasses.replace(DEFAULT_CANONICAL, **raw)
        except (TypeError, ValueError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(str(exc), key=name) from None
    return cls(**raw)


def load_config(data: Mapping[str, Any], *, base_dir: Path | None = None) -> CrawlConfig:
    """Build a `CrawlConfig` from the parsed YAML mapping; raise ConfigError naming the dotted key.

    Relative paths are resolved against `base_dir`, or the current directory when it is None.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"the configuration must be a mapping of sections, got {_describe(data)}")
    _check_keys(data, _TOP_KEYS, prefix="")
    sections = {name: _section(name, cls, data.get(name)) for name, cls in _SECTIONS.items()}
    demo_raw = data.get("demo")
    demo = None if demo_raw is None else _section("demo", DemoConfig, demo_raw)

    base = Path(os.path.abspath(base_dir if base_dir is not None else os.getcwd()))
    storage, output, dedup = sections["storage"], sections["output"], sections["dedup"]
    sections["storage"] = dataclasses.replace(storage, data_dir=_resolve(storage.data_dir, base))
    sections["dedup"] = dataclasses.replace(dedup, whitelist=_resolve(dedup.whitelist, base))
    sections["output"] = dataclasses.replace(
        output, log=_resolve(output.log, base), warc=_resolve(output.warc, base))

    seeds = data.get("seeds")
    if seeds is None:
        seeds = ()
    elif isinstance(seeds, (str, bytes)) or not isinstance(seeds, (list, tuple)):
        raise ConfigError(f"expected a list of URLs, got {_describe(seeds)}", key="seeds")
    return CrawlConfig(seeds=tuple(seeds), seeds_from_sitemaps=data.get("seeds_from_sitemaps", False), demo=demo,
                       **sections)


def dump_config(cfg: CrawlConfig) -> dict[str, Any]:
    """`cfg` as plain YAML/JSON-ready data; `load_config(dump_config(cfg)) == cfg` (paths absolute)."""

    def plain(value: Any) -> Any:
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        if isinstance(value, (RedisStorageConfig, AuthConfig)):
            return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    out: dict[str, Any] = {"seeds": list(cfg.seeds), "seeds_from_sitemaps": cfg.seeds_from_sitemaps}
    for name in _SECTIONS:
        section = getattr(cfg, name)
        out[name] = {}
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            out[name][f.name] = plain(dict(value) if f.metadata.get("mapping") else value)
    out["demo"] = None if cfg.demo is None else dataclasses.asdict(cfg.demo)
    return out


def _yaml_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_yaml_text(v) for v in value) + "]"
    if isinstance(value, Path):
        return f"./{value}" if not value.is_absolute() else str(value)
    if isinstance(value, float) and value != 0 and abs(value) < 1e-3:
        return f"{value:.1e}".replace("e-0", "e-")
    return str(value)


def config_key_reference() -> list[tuple[str, str, str]]:
    """(dotted key, default as YAML text, meaning) for every key, in crawl.yaml order: the README table."""
    rows = [("seeds", "[]", "Start URLs, canonicalised; a crawl needs one unless demo is given (serve, status, export and fresh do not)."),
            ("seeds_from_sitemaps", "false", _SITEMAPS_DOC)]
    sections = {**_SECTIONS, "demo": DemoConfig}
    for name, cls in sections.items():
        if name == "demo":
            rows.append(("demo", "null", "A mock web run_frontier starts and crawls (seeds filled in); "
                                         "a mapping of the keys below, {} for their defaults."))
        for f in dataclasses.fields(cls):
            meaning = f.metadata.get("doc", "")
            if not meaning and name == "canonical":
                meaning = _CANONICAL_DOCS.get(f.name, "")
            default = "{}" if f.metadata.get("mapping") else _yaml_text(
                getattr(DEFAULT_CANONICAL, f.name) if name == "canonical" else f.default)
            if isinstance(f.default, RedisStorageConfig):  # one row: {} (the defaults); its keys in the meaning
                default = "{}"
                meaning += " " + " ".join(f"{g.name} ({_yaml_text(getattr(f.default, g.name))}): "
                                          f"{g.metadata.get('doc', '')}" for g in dataclasses.fields(f.default))
            rows.append((f"{name}.{f.name}", default, meaning))
    return rows
