"""What traffic to send and when: workloads and their prompts, stage plans (--sweep, --rate),
open-loop arrival schedules. Pure; imports only `swarm.core`.
"""
