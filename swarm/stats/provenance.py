"""summary.json's `provenance`: what a run was, so a team can repeat it and tell two runs apart (pure).

The block (docs/metrics.md has the schema): the swarm's version and git commit; every option as
resolved, the API key never (not its value, length or a hash: a secret option is left out and
every string scrubbed of the key, swarm/core/apikey.py `scrub`; credentials in URLs masked); the
load machine; every worker's host; the target per endpoint as the server states it
(swarm/client/server_info.py) and its launch command where the swarm knows it (`--target-command`,
which `swarm tune` sets to the configuration's command); the GPUs the GPU metrics named; the
workload files' SHA-256 and the seed. What nobody stated is `UNKNOWN`, never guessed.

The facts are gathered at the edges (swarm/live/provenance.py on the master); here they are put
together, and read back: `flatten`, `differences` (a different server version or flag first) and
`run_info_labels` (the `swarm_run_info` metric's labels).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

from swarm.core.apikey import MASK, scrub

UNKNOWN = "unknown"
FILE_OPTIONS = ("dataset", "prompt_file", "trace_replay")  # options whose value names a workload file
SECRET_FLAG = re.compile(r"key|token|secret|passw|auth|cred", re.IGNORECASE)
_URL_CREDENTIALS = re.compile(r"(?<=://)[^/@\s]+@")
FIRST = ("targets.", "target_command")  # what `differences` lists first: the server and its flags
_FIRST_FIELDS = (".version", ".launch_flags", "target_command")


class Provenance(TypedDict):
    swarm: dict[str, Any]  # version, commit, dirty (a checkout's; UNKNOWN when not run from one)
    options: dict[str, Any]  # every option as resolved (Locust's and the swarm's), no secret one
    machine: dict[str, Any]  # the load machine: cpu_model, cores, memory_bytes, os, python, hostname
    workers: list[str]  # every worker's host (the master's own for a local run)
    targets: dict[str, dict[str, Any]]  # endpoint label -> family, version, model, root, max_model_len, ...
    target_command: str  # the target's launch command (--target-command; swarm tune's configuration)
    gpus: list[dict[str, Any]] | str  # the GPU metrics' GPUs (host, gpu, uuid, model), else UNKNOWN
    files: dict[str, dict[str, Any]]  # option -> {path, sha256} of each workload file
    seed: int | str


def resolved_options(
    values: Mapping[str, Any], secret_dests: Iterable[str], secrets: Sequence[str], known: Iterable[str] = ()
) -> dict:
    """Every option's value (`values`: Locust's parsed options) without the secret ones, each string
    scrubbed of `secrets` and of URL credentials, as JSON values, by name. `secret_dests`: the
    table's secret options; an option not `known` to the table (Locust's, a plugin's) whose name
    says secret (a key, token, password) is left out too."""
    skip, table = set(secret_dests), set(known)
    return {
        k: _safe(v, secrets)
        for k, v in sorted(values.items())
        if k not in skip
        and not (k not in table and SECRET_FLAG.search(k))
        and not k.startswith("_")
        and not callable(v)
    }


def masked_command(command: str, secrets: Sequence[str]) -> str:
    """A launch command with the value of every secret-named flag (`--api-key X`, `--hf-token=X`)
    masked, and `secrets` scrubbed."""
    words, out, mask_next = command.split(), [], False
    for w in words:
        if mask_next and not w.startswith("-"):
            out.append(MASK)
        elif w.startswith("-") and "=" in w and SECRET_FLAG.search(w.split("=", 1)[0]):
            out.append(w.split("=", 1)[0] + "=" + MASK)
        else:
            out.append(w)
        mask_next = w.startswith("-") and "=" not in w and bool(SECRET_FLAG.search(w))
    return _safe(" ".join(out), secrets)


def worker_hosts(client_ids: Iterable[str]) -> list[str]:
    """Locust's worker ids (`<hostname>_<hex>`) -> their hosts, sorted, once each."""
    return sorted({cid.rpartition("_")[0] or cid for cid in client_ids})


def file_paths(values: Mapping[str, Any]) -> dict[str, str]:
    """option -> the workload file it names (`--dataset sharegpt:FILE` -> FILE)."""
    out = {}
    for name in FILE_OPTIONS:
        v = values.get(name)
        if isinstance(v, str) and v:
            kind, sep, rest = v.partition(":")
            out[name] = rest if sep and name == "dataset" and "/" not in kind else v
    return out


def build(
    *,
    swarm: Mapping[str, Any],
    options: Mapping[str, Any],
    machine: Mapping[str, Any],
    workers: Iterable[str],
    targets: Mapping[str, Mapping[str, Any]],
    target_command: str | None,
    gpus: Sequence[Mapping[str, Any]],
    files: Mapping[str, Mapping[str, Any]],
    seed: int | None,
    secrets: Sequence[str] = (),
) -> Provenance:
    """The block, every string in it scrubbed of `secrets` once more (a target may echo the key)."""
    block = Provenance(
        swarm=dict(swarm),
        options=dict(options),
        machine=dict(machine),
        workers=list(workers),
        targets={k: dict(v) for k, v in targets.items()},
        target_command=masked_command(target_command, secrets) if target_command else UNKNOWN,
        gpus=[dict(g) for g in gpus] or UNKNOWN,
        files={k: dict(v) for k, v in files.items()},
        seed=seed if seed is not None else UNKNOWN,
    )
    return _safe(block, secrets)  # type: ignore[no-any-return]


def _safe(v: Any, secrets: Sequence[str]) -> Any:
    """`v` as JSON values, every string scrubbed of `secrets` and of URL credentials."""
    if isinstance(v, str):
        for s in secrets:
            v = scrub(v, s)
        return _URL_CREDENTIALS.sub(MASK + "@", v)
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, Mapping):
        return {str(k): _safe(x, secrets) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_safe(x, secrets) for x in v]
    return _safe(str(v), secrets)


def flatten(block: Mapping[str, Any] | None, prefix: str = "") -> dict[str, str]:
    """The block as `dotted.key -> text`, for side-by-side tables."""
    out: dict[str, str] = {}
    for k, v in (block or {}).items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        elif isinstance(v, list):
            out[key] = ", ".join(_text(x) for x in v) if v else "-"
        else:
            out[key] = _text(v)
    return out


def _text(v: Any) -> str:
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={_text(x)}" for k, x in v.items()) or "-"
    return "-" if v is None else str(v)


def differences(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> list[tuple[str, str, str]]:
    """(key, A's text, B's text) of every field that differs; the target's version and launch flags
    (and its command) first, then the rest of the target, then everything else, each group by key.
    The run's own identity (run_id, out dir) is not a difference worth a line."""
    fa, fb = flatten(a), flatten(b)
    keys = [k for k in sorted(set(fa) | set(fb)) if fa.get(k, "-") != fb.get(k, "-") and not _own(k)]
    return [(k, fa.get(k, "-"), fb.get(k, "-")) for k in sorted(keys, key=_rank)]


# The run's own identity and plumbing: where it wrote and which free ports `swarm run` picked for
# its master, web UI and exporter differ between any two runs, repeats of one plan included
OWN_OPTIONS = frozenset(
    f"options.{k}"
    for k in (
        "run_id", "swarm_out", "html_file", "csv_prefix", "summary_part", "logfile",
        "master_bind_port", "master_port", "master_host", "master_bind_host",
        "prometheus_port", "web_port", "web_host",
    )
)  # fmt: skip


def _own(key: str) -> bool:
    return key in OWN_OPTIONS


def _rank(key: str) -> tuple[int, str]:
    if key.startswith(FIRST) and any(f in key for f in _FIRST_FIELDS):
        return (0, key)
    return (1, key) if key.startswith(FIRST) else (2, key)


def run_info_labels(block: Mapping[str, Any] | None) -> dict[str, str]:
    """`swarm_run_info`'s labels: the swarm's version, the first endpoint's family, version and
    model, the workload option (UNKNOWN for what is not known yet)."""
    block = block or {}
    workload = (block.get("options") or {}).get("workload")
    targets = block.get("targets") or {}
    first = next(iter(targets.values()), {}) if isinstance(targets, Mapping) else {}
    swarm = block.get("swarm") or {}
    return {
        "version": str(swarm.get("version", UNKNOWN)),
        "target_family": str(first.get("family", UNKNOWN)),
        "target_version": str(first.get("version", UNKNOWN)),
        "model": str(first.get("model", UNKNOWN)),
        "workload": str(workload or UNKNOWN),
    }
