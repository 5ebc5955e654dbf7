import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# the real vLLM, once per session for every module that uses it (a module importing these itself
# would get its own session fixture: a second vLLM and a second report)
from vllm_fixture import vllm_report_fixture, vllm_target_fixture  # noqa: F401
