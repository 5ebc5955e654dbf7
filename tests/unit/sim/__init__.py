"""Unit tests of swarm.sim."""
