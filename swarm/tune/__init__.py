"""`swarm tune`: a server's configurations searched, one `swarm run` each (a grid, a list, guided
by the diagnosis, or predicted first by the twin). Its planning (plan.py), the servers it starts
(server.py), each configuration's run (run.py), the next flag to change (advice.py), its results and
tune.json (results.py), its report (report.py) and the command (command.py); the twin in twin/.
Starts servers and `swarm run` in processes through orchestrate/; never imports `live`.
"""
