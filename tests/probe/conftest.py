"""Fixtures for the probe tests live in tests/conftest.py (``sglang_wheel``, ``vllm_wheel``, ``wheel_probe``),
shared with tests/engine_wheels."""
