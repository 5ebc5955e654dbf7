"""Unit tests of swarm.stats."""
