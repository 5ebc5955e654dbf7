"""Test hosts in network namespaces: each host its own namespace and address on one bridge.

Used to prove nothing silently assumes localhost: the target, the master and each worker
live in separate namespaces and reach each other only by their addresses. Needs root and
iproute2; tests skip (with the reason) when namespaces cannot be created.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

SUBNET = "10.213.{n}.{host}"  # addresses exist only inside the namespaces this helper creates


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def available() -> str | None:
    """None when namespaces work here, else the reason they don't."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    name = f"swp{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", name)
    except (subprocess.CalledProcessError, FileNotFoundError) as e:
        return f"ip netns unavailable: {getattr(e, 'stderr', e)}"
    _ip("netns", "del", name)
    return None


@dataclass
class Host:
    name: str  # namespace name
    address: str

    def cmd(self, argv: list[str]) -> list[str]:
        """argv run inside this host's namespace."""
        return ["ip", "netns", "exec", self.name, *argv]


@contextlib.contextmanager
def hosts(*names: str) -> Iterator[dict[str, Host]]:
    """Create one namespace per name on a shared bridge; remove them all on exit."""
    tag = secrets.token_hex(2)
    n = 100 + int(tag, 16) % 150
    bridge_ns = f"swbr{tag}"
    created: list[str] = []
    try:
        _ip("netns", "add", bridge_ns)
        created.append(bridge_ns)
        _ip("-n", bridge_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", bridge_ns, "link", "set", "br0", "up")
        out: dict[str, Host] = {}
        for i, name in enumerate(names, start=1):
            ns = f"sw{tag}{name}"[:15]
            _ip("netns", "add", ns)
            created.append(ns)
            host_if, br_if = f"v{tag}h{i}"[:15], f"v{tag}b{i}"[:15]
            _ip("link", "add", host_if, "type", "veth", "peer", "name", br_if)
            _ip("link", "set", host_if, "netns", ns)
            _ip("link", "set", br_if, "netns", bridge_ns)
            _ip("-n", bridge_ns, "link", "set", br_if, "master", "br0")
            _ip("-n", bridge_ns, "link", "set", br_if, "up")
            addr = SUBNET.format(n=n, host=10 + i)
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", host_if)
            _ip("-n", ns, "link", "set", host_if, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            out[name] = Host(ns, addr)
        yield out
    finally:
        for ns in reversed(created):
            with contextlib.suppress(subprocess.CalledProcessError):
                _ip("netns", "del", ns)
