"""How tests/data/format3-crawl.tar.gz was made: a crawl's data dir written by frontier at commit b3d52c3, the
last of fingerprint-log format 3 (before the format recorded parked records), stopped mid-crawl with links
parked and a sweep under way, then closed cleanly (its Bloom snapshot is of the old layout, without an id).

    git archive b3d52c3 frontier tests | tar -x -C /tmp/old   # and copy frontier/_native*.so into it
    cd /tmp/old && python .../tests/data/make_format3_crawl.py OUT_DIR
    tar -czf format3-crawl.tar.gz -C OUT_DIR crawl fetched.json

tests/test_parked.py::test_a_format_3_crawl_is_resumed_by_this_version opens it with this version's code.
"""

import json
import sys
from pathlib import Path

sys.path[:0] = [".", "tests"]
from test_parked import LOOSE_RUN_FILTERS, crawl_state, crawl_steps, graph_url  # noqa: E402

from frontier.fplog import FingerprintLog  # noqa: E402
from frontier.state import lmdb as lmdb_state  # noqa: E402
from frontier.state.base import Commit, Link  # noqa: E402

FingerprintLog.__init__.__kwdefaults__.update(LOOSE_RUN_FILTERS)
lmdb_state.SWEEP_STEP = 25
out = Path(sys.argv[1])
state = crawl_state(out / "crawl", defer_confirms=1200)
fetched: list[str] = []
try:
    state.commit(Commit(links=[Link(graph_url(0), 0)]), 1000.0)
    crawl_steps(state, 20, fetched)
    while not state.seen.sweeping:
        crawl_steps(state, 1, fetched)
    print("parked", state.seen.parked, "queued", state.stats().queued, "fetched", len(fetched))
finally:
    state.close()
(out / "fetched.json").write_text(json.dumps(fetched))
