"""swarm/grafana/api.py's annotator in a gevent-patched Locust process (a child Python) against the
Grafana stand-in; the rest of the Grafana API tests are in tests/unit/grafana/test_api.py."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.support import REPO

_GEVENT = """
import sys
import locust  # noqa: F401  gevent monkey-patching first, as in a Locust master
import gevent
from tests.helpers.grafana_standin import grafana_standin
from swarm.grafana.api import Annotator
with grafana_standin("tok") as g:
    a = Annotator.from_env(g.url, token="tok")
    jobs = [gevent.spawn(a.stage_started, "r", i) for i in range(3)]
    gevent.joinall(jobs, timeout=20)
    assert sorted(j.value for j in jobs) == [1, 2, 3], [j.value for j in jobs]
    assert len(g.annotations) == 3
print("ok")
"""


def test_annotator_works_in_a_gevent_patched_locust_process() -> None:
    r = subprocess.run([sys.executable, "-c", _GEVENT], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
