"""The fault suite's short version (`python -m frontier.bench faults` runs many schedules): seeded schedules of
two faults each, two instances crawling the mock web on a 3+3 Cluster; the checker finds every page fetched,
duplicates within the bound, and every instance ended by itself. Marked `heavy`.

1. An instance SIGKILLed, then a master SIGKILLed (failover, the node restarted), on loopback.
2. A master cut from its replica and the other masters by a network partition (its replica is promoted while
   the instances still commit on the old master, whose WAITs get no replica), healed, then a master SIGKILLed:
   the old master, demoted on heal, unblocks its waiting clients with UNBLOCKED, which the instances retry
   (before: both stopped with exit 2 and the crawl needed a new instance). Needs `ip netns` (root)."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier.bench.faults import Schedule
from frontier.testing import SiteSpec, netns
from frontier.testing.redis_servers import server_binaries

SERVER_BINARIES = server_binaries()
SEED = 3
PARTITION_SEED = 101  # the bench's seed 101: its draw is cut-master, then kill-master


@pytest.mark.heavy
@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed")
def test_a_schedule_of_an_instance_kill_and_a_failover_loses_no_page(tmp_path: Path) -> None:
    outcome = Schedule(SERVER_BINARIES[0], SEED, ["kill-instance", "kill-master"],
                       SiteSpec(pages=100, hosts=3, seed=SEED), tmp_path, network=False).run()
    assert outcome.ok, f"seed {SEED}: {outcome}"
    assert 0 in outcome.codes and outcome.lost == 0 and outcome.duplicates <= outcome.bound


@pytest.mark.heavy
@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed")
def test_a_partitioned_master_healed_as_a_replica_stops_no_instance(tmp_path: Path) -> None:
    why_not = netns.available()
    if why_not is not None:
        pytest.skip(f"network partitions need network namespaces: {why_not}")
    seed = PARTITION_SEED
    outcome = Schedule(SERVER_BINARIES[0], seed, 2, SiteSpec(pages=200, hosts=3, seed=seed), tmp_path).run()
    assert outcome.faults == ["cut-master", "kill-master"] and outcome.fired == 2, outcome
    assert outcome.ok, f"seed {seed}: {outcome}"
    assert outcome.stopped == 0 and not outcome.resumed and set(outcome.codes) == {0}, outcome
