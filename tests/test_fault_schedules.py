"""The fault suite's short version (`python -m frontier.bench faults` runs many schedules): one seeded
schedule, an instance SIGKILLed and a Cluster master SIGKILLed (failover, then the node restarted), two
instances crawling the mock web on a 3+3 Cluster; the checker finds every page fetched, duplicates within
the bound, and every instance ended by itself. Marked `heavy`."""

from __future__ import annotations

from pathlib import Path

import pytest

from frontier.bench.faults import Schedule
from frontier.testing import SiteSpec
from frontier.testing.redis_servers import server_binaries

SERVER_BINARIES = server_binaries()
SEED = 3  # draws kill-instance, then kill-master


@pytest.mark.heavy
@pytest.mark.skipif(not SERVER_BINARIES, reason="no Redis or Valkey server installed")
def test_a_schedule_of_an_instance_kill_and_a_failover_loses_no_page(tmp_path: Path) -> None:
    outcome = Schedule(SERVER_BINARIES[0], SEED, 2, SiteSpec(pages=100, hosts=3, seed=SEED), tmp_path).run()
    assert outcome.faults == ["kill-instance", "kill-master"]
    assert outcome.ok, f"seed {SEED}: {outcome}"
    assert 0 in outcome.codes and outcome.lost == 0 and outcome.duplicates <= outcome.bound
