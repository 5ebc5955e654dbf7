"""swarm/grafana/api.py against the Grafana stand-in (tests/helpers/grafana_standin.py, a thread here): push
and annotations. The annotator in a gevent-patched process: tests/integration/test_grafana.py."""

from __future__ import annotations

import io
import json
import time

import pytest

from swarm.core.errors import SwarmError, UsageError
from swarm.grafana import api as grafana
from swarm.grafana import dashboards, names
from tests.helpers.grafana_standin import grafana_standin
from tests.helpers.support import REPO, free_port

TOKEN = "glsa_s3cr3t_t0ken_value"
PROM_URL = "http://prometheus:9090"


def _push(url: str, token: str | None = TOKEN) -> tuple[list[dict], str]:
    out = io.StringIO()
    results = grafana.push(url, token, PROM_URL, timeout_s=5.0, log=out)
    return results, out.getvalue()


def test_push_creates_datasource_and_imports_every_dashboard() -> None:
    with grafana_standin(TOKEN) as g:
        results, out = _push(g.url)
        ds = g.datasources[dashboards.DATASOURCE_UID]
        assert ds["type"] == "prometheus" and ds["url"] == PROM_URL and ds["access"] == "proxy"
        assert ds["name"] == names.DATASOURCE_NAME
        built = dashboards.build_all()
        assert set(g.dashboards) == {m["uid"] for m in built.values()}
        for model in built.values():
            stored = g.dashboards[model["uid"]]
            assert stored["version"] == 1
            assert stored["dashboard"] == {k: v for k, v in model.items() if k not in ("id", "version")}
        posts = [r for r in g.requests if r.path == "/api/dashboards/db"]
        assert len(posts) == len(built) and all(r.body["overwrite"] is True for r in posts)
        assert all(r.headers["Authorization"] == f"Bearer {TOKEN}" for r in g.requests)
    assert results[0]["message"] == "Datasource added"
    assert all(r["status"] == "success" for r in results[1:])
    assert "created" in out and out.count("dashboard ") == len(dashboards.DASHBOARDS)
    assert TOKEN not in out


def test_push_twice_updates_datasource_and_overwrites_dashboards() -> None:
    with grafana_standin(TOKEN) as g:
        _push(g.url)
        results, out = _push(g.url, TOKEN)
        assert results[0]["message"] == "Datasource updated"
        assert [r.method for r in g.requests if r.path.startswith("/api/datasources")] == [
            "POST",
            "POST",
            "PUT",
        ]
        assert {d["version"] for d in g.dashboards.values()} == {2}
        assert len(g.datasources) == 1
    assert "updated" in out


def test_push_into_folder() -> None:
    with grafana_standin(TOKEN) as g:
        grafana.push(g.url, TOKEN, PROM_URL, folder_uid="llm-swarm", log=io.StringIO())
        assert {d["folderUid"] for d in g.dashboards.values()} == {"llm-swarm"}


def test_push_with_a_refused_token_is_one_line_without_the_token() -> None:
    with grafana_standin("the-right-token") as g, pytest.raises(SwarmError) as e:
        _push(g.url, TOKEN)
    msg = str(e.value)
    assert "401" in msg and "GRAFANA_TOKEN" in msg and TOKEN not in msg and "\n" not in msg


def test_push_to_a_grafana_that_is_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SwarmError) as e:
        _push(url)
    assert "not reachable" in str(e.value) and url in str(e.value) and "\n" not in str(e.value)


def test_push_command_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    grafana.configure(parser)
    with grafana_standin(TOKEN) as g:
        monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
        args = parser.parse_args(["push", "--url", g.url + "/", "--prometheus-url", PROM_URL])
        assert grafana.main(args) == 0
        assert len(g.dashboards) == len(dashboards.DASHBOARDS)
    out = capsys.readouterr().out
    assert (
        out.count("\n") == 1 + len(dashboards.DASHBOARDS) and TOKEN not in out
    )  # the datasource, each dashboard
    with pytest.raises(UsageError):
        grafana.main(parser.parse_args(["push", "--url", "localhost:3000"]))


def test_push_through_the_swarm_cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from swarm import cli

    with grafana_standin("other") as g:
        monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
        assert cli.main(["grafana", "push", "--url", g.url]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("swarm grafana: Grafana at") and TOKEN not in err


# ----------------------------------------------------------------------------- annotations


def test_annotations_for_run_start_stages_and_end() -> None:
    with grafana_standin(TOKEN) as g:
        a = grafana.Annotator.from_env(g.url, token=TOKEN)
        assert a is not None
        t0 = time.time()
        ids = [
            a.run_started("run-1", "16 users, mixed"),
            a.stage_started("run-1", 1, "32 users"),
            a.stage_started("run-1", 2),
            a.run_finished("run-1", "exit 0"),
        ]
        assert all(isinstance(i, int) for i in ids) and len(set(ids)) == 4
        assert a.posted == 4
        anns = g.annotations
        assert [x["text"] for x in anns] == [
            "swarm run run-1 started: 16 users, mixed",
            "swarm run run-1: stage 2 (32 users)",  # index 1: numbered from 1 as every label
            "swarm run run-1: stage 3",
            "swarm run run-1 finished: exit 0",
        ]
        assert all({grafana.ANNOTATION_TAG, "run_id:run-1"} <= set(x["tags"]) for x in anns)
        assert (
            "stage:1" in anns[1]["tags"] and "run-start" in anns[0]["tags"] and "run-end" in anns[3]["tags"]
        )
        assert all(abs(x["time"] / 1000 - t0) < 10 for x in anns)  # epoch milliseconds
        body = next(r.body for r in g.requests if r.path == "/api/annotations")
        assert isinstance(body["time"], int) and body["tags"][0] == grafana.ANNOTATION_TAG
        # the dashboards' annotation query (tags) finds them
        tag_query = [
            q["target"]["tags"]
            for m in dashboards.build_all().values()
            for q in m["annotations"]["list"]
            if q.get("target", {}).get("type") == "tags"
        ]
        assert tag_query and all(set(t) <= set(anns[0]["tags"]) for t in tag_query)


def test_annotation_at_a_given_time() -> None:
    with grafana_standin(TOKEN) as g:
        a = grafana.Annotator.from_env(g.url, token=TOKEN)
        a.stage_started("r", 3, time_s=1_700_000_000.25)
        assert g.annotations[0]["time"] == 1_700_000_000_250


def test_from_env_reads_the_token_and_needs_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    assert grafana.Annotator.from_env(None) is None
    assert grafana.Annotator.from_env("") is None
    with pytest.raises(UsageError):
        grafana.Annotator.from_env("grafana:3000")
    monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
    with grafana_standin(TOKEN) as g:
        a = grafana.Annotator.from_env(g.url)
        assert a.run_started("r") is not None


def test_refused_token_warns_once_and_the_run_goes_on() -> None:
    err = io.StringIO()
    with grafana_standin("the-right-token") as g:
        a = grafana.Annotator.from_env(g.url, token=TOKEN, stream=err)
        assert a.run_started("r") is None
        assert a.stage_started("r", 1) is None
        assert a.run_finished("r") is None
        assert len(g.requests) == 1  # nothing more after the first refusal
    text = err.getvalue()
    assert text.count("\n") == 1 and "401" in text and "warning" in text and TOKEN not in text
    assert not a.enabled


def test_grafana_down_warns_once_quickly() -> None:
    err = io.StringIO()
    a = grafana.Annotator.from_env(f"http://127.0.0.1:{free_port()}", token=TOKEN, stream=err)
    t0 = time.monotonic()
    for i in range(5):
        a.stage_started("r", i)
    assert time.monotonic() - t0 < 3
    assert err.getvalue().count("\n") == 1 and "not reachable" in err.getvalue()


def test_slow_grafana_times_out_with_one_warning() -> None:
    err = io.StringIO()
    with grafana_standin(TOKEN) as g:
        g.delay_s = 2.0
        a = grafana.Annotator.from_env(g.url, token=TOKEN, timeout_s=0.3, stream=err)
        t0 = time.monotonic()
        a.run_started("r")
        a.run_finished("r")
        assert time.monotonic() - t0 < 1.9
    assert err.getvalue().count("\n") == 1 and "no answer within 0.3s" in err.getvalue()


def test_user_password_in_the_url_is_used_and_never_printed() -> None:
    err = io.StringIO()
    with grafana_standin(TOKEN, basic=("admin", "pa55word")) as g:
        host = g.url.removeprefix("http://")
        a = grafana.Annotator.from_env(f"http://admin:pa55word@{host}", token="", stream=err)
        assert a.run_started("r") is not None
        bad = grafana.Annotator.from_env(f"http://admin:wrong-pa55@{host}", token="", stream=err)
        assert bad.run_started("r") is None
    assert "401" in err.getvalue() and "pa55" not in err.getvalue() and "admin:" not in err.getvalue()


def test_server_error_message_is_reported() -> None:
    with grafana_standin(TOKEN) as g:
        err = io.StringIO()
        a = grafana.Annotator.from_env(g.url, token=TOKEN, stream=err)
        assert a.annotate("", ["x"]) is None  # Grafana: 400 Text field should not be empty
    assert "HTTP 400: Text field should not be empty" in err.getvalue()


def test_datasource_model_matches_provisioning() -> None:
    import yaml

    prov = yaml.safe_load((REPO / "dashboards/grafana/provisioning/datasources/prometheus.yml").read_text())
    (ds,) = prov["datasources"]
    model = grafana.datasource_model("http://prometheus:9090")
    for key in ("name", "uid", "type", "access", "url", "jsonData"):
        assert ds[key] == model[key], key
    assert json.dumps(model)  # plain JSON


def test_a_grafana_message_repeating_the_token_changed_or_escaped_is_scrubbed() -> None:
    """Grafana's words are untrusted too: the token upper-cased or cut to 10 characters is scrubbed,
    terminal escapes are written out (swarm/core/apikey.py scrub, swarm/core/terminal.py)."""
    from grafana_client.client import GrafanaClientError

    token = "glsa_AbCdEfGhIjKlMnOpQrStUvWxYz012345"
    body = {"message": f"bad token {token.upper()} ({token[:10]}...) \x1b]0;pwned\x07"}
    text = grafana.describe(GrafanaClientError(400, body, "bad"), token=token)
    assert text == "HTTP 400: bad token *** (***...) \\x1b]0;pwned\\x07"
