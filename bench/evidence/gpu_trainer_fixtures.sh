#!/usr/bin/env bash
# On the GPU machine (no network), from a copy of the repository at /root/wt: the four trainer fixtures of
# bench/evidence/trainer_fixtures.py retrained as the H200 "more text" runs were (docs/fingerprint.md: 1,200 prompts
# = 167 hand-written + 1,033 composed, 1 greedy + 3 sampled responses of up to 256 tokens; speculators 0.9.0 6 epochs
# on its default ids and 4 on [4, 11, 24], eager attention; SpecForge 0.2.0 4 epochs, batch 16, sdpa), each judged by
# the search alone and by the fingerprint as a user runs it (search + second round + confirmation, issue 27).
#   call 1: mkdir -p /root/smol && cp .gpu/a/smolpart.aa /root/smol/                       (carry .gpu/a)
#   call 2: the GGUF rebuilt from .gpu/b, the wheels (gguf, pydantic + pydantic-core, annotated-types,
#           typing-inspection, typing-extensions: what the trainers import and the image lacks) installed into /tmp/site,
#           the wheels cache (.gpu/cache: speculators/ and specforge/ wheels) copied to /root/eatest, the code to
#           /root/wt, then `setsid nohup bash /root/wt/bench/evidence/gpu_trainer_fixtures.sh &` and a wait for
#           $O/DONE (carry .gpu/b, .gpu/whl, .gpu/cache, .gpu/wt); a later call waits for $O/DONE and copies $O/*.json
#           to $OUT. $O is not $OUT: there $OUT is /root/out, emptied at the start of every call (the first run of this
#           script wrote its logs there and lost them to the next call; its JSON records were written after).
#   Device time of that run: 788 s of the session's 1,800, the machine's start and the transfers included (the
#   job itself about 10 minutes: the text 2 (target load 34.5 s, generation 85.3 s), then the three processes
#   468-471 s each, side by side).
# The training text is generated once (--text-only into --text-cache), then three processes train at once (the two
# speculators wirings share one capture; each SpecForge wiring its own process), each draft judged in a child
# process while the next trains (--judge-async).
set -u
O=/root/run
mkdir -p $O /root/stash /root/fx
trap 'touch $O/DONE' EXIT
export PYTHONPATH=/root/wt:/tmp/site PYTHONUNBUFFERED=1 EAGLE_AUDIT_CACHE=/root/ea-cache \
  EAGLE_AUDIT_TEST_CACHE=/root/eatest EAGLE_AUDIT_BENCH_MACHINE=nvidia-h200 OMP_NUM_THREADS=4
cd /root/wt
T=/root/smol/SmolLM2-135M-Instruct.Q4_1.gguf
C=(--target $T --device cuda --train-prompts 167 --eval-prompts 40 --composed-prompts 1033 --samples 4 --max-new 256
   --eval-max-new 96 --lr 1e-3 --group 8 --gen-batch 600 --draft-vocab 4096 --attn eager --sf-lr 1e-3 --sf-attn sdpa
   --sf-batch 16 --sf-max-length 2048 --text-cache /root/stash/text.pt --sglang-wheel /root/wt/sglang-0.5.14-llama.zip
   --save /root/fx --more-prompts 8 --confirm-prompts 8 --judge-async
   --fixture-epochs speculators-default=6,speculators-4-11-24=4,specforge-5-12-21=4,specforge-default=4)
F=bench.evidence.trainer_fixtures
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"
python3 -m $F "${C[@]}" --wirings speculators-default,specforge-default --text-only --out $O/text.json > $O/text.log 2>&1
echo "text exit $?"; tail -3 $O/text.log
python3 -m $F "${C[@]}" --wirings speculators-default,speculators-4-11-24 --out $O/speculators.json > $O/speculators.log 2>&1 &
p1=$!
python3 -m $F "${C[@]}" --wirings specforge-5-12-21 --out $O/specforge-5-12-21.json > $O/specforge-5-12-21.log 2>&1 &
p2=$!
python3 -m $F "${C[@]}" --wirings specforge-default --out $O/specforge-default.json > $O/specforge-default.log 2>&1 &
p3=$!
wait $p1; echo "speculators exit $?"
wait $p2; echo "specforge-5-12-21 exit $?"
wait $p3; echo "specforge-default exit $?"
