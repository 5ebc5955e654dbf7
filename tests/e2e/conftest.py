# The real vLLM and the real llama.cpp, once per session for every module that uses them (a module
# importing these itself would get its own session fixture: a second server and a second report).
# Only tests/e2e uses them.
from tests.helpers.llamacpp_fixture import llamacpp_report_fixture, llamacpp_target_fixture  # noqa: F401
from tests.helpers.vllm_fixture import vllm_report_fixture, vllm_target_fixture  # noqa: F401
