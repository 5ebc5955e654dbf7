"""Secrets and exposure: the API key and the Grafana token go out in the Authorization header and
nowhere else; the web UI can sit behind a login.

Every artefact of a run is searched for the secret: each file under DIR (raw bytes, and every
cell of every Parquet file, whose compressed pages a byte search could miss), the captured
stdout/stderr, the master's /metrics, and the web UI's pages and JSON.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import secrets
import string
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest
from prometheus_client.parser import text_string_to_metric_families

from swarm.orchestrate.commands import locust_command
from tests.helpers.fault_servers import auth_digest, auths, fault_server, received
from tests.helpers.support import REPO, free_port, sim_server, start, swarm_cmd, wait_for, wait_http

pytestmark = pytest.mark.integration


def token() -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))


def env_without_secrets(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "GRAFANA_TOKEN", "GRAFANA_URL")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def assert_nowhere(secret: str, directory: Path, *texts: str) -> int:
    """The secret is in no file under `directory` and in none of `texts`; returns the files searched."""
    for text in texts:
        assert secret not in text
    files = [p for p in directory.rglob("*") if p.is_file()]
    for path in files:
        assert secret.encode() not in path.read_bytes(), path
        if path.suffix == ".parquet":
            for row in pq.read_table(path).to_pylist():
                assert secret not in repr(row), (path, row)
    return len(files)


def fetch(url: str, timeout: float = 5) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode("utf-8", "replace")


def test_api_key_and_grafana_token_stay_in_the_authorization_header(tmp_path):
    """`swarm run --api-key` against `swarm sim --api-key` (requests succeed, so the key went out),
    with a Grafana that repeats the token it got in its 401 answer: neither secret is anywhere."""
    key, grafana_token = token(), token()
    out = tmp_path / "run"
    prom = free_port()
    with (
        sim_server(tmp_path, "--profile", "instant", "--api-key", key) as sim,
        fault_server(tmp_path, "echo_auth") as (grafana, grafana_log),
    ):
        cmd = swarm_cmd(
            "run",
            "--host",
            sim.url,
            "--api-key",
            key,
            "--workers",
            "2",
            "-u",
            "4",
            "-t",
            "4s",
            "--workload",
            "short_qa",
            "--grafana-url",
            grafana,
            "--prometheus-port",
            str(prom),
            "--out",
            str(out),
            "--",
            "--max-tokens",
            "8",
        )
        log = tmp_path / "run.log"
        with start(cmd, log, env=env_without_secrets(GRAFANA_TOKEN=grafana_token)) as run:
            wait_http(f"http://127.0.0.1:{prom}/metrics", timeout=60, proc=run.popen, log=log)
            time.sleep(2)
            metrics = fetch(f"http://127.0.0.1:{prom}/metrics")
            code = run.wait(timeout=120)
        assert received(grafana_log), "swarm run never called the Grafana"
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert "swarm: warning: Grafana annotations off" in text  # the one warning line, token scrubbed
    assert "swarm_requests" in metrics
    n = assert_nowhere(key, out, text, metrics)
    assert_nowhere(grafana_token, out, text, metrics)
    records = pq.read_table(out / "requests.parquet").to_pylist()
    assert records and all(r["outcome"] == "ok" for r in records)  # the server took the key
    # /metrics: aggregate numbers only, no request contents (ids, prompts, answers, messages)
    labels = {k for fam in text_string_to_metric_families(metrics) for smp in fam.samples for k in smp.labels}
    run_info = {"version", "target_family", "target_version", "model"}  # swarm_run_info: what the server says
    assert labels <= {"run_id", "workload", "model_name", "outcome", "le", "quantile", *run_info}, labels
    assert not any(r["request_id"] in metrics for r in records)
    assert n >= 8, sorted(p.name for p in out.rglob("*"))


def test_a_refused_key_is_recorded_with_the_servers_message_and_never_echoed(tmp_path):
    """A server that answers 401 with the Authorization header it got in its message: every
    request is an http_error with that message, the key replaced by ***, in records and summary."""
    key = token()
    out = tmp_path / "run"
    with fault_server(tmp_path, "echo_auth") as (url, _):
        p = subprocess.run(
            swarm_cmd(
                "run",
                "--host",
                url,
                "--model",
                "m",
                "--workers",
                "1",
                "-u",
                "2",
                "-t",
                "2s",
                "--workload",
                "short_qa",
                "--out",
                str(out),
            ),
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
            env=env_without_secrets(OPENAI_API_KEY=key),
        )
    assert p.returncode == 1, p.stdout + p.stderr  # every request failed
    records = pq.read_table(out / "requests.parquet").to_pylist()
    assert records and all(r["outcome"] == "http_error" and r["http_status"] == 401 for r in records)
    assert {r["error"] for r in records} == {"401 invalid credentials: Bearer ***"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["errors"]["http_error"] == [
        {"message": "401 invalid credentials: Bearer ***", "count": len(records)}
    ]
    assert_nowhere(key, out, p.stdout, p.stderr)


LOCUST = locust_command()


def test_web_ui_pages_and_json_never_show_the_key(tmp_path):
    """A Locust web UI (key from $OPENAI_API_KEY) running a test: its page, the stats JSON the LLM
    tab reads, the HTML report, CSVs, failures, exceptions, logs and /metrics carry no key."""
    key = token()
    with sim_server(tmp_path, "--profile", "instant", "--api-key", key) as sim:
        port = free_port()
        log = tmp_path / "ui.log"
        cmd = [
            *LOCUST,
            "--web-port",
            str(port),
            "--web-host",
            "127.0.0.1",
            "--autostart",
            "-u",
            "2",
            "-r",
            "2",
            "--host",
            sim.url,
            "--workload",
            "short_qa",
            "--max-tokens",
            "8",
            "--csv",
            str(tmp_path / "ui"),
            "--csv-full-history",
        ]
        with start(cmd, log, env=env_without_secrets(OPENAI_API_KEY=key)) as ui:
            base = f"http://127.0.0.1:{port}"
            wait_http(base + "/", timeout=60, proc=ui.popen, log=log)
            time.sleep(3)
            pages = {
                path: fetch(base + path)
                for path in (
                    "/",
                    "/stats/requests",
                    "/stats/report",
                    "/stats/requests/csv",
                    "/stats/requests_full_history/csv",
                    "/stats/failures/csv",
                    "/exceptions",
                    "/exceptions/csv",
                    "/logs",
                    "/tasks",
                    "/metrics",
                )
            }
    assert '"extended_stats"' in pages["/stats/requests"] and '"llm"' in pages["/stats/requests"]
    stats = json.loads(pages["/stats/requests"])
    assert stats["total_rps"] >= 0 and stats["stats"][-1]["num_requests"] > 0  # requests ran...
    assert stats["fail_ratio"] == 0  # ...and the server took the key
    assert "api_key" not in pages["/"] and "api-key" not in pages["/"]  # not even an empty field
    for path, text in pages.items():
        assert key not in text, path
    assert_nowhere(key, tmp_path, log.read_text())  # its log and CSVs (and the simulator's files)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_web_login_guards_every_page_but_metrics(tmp_path):
    """`--web-login` with $SWARM_WEB_PASSWORD: pages and the stats JSON redirect to the login until
    the right password is given; a wrong one does not open them; /metrics stays open."""
    password = token()
    port = free_port()
    log = tmp_path / "ui.log"
    cmd = [
        *LOCUST,
        "--web-login",
        "--web-port",
        str(port),
        "--web-host",
        "127.0.0.1",
        "--host",
        "http://127.0.0.1:9",
    ]
    with start(cmd, log, env=env_without_secrets(SWARM_WEB_PASSWORD=password)) as ui:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/login", timeout=60, proc=ui.popen, log=log)
        opener = urllib.request.build_opener(
            _NoRedirect, urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )

        def call(path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
            data = urllib.parse.urlencode(form).encode() if form is not None else None
            try:
                with opener.open(base + path, data=data, timeout=5) as r:
                    return r.status, r.headers.get("Location") or ""
            except urllib.error.HTTPError as e:
                return e.code, e.headers.get("Location") or ""

        for path in ("/", "/stats/requests", "/stats/report", "/logs"):
            status, where = call(path)
            assert status == 302 and where.startswith("/login"), (path, status, where)
        assert call("/metrics")[0] == 200
        assert call("/login_submit", {"username": "swarm", "password": "wrong"}) == (302, "/login")
        assert call("/")[0] == 302
        assert call("/login_submit", {"username": "swarm", "password": password}) == (302, "/")
        assert call("/")[0] == 200 and call("/stats/requests")[0] == 200
    assert password not in log.read_text()


def test_web_login_without_a_password_refuses_to_start(tmp_path):
    p = subprocess.run(
        [*LOCUST, "--web-login", "--web-port", str(free_port()), "--host", "http://127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=env_without_secrets(),
    )
    assert p.returncode == 2, p.stderr
    errors = [line for line in p.stderr.splitlines() if "error" in line.lower()]
    assert errors == [
        "swarm: error: --web-login needs a password: set $SWARM_WEB_PASSWORD "
        "(and $SWARM_WEB_USERNAME, default swarm)"
    ], p.stderr


# -- the key's origin (issue 25 item 2) ----------------------------------------------------------


def post_form(url: str, form: dict[str, str]) -> tuple[int, dict]:
    data = urllib.parse.urlencode(form).encode()
    try:
        with urllib.request.urlopen(url, data=data, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_key_goes_only_to_the_origin_it_was_given_for(tmp_path):
    """A web UI master (`--host A`, the key in its environment, no --web-host) and a worker started
    without --host: a run started from the UI at host B sends B no Authorization header (and the log
    says why, once); a run at A sends A the key; the start form cannot move the key's origin; the UI
    listens on 127.0.0.1 only."""
    key = token()
    with (
        fault_server(tmp_path, "ok") as (good, good_log),
        fault_server(tmp_path, "ok") as (other, other_log),
    ):
        web, zmq = free_port(), free_port()
        env = env_without_secrets(OPENAI_API_KEY=key)
        common = ["--workload", "short_qa", "--max-tokens", "4", "--model", "m", "--stop-timeout", "1"]
        master_cmd = [*LOCUST, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(zmq),
                      "--web-port", str(web), "--host", good, *common]  # fmt: skip
        worker_cmd = [*LOCUST, "--worker", "--master-host", "127.0.0.1", "--master-port", str(zmq), *common]
        with (
            start(master_cmd, tmp_path / "master.log", env=env) as master,
            start(worker_cmd, tmp_path / "worker.log", env=env),
        ):
            base = f"http://127.0.0.1:{web}"
            wait_http(base + "/", timeout=60, proc=master.popen, log=tmp_path / "master.log")
            listening = {
                c.laddr.ip
                for c in psutil.Process(master.popen.pid).net_connections("tcp")
                if c.status == psutil.CONN_LISTEN and c.laddr.port == web
            }
            assert listening == {"127.0.0.1"}, listening

            def run_at(host: str, log: Path, starts: int) -> None:
                # (the worker is ready again after each stop: Locust drops it, it reports ready anew)
                wait_for(lambda: master.output().count("reported as ready") >= starts, 60, "the worker ready")
                status, answer = post_form(
                    base + "/swarm", {"user_count": "1", "spawn_rate": "1", "host": host}
                )
                assert status == 200 and answer["success"], answer
                wait_for(lambda: len(received(log)) >= 2, 60, f"requests at {host}")
                post_form(base + "/stop", {})

            run_at(other, other_log, 1)
            run_at(good, good_log, 2)
            refused = post_form(
                base + "/swarm",
                {"user_count": "1", "spawn_rate": "1", "host": other, "api_key_origin": other},
            )
            assert refused[0] == 403 and "api_key_origin" in refused[1]["message"], refused
            time.sleep(1)
            n_other = len(received(other_log))
    assert len(received(other_log)) == n_other  # the refused start sent nothing
    assert other_log.read_text().count("AUTH ") >= 2
    assert {digest for _, digest in auths(other_log)} == {"-"}  # B: discovery and requests, no key
    good_auths = [digest for path, digest in auths(good_log) if path != "/health"]
    assert good_auths and set(good_auths) == {auth_digest(f"Bearer {key}")}  # A: the key, every time
    worker_log = (tmp_path / "worker.log").read_text()
    said = [line for line in worker_log.splitlines() if "key not sent" in line]
    assert len(said) == 1, worker_log[-2000:]
    assert f"host {other} is not the origin it was given for ({good})" in said[0], said
    assert_nowhere(key, tmp_path)


def test_an_open_web_ui_with_a_key_and_no_host_is_said_loudly(tmp_path):
    """The key loaded, no --host at start, the UI opened with --web-host 0.0.0.0 and no login: one
    warning that the key is sent to no one, one that the UI is open; both on stderr at start."""
    port = free_port()
    log = tmp_path / "ui.log"
    cmd = [*LOCUST, "--web-host", "0.0.0.0", "--web-port", str(port)]
    with start(cmd, log, env=env_without_secrets(OPENAI_API_KEY=token())) as ui:
        wait_http(f"http://127.0.0.1:{port}/", timeout=60, proc=ui.popen, log=log)
        wait_for(lambda: "WARNING: the web UI listens" in log.read_text(), 30, "the warning")
    text = log.read_text()
    assert text.count("it is sent to no one") == 1, text
    assert f"the web UI listens on 0.0.0.0:{port} without --web-login" in text, text


def run_against(url: str, out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A short `swarm run` (1 worker, 2 users, 2 s of short_qa) at `url`, output captured."""
    cmd = swarm_cmd("run", "--host", url, "--model", "m", "--workers", "1", "-u", "2", "-t", "2s",
                    "--workload", "short_qa", "--out", str(out))  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO, env=env)


def test_a_mangled_key_in_a_500_body_is_scrubbed_everywhere(tmp_path):
    """A target that answers 500 repeating the key upper-cased and its first 10 characters: no run
    of 8 of the key's characters, in any case, is in any artefact of the run or its output."""
    key = token()
    out = tmp_path / "run"
    with fault_server(tmp_path, "echo_key_mangled") as (url, _):
        p = run_against(url, out, env_without_secrets(OPENAI_API_KEY=key))
    assert p.returncode == 1, p.stdout + p.stderr  # every request failed
    records = pq.read_table(out / "requests.parquet").to_pylist()
    assert records and {r["error"] for r in records} == {"500 upstream refused *** (key ***...)"}
    n = assert_no_run_of(key, out, p.stdout, p.stderr)
    assert {"summary.json", "report.html", "requests.parquet", "master.log"} <= {
        f.name for f in out.rglob("*")
    }, n


def assert_no_run_of(secret: str, directory: Path, *texts: str) -> int:
    """No run of 8 of `secret`'s characters, in any case, in `texts` or any file under `directory`
    (raw bytes and Parquet cells); returns the files searched."""
    runs = {secret[i : i + 8].lower() for i in range(len(secret) - 7)}

    def clean(text: str, where: object) -> None:
        low = text.lower()
        hit = next((r for r in runs if r in low), None)
        assert hit is None, (where, hit)

    for text in texts:
        clean(text, "output")
    files = [p for p in directory.rglob("*") if p.is_file()]
    for path in files:
        clean(path.read_bytes().decode("latin-1"), path)
        if path.suffix == ".parquet":
            for row in pq.read_table(path).to_pylist():
                clean(repr(row), path)
    return len(files)


# -- a target's words on the operator's terminal (issue 25 item 8) -------------------------------


def test_a_targets_escape_sequences_never_reach_the_terminal(tmp_path):
    """A target whose error messages and /metrics body carry terminal escapes (title, clear screen,
    colour, carriage return, bidi override): swarm run's output shows them written out, never raw."""
    out = tmp_path / "run"
    with fault_server(tmp_path, "escapes") as (url, _):
        p = run_against(url, out, env_without_secrets())
    shown = p.stdout + p.stderr
    assert p.returncode == 1, shown
    for raw in ("\x1b", "\x07", "\u202e", "\r"):
        assert raw not in shown, (raw, shown)
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown  # the /metrics failure line, written out
    records = pq.read_table(out / "requests.parquet").to_pylist()
    assert {r["error"] for r in records} == {"500 \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mred\\x0d\\u202eevil"}
