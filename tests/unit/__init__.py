"""In-process tests, one package per swarm subpackage: they start no process."""
