"""The names Grafana and the swarm agree on, shared by dashboards.py (what the panels refer to)
and api.py (what `swarm grafana push` creates and the annotations carry). No imports: either
module reads them here, neither imports the other for them.
"""

from __future__ import annotations

# Every dashboard shows the annotations with this tag; the Annotator tags each one with it.
ANNOTATION_TAG = "llm-swarm"
# The provisioned Prometheus datasource (dashboards/grafana/provisioning/datasources/) and the
# one `swarm grafana push` creates share this uid; every panel refers to it.
DATASOURCE_UID = "prometheus"
DATASOURCE_NAME = "llm-swarm Prometheus"
FOLDER_TITLE = "LLM swarm"  # the provisioned dashboards' folder
# The service-account token (sent as `Authorization: Bearer`) and the base URL, from the environment.
TOKEN_ENV = "GRAFANA_TOKEN"
URL_ENV = "GRAFANA_URL"
