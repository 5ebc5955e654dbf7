"""The target's address, resolved once where it cannot change.

geventhttpclient resolves its host again for every new connection, through gevent's resolver:
with the default thread-pool resolver that is a hand-off to a thread and back (a queue, a
condition, a wake-up) per connection. An open loop of thousands of users each sending every few
seconds opens a new connection for most requests (a server's keep-alive timeout, uvicorn's 5 s,
closes the idle ones), and in `benchmarks/streams_10k.py --open-loop --streams 5000` the
resolver's hand-off was 5.5% of the worker's samples and its thread's wake-ups another 5%
(py-spy). An IP literal's answer never changes: it is resolved once, with the C resolver and
AI_NUMERICHOST (no lookup, no thread), and the pool is given that answer. A hostname keeps being
resolved per connection, as before: its addresses may move (a Kubernetes Service, DNS round robin).
"""

from __future__ import annotations

import _socket
import ipaddress
from typing import Any


def pin_numeric_address(pool: Any) -> bool:
    """Give geventhttpclient's ConnectionPool `pool` its IP-literal host's address once and for all;
    False (the pool unchanged) for a hostname."""
    host = str(pool._connection_host).strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    family = _socket.AF_INET if pool.disable_ipv6 else _socket.AF_UNSPEC
    infos = _socket.getaddrinfo(
        host, pool._connection_port, family, _socket.SOCK_STREAM, _socket.SOL_TCP, _socket.AI_NUMERICHOST
    )
    pool._resolve = lambda: infos
    return True
