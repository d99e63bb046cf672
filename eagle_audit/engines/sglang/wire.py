"""SGLang 0.5.23's HTTP API, as far as every client of it here needs (read in the ``sglang==0.5.23`` wheel)."""

NAME = "sglang"

# The short request sent before any long work, one the engine answers at once from its HTTP process without
# asking its scheduler: GET /model_info reads tokenizer_manager fields (srt/entrypoints/http_server.py:812;
# /health may run a generation when SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION is set, http_server.py:721, and
# /server_info asks every scheduler, :863). Any HTTP status counts as an answer (an API-key refusal too: that
# is reported by the reading itself).
PROBE_PATH = "/model_info"

# API key sources, in order, after an explicit key: SGLang's server reads only --api-key
# (srt/arg_groups/fields/serving.py:160), and SGLang's own benchmark client sends OPENAI_API_KEY
# (sglang/benchmark/serving.py:132).
KEY_ENV = ("OPENAI_API_KEY",)

# The keys the engine may default from the model's generation_config.json, sent explicitly (greedy, no
# penalties): /generate SamplingParams fields (srt/sampling/sampling_params.py:150), merged under
# --preferred-sampling-params (tokenizer_manager.py:1549).
NEUTRAL = {"temperature": 0.0, "top_p": 1.0, "top_k": -1, "min_p": 0.0, "frequency_penalty": 0.0,
           "presence_penalty": 0.0, "repetition_penalty": 1.0, "min_new_tokens": 0, "ignore_eos": False, "n": 1}

# The --speculative-algorithm values that draft a block a verify (DFlash, DSpark: ``srt/speculative/spec_info.py:39-43``
# SpeculativeAlgorithm; ``arg_groups/speculative_hook.py:287-441, 666-860`` force speculative_num_steps and
# speculative_eagle_topk to 1 for them and set speculative_num_draft_tokens to the verify window: DFlash the draft's
# block_size, DSpark gamma + 1); every other value drafts EAGLE-style chains or trees. /server_info reports the
# value as given (upper case).
BLOCK_ALGORITHMS = ("DFLASH", "DSPARK")

# The release the server runs: ``GET /server_info`` carries ``version`` (sglang.version.__version__:
# srt/entrypoints/http_server.py:863-889 in 0.5.23, :540-556 in 0.5.6); releases before /server_info (0.4.x)
# answer only ``GET /get_server_info`` with the same field (0.4.5 :208-215; kept, deprecated, in 0.5.x). SGLang
# serves no ``/version`` route.
VERSION_PATHS = ("/server_info", "/get_server_info")
VERSION_FIELD = "version"
