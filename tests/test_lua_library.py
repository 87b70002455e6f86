"""The Redis Functions libraries as joined from their .lua files (frontier.state.redis_lua): every function name
the Python side calls is registered, each included file is in once, the version is the text's digest, and the
text passes luacheck (.luacheckrc) where luacheck is installed (.ci/luacheck runs it in CI)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from frontier.state import redis_lua
from frontier.state.redis_lua import FRONTIER, MAX_CHUNK_ENTRIES, Library, library

ROOT = Path(__file__).resolve().parents[1]


def _uf_library() -> Library:
    pytest.importorskip("redis")
    from frontier.urlfrontier.redis_store import LIBRARY

    return LIBRARY


def test_every_function_name_the_python_side_calls_is_registered() -> None:
    names = {v for k, v in vars(redis_lua).items() if k.startswith("FUNCTION_")}
    registered = set(re.findall(r"function_name = '(\w+)'", FRONTIER.text))
    assert names == registered, (names, registered)


def test_the_text_is_the_included_files_each_once_and_no_include_is_left() -> None:
    assert "@include" not in FRONTIER.text
    assert FRONTIER.text.count("local function seen_add(") == 1  # seen.lua: named by two files, included once
    assert FRONTIER.text.startswith(f"#!lua name=frontier\nlocal VERSION = '{FRONTIER.version}'\n")
    assert f"local MAX_ENTRIES = {MAX_CHUNK_ENTRIES}\n" in FRONTIER.text


def test_the_version_is_the_digest_of_the_text() -> None:
    body = FRONTIER.text.split("\n", 2)[2]
    assert FRONTIER.version == hashlib.sha256(f"frontier\n{body}".encode()).hexdigest()[:16]
    assert library("frontier", "frontier_version", "state/lua/frontier") == FRONTIER  # the same files, the same
    other = library("frontier", "frontier_version", "state/lua/seen")  # other text: another version
    assert other.version != FRONTIER.version


@pytest.mark.skipif(shutil.which("luacheck") is None, reason="luacheck (Debian: lua-check) is not installed")
def test_the_libraries_pass_luacheck() -> None:
    done = subprocess.run([str(ROOT / ".ci" / "luacheck")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_url_frontier_library_includes_the_seen_set() -> None:
    text = _uf_library().text
    assert "local function seen_add(" in text and "@include" not in text
