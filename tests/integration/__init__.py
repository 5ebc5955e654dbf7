"""Tests that start real processes: the simulator, Locust masters and workers, prometheus, promtool, `swarm` commands."""
