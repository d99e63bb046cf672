"""Tests of eagle_audit/accept/ (accept-rate), with the tiny target and drafts, fake acceptance servers and
SGLang's tree and KV kernels they share (accept_tiny.py, block_tiny.py, fake_engines.py, wired_server.py,
sglang_tree.py, sglang_kv_kernels.py)."""
