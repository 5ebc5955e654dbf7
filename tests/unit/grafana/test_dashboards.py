"""Dashboards as code: the checked-in JSON is what swarm/grafana/dashboards.py builds, and it is valid
Grafana dashboard JSON (schema version, unique ids, the provisioned datasource, defined variables)."""

from __future__ import annotations

import argparse
import json
import re

import pytest
import yaml

from swarm.core.server_families import SGLANG
from swarm.grafana import cli as dashboards_cli
from swarm.grafana import dashboards, names
from swarm.grafana.api import ANNOTATION_TAG
from swarm.live.exporter import ExportState, render
from swarm.stats.aggregate import Aggregate
from tests.helpers.support import REPO

BUILT = dashboards.build_all()
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__range", "__range_s", "__interval_ms"}
PANEL_TYPES = {"row", "timeseries", "stat"}


def test_checked_in_json_is_not_stale() -> None:
    stale = dashboards.stale(REPO / dashboards.DASHBOARD_DIR)
    assert not stale, f"stale dashboards {stale}: run `swarm dashboards build` and commit the JSON"
    on_disk = {p.name for p in (REPO / dashboards.DASHBOARD_DIR).glob("*.json")}
    assert on_disk == set(BUILT), (
        "a JSON file in dashboards/grafana/dashboards/ is not built by swarm/grafana/dashboards.py"
    )


def test_build_command_writes_and_checks(tmp_path, capsys) -> None:
    parser = argparse.ArgumentParser()
    dashboards_cli.configure(parser)
    out = tmp_path / "d"
    assert dashboards_cli.main(parser.parse_args(["build", "--out", str(out)])) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(BUILT)
    assert dashboards_cli.main(parser.parse_args(["build", "--out", str(out), "--check"])) == 0
    (out / "vllm-server.json").write_text("{}")
    assert dashboards_cli.main(parser.parse_args(["build", "--out", str(out), "--check"])) == 1
    assert "vllm-server.json is stale" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(BUILT))
def test_valid_grafana_dashboard_json(name: str) -> None:
    d = json.loads((REPO / dashboards.DASHBOARD_DIR / name).read_text())
    assert isinstance(d["title"], str) and d["title"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"])
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    assert "id" not in d or d["id"] is None  # instance-specific: must not be in provisioned JSON
    panels = list(dashboards.iter_panels(d))
    ids = [p["id"] for p in panels]
    assert all(isinstance(i, int) and i > 0 for i in ids) and len(ids) == len(set(ids)), ids
    occupied: set[tuple[int, int]] = set()
    for p in panels:
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert all(isinstance(g[k], int) for k in "hwxy") and g["x"] + g["w"] <= 24 and g["h"] > 0
        cells = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & occupied, f"panel {p['title']!r} overlaps another"
        occupied |= cells
        if p["type"] == "row":
            continue
        assert p["title"] and p.get("description"), "every panel says what it shows"
        assert p["datasource"] == {"type": "prometheus", "uid": dashboards.DATASOURCE_UID}
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"]["uid"] == dashboards.DATASOURCE_UID and t["expr"].strip()
    # every $variable used is defined (or one of Grafana's built-ins)
    defined = {v["name"] for v in d["templating"]["list"]}
    for v in d["templating"]["list"]:
        assert v["datasource"]["uid"] == dashboards.DATASOURCE_UID and v["type"] == "query"
    exprs = [e for _, _, e in dashboards.panel_queries(d)]
    exprs += [a["expr"] for a in d["annotations"]["list"] if a.get("expr")]
    exprs += [v["query"] for v in d["templating"]["list"]]
    used = {m for e in exprs for m in re.findall(r"\$(\w+)", e)}
    assert used <= defined | GRAFANA_BUILTINS, used - defined - GRAFANA_BUILTINS
    assert defined <= used, "a variable no query uses"
    # run/stage annotations posted by swarm.grafana.api.Annotator show on every dashboard
    tag_queries = [a for a in d["annotations"]["list"] if a.get("target", {}).get("type") == "tags"]
    assert any(a["enable"] and a["target"]["tags"] == [ANNOTATION_TAG] for a in tag_queries)


@pytest.mark.parametrize("name", sorted(BUILT))
def test_round_trips_through_grafanas_schema_types(name: str) -> None:
    """grafana-foundation-sdk's Dashboard model (generated from Grafana's schema) keeps every key."""
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.models.dashboard import Dashboard

    d = BUILT[name]
    assert json.loads(JSONEncoder().encode(Dashboard.from_json(d))) == d


def test_provisioning_points_at_the_dashboards_and_datasource() -> None:
    prov = yaml.safe_load((REPO / "dashboards/grafana/provisioning/datasources/prometheus.yml").read_text())
    (ds,) = prov["datasources"]
    assert ds["uid"] == dashboards.DATASOURCE_UID and ds["type"] == "prometheus"
    assert ds["name"] == names.DATASOURCE_NAME
    providers = yaml.safe_load(
        (REPO / "dashboards/grafana/provisioning/dashboards/llm-swarm.yml").read_text()
    )
    (prov_d,) = providers["providers"]
    assert prov_d["type"] == "file" and prov_d["folder"] == names.FOLDER_TITLE
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"] if v.startswith("./"))
    assert mounts[f"./{dashboards.DASHBOARD_DIR}"] == prov_d["options"]["path"]
    assert mounts["./dashboards/grafana/provisioning"] == "/etc/grafana/provisioning"


def test_load_test_dashboard_covers_every_exported_swarm_metric() -> None:
    text = render(ExportState(aggregate=Aggregate(), run_id="r")).decode()
    exported = set(re.findall(r"^# TYPE (swarm_\w+) (\w+)", text, re.M))
    d = BUILT["llm-load-test.json"]
    exprs = " ".join(e for _, _, e in dashboards.panel_queries(d))
    for name, kind in exported:
        assert re.search(rf"\b{name}(_bucket|_sum|_count)?\b", exprs), f"{name} ({kind}) is on no panel"
    names = {n for n, _ in exported}
    for used in set(re.findall(r"\bswarm_\w+", exprs)):
        base = re.sub(r"_(bucket|sum|count)$", "", used)
        assert base in names, f"the dashboard queries {used}, which swarm/live/exporter.py does not export"
    assert {v["name"] for v in d["templating"]["list"]} == {"run_id", "workload", "model_name"}
    for q in ("0.5", "0.95", "0.99"):
        for m in ("ttft", "ttfa", "itl", "tpot", "e2e"):
            assert f"histogram_quantile({q}, sum by (le, workload) (rate(swarm_{m}_seconds_bucket" in exprs


# what seed 003 asks of a server dashboard, as vLLM metric names (REFERENCE.md §2)
SEED_003 = {
    "TTFT p50/p95": "vllm:time_to_first_token_seconds_bucket",
    "tokens/s in": "vllm:prompt_tokens_total",
    "tokens/s out": "vllm:generation_tokens_total",
    "running": "vllm:num_requests_running",
    "waiting (queue length)": "vllm:num_requests_waiting",
    "KV-cache usage": "vllm:kv_cache_usage_perc",
    "batch size": "vllm:iteration_tokens_total_bucket",
    "queue time": "vllm:request_queue_time_seconds_bucket",
    "preemptions": "vllm:num_preemptions_total",
    "prefix-cache hits": "vllm:prefix_cache_hits_total",
    "finish reasons": "vllm:request_success_total",
    "spec-decode acceptance": "vllm:spec_decode_num_accepted_tokens_total",
}
# current name -> pre-0.12 name: every query on the first also asks for the second
RENAMED = {
    "vllm:kv_cache_usage_perc": "vllm:gpu_cache_usage_perc",
    "vllm:prefix_cache_queries_total": "vllm:gpu_prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total": "vllm:gpu_prefix_cache_hits_total",
    "vllm:inter_token_latency_seconds_bucket": "vllm:time_per_output_token_seconds_bucket",
}


def test_vllm_dashboard_has_the_seed_003_panels_with_pre_012_fallbacks() -> None:
    queries = list(dashboards.panel_queries(BUILT["vllm-server.json"]))
    exprs = " ".join(e for _, _, e in queries)
    for what, metric in SEED_003.items():
        assert metric in exprs, what
    for new, old in RENAMED.items():
        using = [e for _, _, e in queries if new in e]
        assert using, new
        for e in using:
            assert old in e and " or " in e, f"{new} without the fallback {old}: {e}"
    assert "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket" in exprs
    assert "histogram_quantile(0.95, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket" in exprs


def test_client_vs_server_compares_the_same_statistics() -> None:
    panels = {t: e for t, _, e in dashboards.panel_queries(BUILT["client-vs-server.json"])}
    ttft_ratio = panels["TTFT p99 ratio (client / server)"]
    assert "swarm_ttft_seconds_bucket" in ttft_ratio.split(" / ")[0]
    assert "vllm:time_to_first_token_seconds_bucket" in ttft_ratio.split(" / ")[-1]
    assert "swarm_e2e_seconds_bucket" in panels["E2E p99 ratio (client / server)"]
    assert "vllm:e2e_request_latency_seconds_bucket" in panels["E2E p99 gap (client - server)"]
    all_exprs = " ".join(panels.values())
    for pair in [
        ("swarm_requests_total", "vllm:request_success_total"),
        ("swarm_output_tokens_total", "vllm:generation_tokens_total"),
        ("swarm_prompt_tokens_total", "vllm:prompt_tokens_total"),
    ]:
        assert all(m in all_exprs for m in pair)


def test_load_test_dashboard_speaks_the_swarms_vocabulary() -> None:
    """Cancelled requests are neither ok nor failed (as in summary.json); stages count from 1."""
    panels = {t: e for t, _, e in dashboards.panel_queries(BUILT["llm-load-test.json"])}
    errors = panels["Error rate"]
    numerator, denominator = errors.split(" / ")
    # cancelled (the stop's) and cancelled_by_client (--cancel) are neither ok nor failed
    assert 'outcome!~"ok|cancelled|cancelled_by_client"' in numerator, errors
    assert 'outcome!~"cancelled|cancelled_by_client"' in denominator, errors
    assert panels["Stage"].endswith(") + 1"), panels["Stage"]  # swarm_stage is the 0-based index


def test_every_family_panel_reads_each_family_by_its_own_names() -> None:
    """`by_family` labels each part with its family, and a family's part names only its own
    metrics (a copy-paste slip would draw one engine's numbers under another's name)."""
    assert dashboards.by_family({"a": "x", "b": "y"}) == (
        'label_replace(x, "family", "a", "", "") or label_replace(y, "family", "b", "", "")'
    )
    prefixes = {
        "vllm": "vllm:",
        "llamacpp": "llamacpp:",
        "sglang": "sglang:",
        "tgi": "tgi_",
        "trtllm": "trtllm_",
    }
    tables = [dashboards.RUNNING, dashboards.WAITING, dashboards.KV_USAGE, dashboards.PROMPT_TOKENS,
              dashboards.GENERATION_TOKENS, dashboards.PREFIX_HITS, dashboards.PREEMPTIONS, dashboards.FINISHED,
              dashboards.TTFT, dashboards.ITL, dashboards.E2E, dashboards.QUEUE]  # fmt: skip
    for table in tables:
        for fam, expr in table.items():
            own = prefixes[fam.split(" ")[0]]
            names = set(re.findall(r"\b(?:vllm:|llamacpp:|sglang:|tgi_|trtllm_)\w+", expr))
            assert names and all(n.startswith(own) for n in names), (fam, expr)
            if fam == "sglang" and table in (dashboards.RUNNING, dashboards.WAITING, dashboards.KV_USAGE):
                assert dashboards.rank0(SGLANG.rank_labels) in expr  # one scheduler's batch, not one per rank
    assert "tgi" not in dashboards.TTFT and "llamacpp" not in dashboards.TTFT  # absent, not 0


def test_every_family_panel_agrees_with_the_metric_map() -> None:
    """The dashboard's per-family tables and the report's map of each family's names
    (swarm/core/server_families.py) say the same: a family is in a panel iff it has the field,
    and every name a panel reads is one the map gives that family."""
    from swarm.core.server_families import FAMILIES

    fields = {
        "running": dashboards.RUNNING, "waiting": dashboards.WAITING, "kv_usage": dashboards.KV_USAGE,
        "prompt_tokens": dashboards.PROMPT_TOKENS, "generation_tokens": dashboards.GENERATION_TOKENS,
        "prefix_hits": dashboards.PREFIX_HITS, "preemptions": dashboards.PREEMPTIONS, "ttft": dashboards.TTFT,
        "itl": dashboards.ITL, "e2e": dashboards.E2E, "queue": dashboards.QUEUE,
    }  # fmt: skip
    for name, fam in FAMILIES.items():
        known = {
            n
            for table in (fam.gauges, fam.counters, fam.histograms)
            for names in table.values()
            for n in names
        }
        known |= {n for pair in fam.ratios.values() for n in pair} | set(fam.success) | {fam.cached} - {None}
        for field, table in [*fields.items(), ("success", dashboards.FINISHED)]:
            has = (
                bool(fam.success)
                if field == "success"
                else fam.has(field) or (field == "prefix_hits" and fam.cached)
            )
            parts = [expr for key, expr in table.items() if key.split(" ")[0] == name]
            assert bool(parts) == bool(has), (name, field)
            for expr in parts:
                used = set(re.findall(r"\b(?:vllm:|llamacpp:|sglang:|tgi_|trtllm_)\w+", expr))
                used = {re.sub(r"_bucket$", "", n) for n in used}
                assert used <= known, (name, field, used - known)
