#!/usr/bin/env bash
# On the GPU machine (no network): rebuild the SmolLM2 GGUF from two carried halves (the device
# tool carries at most 64 MiB a call), install the carried gguf wheel, then run the real target on
# CUDA in bf16: the layers audit, accept-rate, and the GPU canary benchmark.
#   call 1:  mkdir -p /root/smol && cp .gpu/a/smolpart.aa /root/smol/        (carry .gpu/a)
#   call 2:  bash bench/evidence/gpu_smollm2.sh                                 (carry .gpu/b)
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
cat /root/smol/smolpart.aa .gpu/b/smolpart.ab > /root/smol/SmolLM2-135M-Instruct.Q4_1.gguf
echo "$(cat .gpu/b/sha)  /root/smol/SmolLM2-135M-Instruct.Q4_1.gguf" | sha256sum -c -
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/b/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 EAGLE_AUDIT_CACHE=/root/ea-cache
T=/root/smol/SmolLM2-135M-Instruct.Q4_1.gguf
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
set +e
python3 -m eagle_audit.cli.main layers --target $T --device cuda --json "$OUT/layers_cuda.json" > "$OUT/layers_cuda.txt" 2>&1
echo "layers exit $?"; tail -4 "$OUT/layers_cuda.txt"
python3 -m eagle_audit.cli.main layers --target $T --device cpu --json "$OUT/layers_cpu.json" > /dev/null 2>&1
echo "layers (cpu, float32) exit $?"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
g, c = (json.load(open(f"{out}/layers_{d}.json")) for d in ("cuda", "cpu"))
print("dtype", g["provenance"]["dtype"], "vs", c["provenance"]["dtype"])
print("verdict", g["verdict"], c["verdict"], "codes", [f["code"] for f in g["findings"]] == [f["code"] for f in c["findings"]])
print("slot cosines bf16 cuda", [round(s["cosine"], 4) for s in g["slots"]], "fp32 cpu", [round(s["cosine"], 4) for s in c["slots"]])
PY
if [ -f bench/evidence/canary_gpu.py ]; then
  timeout 560 python3 -m bench.evidence.canary_gpu --target $T --out "$OUT/canary_gpu.json" 2>&1 | tail -30
fi
