"""`swarm twin`: a digital twin of a server, the simulator's engine fitted to a measured run
(fit.py from the run's evidence, evidence.py; written and read as a profile, profile.py; checked
against the run on the virtual clock, calibrate.py) and configurations predicted on its virtual
clock (predict.py), each a tune configuration. Inside tune/ because its predictions are a tune's:
it reads and writes tune's plan, results and report, and `swarm tune --predict-first` uses it. It
imports nothing else of tune/ (its command, runs and servers), and starts no process.
"""
