"""`swarm tune`'s plan (swarm/tune/plan.py): flags from keys, the grid's cross product and
names, --configs files, the command each configuration starts, the server family, --resume."""

from __future__ import annotations

import pytest

from swarm.core.errors import UsageError
from swarm.tune.plan import (
    base_flags,
    config_name,
    dir_name,
    family_of,
    flag_of,
    grid_configs,
    parse_configs,
    parse_grid,
    pending,
    read_configs,
    serve_command,
)


@pytest.mark.parametrize(
    "key, flag",
    [
        ("np", "-np"),
        ("c", "-c"),
        ("ub", "-ub"),
        ("max-num-seqs", "--max-num-seqs"),
        ("max_num_seqs", "--max-num-seqs"),
        ("-np", "-np"),
        ("--cache-type-k", "--cache-type-k"),
    ],
)
def test_key_to_flag(key, flag):
    assert flag_of(key) == flag


def test_bad_key_is_a_usage_error():
    with pytest.raises(UsageError, match="bad flag name"):
        flag_of("max num")


def test_grid_cross_product_first_grid_slowest():
    grid = parse_grid(["max-num-seqs=64,256", "gpu-memory-utilization=0.90,0.92"])
    assert grid == [("--max-num-seqs", ["64", "256"]), ("--gpu-memory-utilization", ["0.90", "0.92"])]
    configs = grid_configs(grid)
    assert [config_name(c) for c in configs] == [
        "max-num-seqs=64 gpu-memory-utilization=0.90",
        "max-num-seqs=64 gpu-memory-utilization=0.92",
        "max-num-seqs=256 gpu-memory-utilization=0.90",
        "max-num-seqs=256 gpu-memory-utilization=0.92",
    ]
    assert configs[0] == {"--max-num-seqs": "64", "--gpu-memory-utilization": "0.90"}


def test_grid_key_written_with_its_dash():
    assert parse_grid(["-np=1,4"]) == [("-np", ["1", "4"])]


def test_no_grid_is_one_base_configuration():
    assert grid_configs([]) == [{}]
    assert config_name({}) == "base"


@pytest.mark.parametrize("spec", ["max-num-seqs", "=1,2", "max-num-seqs=", "max-num-seqs=1,,2"])
def test_bad_grid_is_one_usage_error(spec):
    with pytest.raises(UsageError, match="bad --grid"):
        parse_grid([spec])


def test_grid_naming_a_flag_twice_is_refused():
    with pytest.raises(UsageError, match="twice"):
        parse_grid(["np=1", "-np=4"])


def test_configs_file():
    configs = parse_configs(
        '[{"max_num_seqs": 64, "enable-chunked-prefill": true}, {"-np": 4, "enable-prefix-caching": false}]',
        "serve.json",
    )
    assert configs == [
        {"--max-num-seqs": "64", "--enable-chunked-prefill": ""},
        {"-np": "4", "--no-enable-prefix-caching": ""},
    ]
    assert config_name(configs[0]) == "max-num-seqs=64 enable-chunked-prefill"


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "not JSON"),
        ('{"max-num-seqs": 64}', "a non-empty JSON list of objects"),
        ("[]", "a non-empty JSON list of objects"),
        ("[1, 2]", "a non-empty JSON list of objects"),
        ('[{"max-num-seqs": [1, 2]}]', "entry 1"),
    ],
)
def test_bad_configs_file_is_one_line(text, message):
    with pytest.raises(UsageError, match=message) as e:
        parse_configs(text, "c.json")
    assert "\n" not in str(e.value)


def test_missing_configs_file(tmp_path):
    with pytest.raises(UsageError, match="--configs"):
        read_configs(tmp_path / "nope.json")


def test_serve_command_appends_port_and_host():
    cmd = serve_command(["vllm", "serve", "M", "--tensor-parallel-size", "4"], {"--max-num-seqs": "64"}, 8123)
    assert cmd == [
        "vllm",
        "serve",
        "M",
        "--tensor-parallel-size",
        "4",
        "--max-num-seqs",
        "64",
        "--port",
        "8123",
        "--host",
        "127.0.0.1",
    ]


def test_serve_command_replaces_a_flag_of_the_base_not_duplicates_it():
    base = [
        "vllm",
        "serve",
        "M",
        "--max-num-seqs",
        "64",
        "--max-model-len=65536",
        "--port",
        "8000",
        "--host",
        "::1",
    ]
    cmd = serve_command(base, {"--max-num-seqs": "256", "--max-model-len": "16384"}, 9000)
    assert cmd.count("--max-num-seqs") == 1 and cmd[cmd.index("--max-num-seqs") + 1] == "256"
    assert "--max-model-len=65536" not in cmd and cmd[cmd.index("--max-model-len") + 1] == "16384"
    assert cmd.count("--port") == 1 and cmd[cmd.index("--port") + 1] == "9000"
    assert cmd.count("--host") == 1 and cmd[cmd.index("--host") + 1] == "::1"  # the base's own kept


def test_serve_command_flag_alone_and_bare_base_flags():
    base = ["llama-server", "-m", "m.gguf", "--metrics", "-np", "2"]
    cmd = serve_command(base, {"-np": "4", "--cont-batching": ""}, 7000)
    kept = ["llama-server", "-m", "m.gguf", "--metrics"]
    assert cmd == [*kept, "-np", "4", "--cont-batching", "--port", "7000", "--host", "127.0.0.1"]


def test_base_flags():
    assert base_flags(
        ["vllm", "serve", "M", "--max-num-seqs", "64", "--enforce-eager", "--x=-1", "-c", "-1"]
    ) == {
        "--max-num-seqs": "64",
        "--enforce-eager": "",
        "--x": "-1",
        "-c": "-1",
    }


@pytest.mark.parametrize(
    "cmd, family",
    [
        (["vllm", "serve", "M"], "vllm"),
        (["/opt/llama/bin/llama-server", "-m", "m.gguf"], "llamacpp"),
        (["python", "-m", "swarm", "sim", "--profile", "instant"], "vllm"),
        (["python", "-m", "swarm", "sim", "--server", "llamacpp"], "llamacpp"),
        (["swarm", "sim", "--server=llamacpp"], "llamacpp"),
    ],
)
def test_family_of(cmd, family):
    assert family_of(cmd) == family


def test_dir_name_is_a_safe_directory_name():
    assert (
        dir_name("max-num-seqs=64 gpu-memory-utilization=0.90")
        == "max-num-seqs=64__gpu-memory-utilization=0.90"
    )
    assert "/" not in dir_name("model=/a/b c")
    assert dir_name("base") == "base"


def test_resume_skips_finished_configurations():
    configs = grid_configs(parse_grid(["np=1,4,8"]))
    assert pending(configs, {"np=4"}) == [{"-np": "1"}, {"-np": "8"}]
    assert pending(configs, set()) == configs
