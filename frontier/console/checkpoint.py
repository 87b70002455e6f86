"""A checkpoint of a running LMDB crawl: a data dir that `frontier crawl` resumes from.

    checkpoint(log, data_dir, Path("/backups/crawl-0105"))   -> {"dir": "...", "bytes": 123456}

LMDB copies an environment inside one read transaction (`Environment.copy`, compacted), so the copy is the state
as of one commit while the crawl goes on writing: the queues, the seen-set, the counters, the operator's orders.
DIR gets that copy in DIR/state and the audit log so far; the Bloom filter's snapshot is left out (a data dir
without one rebuilds it from the fingerprint log at open) and so is the crawl log (the copy starts a new one).
Resume with the config's storage.data_dir set to DIR.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from frontier.errors import FrontierError
from frontier.state.controls import AUDIT_FILE

STATE_DIR = "state"  # the LMDB environment's directory inside a data dir (frontier.state.lmdb)


class CheckpointError(FrontierError):
    """The target cannot take a checkpoint (it exists, its parent does not, no room); one line."""


def checkpoint(log: Any, data_dir: Path, target: Path) -> dict[str, Any]:
    """Copy the crawl state of `log` (the data dir's frontier.seen.fplog.FingerprintLog) to a new directory
    `target` (absolute; it must not exist, its parent must); returns {"dir", "bytes"}."""
    if not target.is_absolute():
        raise CheckpointError(f"give an absolute directory, not {str(target)!r}")
    if target.exists() or target.is_symlink():
        kind = "a directory" if target.is_dir() else "a file"
        raise CheckpointError(f"{target} exists ({kind}): give a new directory")
    if not target.parent.is_dir():
        raise CheckpointError(f"{target.parent} is not a directory")
    if target.resolve().is_relative_to(data_dir.resolve()):
        raise CheckpointError(f"{target} is inside the crawl's data dir: give a directory outside it")
    try:
        (target / STATE_DIR).mkdir(parents=True)
        log.env.copy(str(target / STATE_DIR), compact=True)
        audit = data_dir / AUDIT_FILE
        if audit.exists():
            shutil.copyfile(audit, target / AUDIT_FILE)
    except Exception as e:
        shutil.rmtree(target, ignore_errors=True)
        raise CheckpointError(f"cannot write {target}: {e}") from None
    size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
    return {"dir": str(target), "bytes": size}
