"""SGLang 0.5.23's own pure-Python pieces for served hidden states, run from the wheel (tests/wheels.py).

* the server's argument parser: every field namespace of ``srt/arg_groups/fields/*.py`` imported by its real
  module name (:func:`wheels.wheel_modules`), registered by the wheel's ``add_cli_args_from_dataclass``
  (``arg_utils.py:298``) exactly as ``ServerArgs.add_cli_args`` does (``server_args.py:351-353``); the few flags
  that method adds by hand (``--sampling-backend``, ``--reasoning-parser``, ``--tool-call-parser``,
  ``--kv-canary-real-data``, ``--config`` and deprecated spellings, ``server_args.py:355-443``) are not
  registered, nor is the ``Lora`` namespace (``fields/lora.py`` imports ``lora_registry``, which needs the
  ``sglang.srt.utils`` package ``__init__``): no launch line of ours uses them, so a line that did would be
  refused here. ``srt/utils/common.py``
  (which imports orjson, PIL, triton at its top) stands in as a module whose names are compiled one by one
  out of the same file (``human_readable_int``, ``json_list_type``, ``nullable_str``...);
* the capture-only validation ``handle_aux_hidden_state_capture`` (``validation_hook.py:697-753``, with
  ``resolving_view`` as the identity and ``declare_resolution`` recording what it declares) and the range
  check ``_check_capture_layer_ids_in_range`` (``spec_aux_hidden_state.py:113-129``);
* ``_append_prefill_hidden_states`` / ``_append_decode_hidden_states``
  (``scheduler_components/batch_result_processor.py:641-700``), ``_GenerationStreamAccumulator.accept``
  (``scheduler_components/output_streamer.py:444-700``, the cut at ``finished_len``) and
  ``Req.output_ids_through_stop`` (``schedule_batch.py:1508-1513``), ``pack_aux_hidden_states``
  (``layers/aux_hidden_states.py:97-102``), and each architecture's setter and capture loop
  (tests/engine_wheels/sglang_engine.py).

* the logprob path (``return_logprob``, ``logprob_start_len``, ``top_logprobs_num``): ``get_top_logprobs_raw``
  (``layers/logprob_processor.py:98-130``) on the tiny model's log-softmax; the scheduler's
  ``SchedulerLogprobResultProcessor.add_logprob_return_values`` / ``add_input_logprob_return_values`` and the
  helpers they call (``managers/scheduler_components/logprob_result_processor.py:25-420``: the leading ``None``,
  the popped last position); the accumulator's logprob lists (``output_streamer.py:566-655``, the same
  ``accept``); ``TokenizerManager.convert_logprob_style`` / ``add_logprob_to_meta_info`` /
  ``detokenize_*`` (``managers/tokenizer_manager.py:2840-3136``), which write ``meta_info``; and
  ``Req._compute_max_prefix_len`` (``schedule_batch.py:1766-1785``), the radix-cache cap a logprob request
  sets. Not run: the logits processor that picks the logprob rows (``layers/logits_processor.py:724-850``, it
  needs a ForwardBatch on the device): every position of the forward is passed, as it picks with
  ``logprob_start_len`` 0.

What cannot run, cited instead: the scheduler's decision to store a chunk's states,
``should_commit_output = ... and req.inflight_middle_chunks <= 0`` inside ``process_batch_result_prefill``
(``batch_result_processor.py:305-309``, passed as ``store=`` at ``:333-341``; the chunk is counted in flight at
``scheduler.py:4329-4330``), is a few lines of a 300-line method that drives the whole batch: the test server
passes ``store`` by that rule; the finish at ``max_new_tokens`` (``schedule_batch.py:2037-2042``) sets
``finished_len = max_new_tokens``; the HTTP layer serialises ``meta_info`` with orjson
(``entrypoints/http_server.py:569``), here ``json.dumps`` (the same shortest round-trip float text).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import types
import typing
from functools import lru_cache
from pathlib import Path

import torch

from tests.wheels import WheelSource, extract, wheel_modules

ARG_FIELDS = {  # module -> namespace classes, as server_args.py:138-183 imports them
    "device": ("Device",), "disagg": ("Disagg",),
    "exec_": ("ExecComm", "ExecDeterministic", "ExecDllm", "ExecFeatures", "ExecGraph", "ExecKernel", "ExecMamba",
              "ExecMoe", "ExecOffload", "ExecOverlap"),
    "memory": ("Memory",), "mm": ("Mm",), "model": ("Model",), "observability": ("Observability",),
    "parallel": ("Parallel",), "schedule": ("Schedule",), "serving": ("Serving",), "spec": ("Spec",),
}
COMMON = "sglang/srt/utils/common.py"
BRP = "sglang/srt/managers/scheduler_components/batch_result_processor.py"
LOGPROB_RP = "sglang/srt/managers/scheduler_components/logprob_result_processor.py"
TOKENIZER_MANAGER = "sglang/srt/managers/tokenizer_manager.py"
STREAMER = "sglang/srt/managers/scheduler_components/output_streamer.py"


def _compiled_module(src: WheelSource, modname: str, path: str) -> types.ModuleType:
    """A module whose attributes are compiled out of ``path`` on first use: functions by name, simple
    top-level assignments by value."""
    mod = types.ModuleType(modname)
    assigns = {n.targets[0].id: n for n in src.tree(path).body
               if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}

    def getattr_(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            value = src.function(path, name, {"os": os, "json": json, "typing": typing})
        except LookupError:
            if name not in assigns:
                raise AttributeError(name) from None
            ns: dict = {}
            exec(compile(ast.Module([assigns[name]], []), path, "exec"), ns)
            value = ns[name]
        setattr(mod, name, value)
        return value

    mod.__getattr__ = getattr_
    return mod


class SGLangPieces:
    def __init__(self, wheel: Path, root: Path):
        self.src = WheelSource(wheel)
        self.root = extract(wheel, root, "sglang/")
        self.version = Path(wheel).name.split("-")[1]  # the release /server_info reports
        self._parser = None  # built on first use (needs msgspec, as SGLang does)

    # ------------------------------------------------------------------ arguments

    def _build_parser(self) -> argparse.ArgumentParser:
        """Built while the wheel's modules are importable (``get_type_hints`` resolves the fields'
        annotations in their modules)."""
        stubs = {"sglang.srt.utils.common": _compiled_module(self.src, "sglang.srt.utils.common", COMMON)}
        parser = argparse.ArgumentParser(prog="sglang serve", exit_on_error=False)
        with wheel_modules(self.root, "sglang", stubs) as load:
            arg_utils = load("sglang.srt.arg_groups.arg_utils")
            for mod, names in ARG_FIELDS.items():
                m = load(f"sglang.srt.arg_groups.fields.{mod}")
                for n in names:
                    arg_utils.add_cli_args_from_dataclass(parser, getattr(m, n))
        return parser

    def parse(self, argv: list[str]) -> argparse.Namespace:
        """The wheel's parser on ``argv`` (after ``python -m sglang.launch_server``); argparse's refusal is
        raised as ``SystemExit`` / ``ArgumentError`` as the server would exit."""
        if self._parser is None:
            self._parser = self._build_parser()
        with contextlib.redirect_stderr(open(os.devnull, "w")):
            ns, extra = self._parser.parse_known_args(argv)
        if extra:
            raise SystemExit(f"unrecognized arguments: {' '.join(extra)}")
        return ns

    def validate_capture(self, ns: argparse.Namespace, num_layers: int) -> dict:
        """``handle_aux_hidden_state_capture`` then ``_check_capture_layer_ids_in_range`` on the parsed
        arguments; what the first declares (``speculative_algorithm`` None, ``aux_hidden_state_capture``)."""
        declared: dict = {}
        fn = self.src.function("sglang/srt/arg_groups/validation_hook.py", "handle_aux_hidden_state_capture", {
            "resolving_view": lambda a: a, "Any": typing.Any,
            "_AUX_HIDDEN_STATE_CAPTURE_METHODS": ("EAGLE3", "DFLASH", "DSPARK"),
            "declare_resolution": lambda args, name, **kw: declared.update(kw)})
        fn(ns)
        ids = ns.return_aux_hidden_state_layer_ids
        if ns.enable_return_aux_hidden_states and ids is not None:
            check = self.src.function("sglang/srt/model_executor/model_runner_components/spec_aux_hidden_state.py",
                                      "_check_capture_layer_ids_in_range", {})
            check(ids, types.SimpleNamespace(hf_text_config=types.SimpleNamespace(num_hidden_layers=num_layers)))
        return declared

    # ------------------------------------------------------------------ the reply path

    @lru_cache(maxsize=None)
    def append_prefill(self):
        return self.src.function(BRP, "SchedulerBatchResultProcessor._append_prefill_hidden_states", {})

    @lru_cache(maxsize=None)
    def append_decode(self):
        return self.src.function(BRP, "SchedulerBatchResultProcessor._append_decode_hidden_states", {})

    @lru_cache(maxsize=None)
    def accumulator(self):
        ns = {"pack_beam_search_output": None, "compute_weight_version_spans": lambda *a, **k: None,
              "_scheduler_decode_latency": lambda ts: None,
              "DisaggregationMode": types.SimpleNamespace(DECODE="decode")}
        return self.src.cls(STREAMER, "_GenerationStreamAccumulator", ("__post_init__", "_beam_admits", "accept"),
                            (object,), ns)

    # ------------------------------------------------------------------ the logprob path

    @lru_cache(maxsize=None)
    def top_logprobs(self):
        """``(get_top_logprobs_raw, LogprobStage)``."""
        import enum

        ns = self.src.definitions("sglang/srt/layers/logprob_processor.py", ("LogprobStage", "get_top_logprobs_raw"),
                                  {"Enum": enum.Enum, "auto": enum.auto, "torch": torch, "List": typing.List,
                                   "Optional": typing.Optional})
        return ns["get_top_logprobs_raw"], ns["LogprobStage"]

    @lru_cache(maxsize=None)
    def logprob_processor(self):
        methods = ("_process_input_token_logprobs", "_process_input_top_logprobs", "_process_input_token_ids_logprobs",
                   "_calculate_relevant_tokens_len", "_scoring_positions", "_uses_scoring_positions",
                   "add_input_logprob_return_values", "add_logprob_return_values",
                   "_initialize_empty_logprob_containers")
        return self.src.cls(LOGPROB_RP, "SchedulerLogprobResultProcessor", methods, (object,),
                            {"torch": torch, "MIS_DELIMITER_TOKEN_ID": None})

    @lru_cache(maxsize=None)
    def tokenizer_logprobs(self):
        methods = ("convert_logprob_style", "add_logprob_to_meta_info", "detokenize_logprob_tokens",
                   "detokenize_top_logprobs_tokens")
        return self.src.cls(TOKENIZER_MANAGER, "TokenizerManager", methods, (object,), {})

    @lru_cache(maxsize=None)
    def max_prefix_len(self):
        return self.src.function("sglang/srt/managers/schedule_batch.py", "Req._compute_max_prefix_len", {})

    @lru_cache(maxsize=None)
    def through_stop(self):
        return self.src.function("sglang/srt/managers/schedule_batch.py", "Req.output_ids_through_stop", {})

    @lru_cache(maxsize=None)
    def pack(self):
        aux = self.src.module("sglang/srt/layers/aux_hidden_states.py", {
            "torch": torch, "TYPE_CHECKING": False, "Iterable": typing.Iterable, "List": typing.List,
            "Optional": typing.Optional, "Union": typing.Union})
        return aux["pack_aux_hidden_states"]
