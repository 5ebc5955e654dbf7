"""swarm/stats/provenance.py: the block put together without the API key in any form, unknown where
nobody said, and two blocks' differences with the server's version and flags first."""

from __future__ import annotations

import hashlib
import json

from swarm.core.options import OPTIONS
from swarm.stats import provenance
from swarm.stats.provenance import UNKNOWN

KEY = "sk-Proj-7fQ2mZk9LwX4tR8vB1nC6yH3"
SECRET_DESTS = [o.dest for o in OPTIONS if o.secret]


def _block(**over):
    values = {
        "api_key": KEY,
        "host": f"http://alice:{KEY}@gpu-1:8000,http://gpu-2:8000",
        "headers": f"Authorization: Bearer {KEY.lower()}",  # the key in another case
        "note": f"prefix {KEY[3:20].upper()} suffix",  # a run of it, upper case
        "workload": "chat",
        "num_users": 8,
        "sweep": [1, 2],
        "_private": "x",
        "seed": 7,
    }
    kw = dict(
        swarm={"version": "0.2.0", "commit": "abc"},
        options=provenance.resolved_options(values, SECRET_DESTS, [KEY]),
        machine={"cores": 2},
        workers=["w1"],
        targets={"http://gpu-1:8000": {"family": "vllm", "version": "0.11.0", "model": "m", "note": KEY}},
        target_command=f"vllm serve m --api-key {KEY} --hf-token=hf_abc --max-num-seqs 8",
        gpus=[],
        files={},
        seed=7,
        secrets=[KEY],
    )
    kw.update(over)
    return provenance.build(**kw)


def test_the_key_appears_nowhere_in_any_form():
    text = json.dumps(_block())
    folded = text.lower()
    for i in range(len(KEY) - 7):  # no run of 8 of its characters, in any case
        assert KEY[i : i + 8].lower() not in folded
    for algo in ("md5", "sha1", "sha256", "sha512"):  # nor a hash of it
        assert hashlib.new(algo, KEY.encode()).hexdigest() not in folded
    block = _block()
    assert "api_key" not in block["options"]  # nor a field that would say it was set, or its length
    assert "alice" not in text  # URL credentials masked
    assert block["options"]["host"].startswith("http://***@gpu-1:8000")


def test_options_are_the_resolved_values_as_json():
    opts = _block()["options"]
    assert opts["workload"] == "chat" and opts["num_users"] == 8 and opts["sweep"] == [1, 2]
    assert "_private" not in opts


def test_an_unknown_option_named_as_a_secret_is_left_out_a_table_one_kept():
    values = {"plugin_token": "abc", "web_password": "pw", "api_key_origin": "http://a:1", "host": "h"}
    table = [o.dest for o in OPTIONS]
    assert provenance.resolved_options(values, SECRET_DESTS, [], table) == {
        "api_key_origin": "http://a:1",
        "host": "h",
    }


def test_launch_command_masks_secret_flags_in_both_spellings():
    cmd = _block()["target_command"]
    assert cmd == "vllm serve m --api-key *** --hf-token=*** --max-num-seqs 8"


def test_what_nobody_said_is_unknown():
    block = _block(target_command=None, gpus=[], seed=None)
    assert block["target_command"] == UNKNOWN and block["gpus"] == UNKNOWN and block["seed"] == UNKNOWN
    assert provenance.run_info_labels(None) == {
        "version": UNKNOWN,
        "target_family": UNKNOWN,
        "target_version": UNKNOWN,
        "model": UNKNOWN,
        "workload": UNKNOWN,
    }


def test_run_info_labels_are_the_first_endpoint_s():
    assert provenance.run_info_labels(_block()) == {
        "version": "0.2.0",
        "target_family": "vllm",
        "target_version": "0.11.0",
        "model": "m",
        "workload": "chat",
    }


def test_worker_hosts_from_locust_client_ids():
    ids = ["gpu-box_1a2b", "gpu-box_ffee", "load_2_9c9c", "plain"]
    assert provenance.worker_hosts(ids) == ["gpu-box", "load_2", "plain"]


def test_file_paths_name_the_file_behind_a_dataset_kind():
    values = {"dataset": "sharegpt:/data/sg.json", "prompt_file": "p.jsonl", "trace_replay": None}
    assert provenance.file_paths(values) == {"dataset": "/data/sg.json", "prompt_file": "p.jsonl"}
    assert provenance.file_paths({"dataset": "/plain/path.jsonl"}) == {"dataset": "/plain/path.jsonl"}


def test_differences_put_the_server_s_version_and_flags_first():
    a = _block()
    b = _block(
        targets={
            "http://gpu-1:8000": {
                "family": "vllm",
                "version": "0.12.0",
                "model": "m2",
                "launch_flags": {"max_num_seqs": 16},
            }
        },
        machine={"cores": 4},
    )
    b["options"]["run_id"] = "other"  # the run's own id is no difference worth a line
    b["options"]["master_bind_port"] = 25916  # nor the free ports swarm run picked (two repeats differ)
    b["options"]["prometheus_port"] = 20447
    b["options"]["users"] = 9  # but an option that changes the load is
    keys = [k for k, _, _ in provenance.differences(a, b)]
    assert keys[:2] == [
        "targets.http://gpu-1:8000.launch_flags.max_num_seqs",
        "targets.http://gpu-1:8000.version",
    ]
    assert "targets.http://gpu-1:8000.model" in keys[2:] and "machine.cores" in keys
    assert keys.index("targets.http://gpu-1:8000.model") < keys.index("machine.cores")
    assert not any(
        k.startswith(("options.run_id", "options.master_bind_port", "options.prometheus_port")) for k in keys
    )
    assert "options.users" in keys
    assert provenance.differences(a, _block()) == []
