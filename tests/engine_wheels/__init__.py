"""The engines' own code executed from their wheels (SGLang, vLLM; full tier), held against eagle-audit's
resolution: the capture, draft classes and forwards (sglang_engine.py, vllm_engine.py, draft_classes_engine.py,
draft_forward_engine.py). The engine clients of eagle_audit/engines/ are tested in tests/engines/."""
