"""Prompt sets that ship with the swarm (data files; see swarm/load/workloads.py and make_corpus.py)."""
