"""The `chat` workload: locust -f locustfiles/chat.py --host URL (--workload overrides it)."""

from swarm import LLMUser


class ChatUser(LLMUser):
    workload = "chat"
