"""`eagle-audit train-canary`: train a small EAGLE-3 draft on a known wiring, to test an engine with."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from ..errors import EXIT_OK, param
from ..outputs import check_canary_out
from .console import err, out
from .defaults import use_threads
from .edge import error_edge
from .pending import PENDING, wrote
from .safety import audit_inputs, check_outputs
from .write import write_json
from .options import JsonOut, Prompts, Target, Threads, in_range


def train_inputs(target: str | None, prompts: str | None) -> dict[str, str]:
    """What train-canary reads: the target (the default one too), the prompts, the cache."""
    if target is None:
        from ..target import default_target

        target = default_target()
    return audit_inputs(target, None, prompts)


def train_canary(
    boundaries: Annotated[str, typer.Option("--boundaries", help="Boundaries to train on, e.g. '0,3,16' (0 = embedding output, k = output of layer k-1).")],
    out_dir: Annotated[str, typer.Option("--out", help="Directory to write the draft into (SGLang layout).")],
    target: Target = None,
    prompts: Prompts = None,
    max_prompts: Annotated[Optional[int], typer.Option("--max-prompts", help="Use at most this many prompts (default: all).", min=1)] = None,
    epochs: Annotated[int, typer.Option("--epochs", help="Passes over the generated text.", min=1, max=100_000)] = 30,
    ttt_steps: Annotated[int, typer.Option("--ttt-steps", help="Training-time-test steps unrolled per position.", min=1, max=64)] = 3,
    draft_vocab: Annotated[int, typer.Option("--draft-vocab", help="Draft vocabulary: the most frequent target tokens of the text.", min=16, max=10_000_000)] = 4096,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", help="Greedy continuation length per prompt.", min=2, max=1_000_000)] = 256,
    lr: Annotated[float, typer.Option("--lr", help="AdamW learning rate (warm-up then cosine); finite, in (0, 10].", callback=in_range(0, 10, lo_open=True))] = 2e-3,
    seed: Annotated[int, typer.Option("--seed", help="Seed for initialisation and batch order (0 to 2**63 - 1).", callback=in_range(0, 2**63 - 1))] = 0,
    threads: Threads = None,
    device: Annotated[str, typer.Option("--device", help="Where the target generates and the draft trains: cpu or cuda[:i].")] = "cpu",
    dtype: Annotated[str, typer.Option("--dtype", help="Training precision: float32, or bfloat16 (bf16 autocast on CUDA, float32 master weights).")] = "float32",
    json_out: JsonOut = None,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty --out directory that holds no canary "
                                        "of eagle-audit's (never into an input, nor over a model or draft checkpoint).")] = False,
) -> None:
    """Train a one-layer EAGLE-3 canary draft on text the target generates itself.

    The trained boundaries go into the config as nested eagle_config ids under SGLang's +1 rule, and
    the true training wiring under "eagle_audit_canary".

    Examples:

      eagle-audit train-canary --boundaries 0,3,16 --out ./canary

      eagle-audit train-canary -t ./Llama-3.2-1B --boundaries 2,8,13 --out c

    --out must be new, empty, or a canary an earlier train-canary wrote (it holds a .eagle-audit-canary
    file); --force allows another non-empty directory. Inputs and model checkpoints are never overwritten.
    """
    with error_edge():
        check_canary_out(out_dir, train_inputs(target, prompts), "--out", force=force, force_label="--force")
        PENDING[str(out_dir)] = "--out"
        check_outputs(train_inputs(target, prompts), files={"--json": json_out})
        use_threads(threads)
        from ..accept.canary import CanaryOptions, train_canary as train
        from ..prompts import encode, load_prompts
        from ..states import parse_states
        from ..errors import AuditError
        from ..source import SourceRequest, open_source
        from ..target import default_target

        if dtype not in ("float32", "bfloat16"):
            raise AuditError(f"--dtype: {dtype!r} is not float32 or bfloat16")
        source = open_source(SourceRequest(target or default_target(), device=device),
                             lambda m: err.print(f"[dim]{m}[/]"))
        tgt = source.weights()  # the canary copies a target layer and the final norm: a source with weights
        states = parse_states(boundaries, tgt.info.num_layers, param("boundaries"))
        if any(s.normed for s in states):
            raise AuditError("--boundaries: a canary trains on residual boundaries only (no post-norm state)")
        ids = encode(load_prompts(prompts, max_prompts), tgt.tokenizer)
        opts = CanaryOptions(boundaries=tuple(s.boundary for s in states), views=tuple(s.stream for s in states),
                             ttt_steps=ttt_steps, epochs=epochs, lr=lr,
                             draft_vocab=draft_vocab, max_new_tokens=max_new_tokens, seed=seed, device=device,
                             dtype=dtype)
        result = train(tgt, ids, opts, out_dir, log=lambda m: err.print(f"[dim]{m}[/]"))
        wrote(out_dir)
        if json_out != "-":
            out.print(f"wrote canary {result.out_dir}: boundaries {list(result.boundaries)}, {result.sequences} "
                      f"sequences / {result.tokens} tokens, draft vocab {result.draft_vocab}, "
                      f"train {result.train_seconds:.0f}s, loss {result.final_loss:.3f}, "
                      f"step-0 accuracy {result.first_token_accuracy:.3f}", highlight=False)
        if json_out:
            write_json(result.to_json(), json_out)
    raise typer.Exit(EXIT_OK)
