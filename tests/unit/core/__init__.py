"""Unit tests of swarm.core."""
