# The real vLLM, once per session for every module that uses it (a module importing these itself
# would get its own session fixture: a second vLLM and a second report). Only tests/e2e uses them.
from tests.helpers.vllm_fixture import vllm_report_fixture, vllm_target_fixture  # noqa: F401
