"""Unit tests of swarm.grafana."""
