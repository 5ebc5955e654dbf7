"""STAND-IN for NVIDIA's dcgm-exporter, for tests only (these machines have no GPU, and dcgm-exporter
needs one): serves /metrics in dcgm-exporter's documented text format, the series of its default
counters CSV (plus DCGM_FI_PROF_SM_ACTIVE with --sm-active, as a custom counters CSV adds it) with
its labels (`gpu`, `UUID`, `pci_bus_id`, `device`, `modelName`, `Hostname`,
`DCGM_FI_DRIVER_VERSION`).

    python -m tests.helpers.dcgm_standin --port 9400 --hostname gpu-a --util 95,95,2,95

Each GPU's utilisation is the given percentage moved by a small wobble per scrape (so series move);
power, temperature, SM activity and memory follow from it. Not a simulator of a real GPU.
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FB_TOTAL_MIB = 81559  # an H100 80GB HBM3's framebuffer as dcgm-exporter reports it (used + free)
MODEL = "NVIDIA H100 80GB HBM3"
HELP = {
    "DCGM_FI_DEV_GPU_TEMP": "GPU temperature (in C).",
    "DCGM_FI_DEV_POWER_USAGE": "Power draw (in W).",
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_DEV_FB_FREE": "Framebuffer memory free (in MiB).",
    "DCGM_FI_DEV_FB_USED": "Framebuffer memory used (in MiB).",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": "Ratio of time the graphics engine is active.",
    "DCGM_FI_PROF_SM_ACTIVE": "The ratio of cycles an SM has at least 1 warp assigned.",
}


def labels(hostname: str, i: int) -> str:
    return (
        f'gpu="{i}",UUID="GPU-5f6c3b1e-0000-4000-8000-{i:012d}",pci_bus_id="00000000:{0x18 + i:02X}:00.0",'
        f'device="nvidia{i}",modelName="{MODEL}",Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="570.133.20"'
    )


def exposition(hostname: str, utils: list[float], sm_active: bool, scrape: int) -> str:
    """The text one scrape returns."""
    values: dict[str, list[float]] = {name: [] for name in HELP}
    for i, u in enumerate(utils):
        wobble = 2.0 * math.sin(scrape * 0.7 + i)
        util = min(100.0, max(0.0, u + (wobble if 0 < u < 100 else 0.0)))
        used = 2000.0 + 0.7 * FB_TOTAL_MIB * (u / 100.0)
        values["DCGM_FI_DEV_GPU_TEMP"].append(round(32 + 0.4 * util))
        values["DCGM_FI_DEV_POWER_USAGE"].append(round(70 + 6.3 * util, 3))
        values["DCGM_FI_DEV_GPU_UTIL"].append(round(util))
        values["DCGM_FI_DEV_FB_FREE"].append(round(FB_TOTAL_MIB - used))
        values["DCGM_FI_DEV_FB_USED"].append(round(used))
        values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"].append(round(util / 100.0 * 0.97, 6))
        values["DCGM_FI_PROF_SM_ACTIVE"].append(round(util / 100.0 * 0.85, 6))
    lines = []
    for name, help_text in HELP.items():
        if name == "DCGM_FI_PROF_SM_ACTIVE" and not sm_active:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{{{labels(hostname, i)}}} {v:g}" for i, v in enumerate(values[name])]
    return "\n".join(lines) + "\n"


class DcgmStandin:
    """In-process: `DcgmStandin(...).port`, `.close()`. As a process: `python -m tests.helpers.dcgm_standin`."""

    def __init__(self, hostname: str, utils: list[float], sm_active: bool = False, port: int = 0) -> None:
        self.scrapes = 0
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                standin.scrapes += 1
                body = exposition(hostname, utils, sm_active, standin.scrapes).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> None:
    p = argparse.ArgumentParser(prog="dcgm_standin", description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--hostname", default="gpu-host")
    p.add_argument("--util", default="95", help="per-GPU utilisation %%, comma-separated (one GPU each)")
    p.add_argument("--sm-active", action="store_true", help="also serve DCGM_FI_PROF_SM_ACTIVE")
    a = p.parse_args()
    standin = DcgmStandin(a.hostname, [float(u) for u in a.util.split(",")], a.sm_active, a.port)
    print(f"dcgm stand-in serving {standin.url}", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
