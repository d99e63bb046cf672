"""Tests of eagle_audit/served/ (the served comparison), with the SGLang and vLLM test servers and their
fixtures (sglang_server.py, vllm_server.py, sglang_pieces.py, served_tiny.py, served_fixtures.py, http_serving.py)."""
