"""Unit tests of swarm.live."""
