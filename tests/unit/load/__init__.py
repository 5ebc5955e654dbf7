"""Unit tests of swarm.load."""
