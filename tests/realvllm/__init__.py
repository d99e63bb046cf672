"""The real-engine tier (full tier): a real vLLM server in its own venv (harness.py), the drafts it serves
(layouts.py)."""
