"""`eagle-audit launch`: the engines' launch lines for a target and a draft (eagle_audit/engines/lines.py)."""

from __future__ import annotations

import shlex
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from ..engines.lines import LINE_ENGINES, LaunchLines, launch_lines
from ..layers.launch_warning import launch_warning
from .console import out
from .defaults import default_inputs
from .edge import error_edge
from .safety import audit_inputs, check_outputs
from .write import write_json
from .options import Draft, JsonOut, NumSteps, Target

ROLES = (("speculative", "serving the draft (speculative decoding): accept-rate --server URL"),
         ("serving", "capture-only, what serving feeds this draft: layers --server URL"),
         ("reference", "capture-only, every boundary the engine reaches: layers / fingerprint --server URL"))


def launch(
    target: Target = None,
    draft: Draft = None,
    engines: Annotated[str, typer.Option(
        "--engines", help=f"Comma-separated engine conventions to print the lines of: {', '.join(LINE_ENGINES)} "
                          "(vllm: the V2 model runner; vllm-v1: the V1 runner, which vLLM's CPU build runs).")] =
        ",".join(LINE_ENGINES),
    storage: Annotated[str, typer.Option(
        "--storage", help="vLLM capture lines: the server's shared_storage_path, where the connector writes the "
                          "states (give the same folder, as this machine sees it, to --hidden-states-dir).")] = "DIR",
    num_steps: NumSteps = 3,
    json_out: JsonOut = None,
) -> None:
    """Print the launch lines of SGLang 0.5.23 and vLLM 0.33.0 for the target and the draft: the line that
    serves the draft (for accept-rate --server), and the capture-only lines (serving: what serving feeds the
    draft; reference: every boundary) that layers --server reads.

    Examples:

      eagle-audit launch                                         # SmolLM2 + the demo draft

      eagle-audit launch -d ./my-eagle3 --engines vllm --storage /srv/hs

      eagle-audit launch -t ./Llama-3.1-8B -d ./my-eagle3 --json lines.json
    """
    with error_edge():
        given = " ".join(f"{flag} {shlex.quote(str(v))}" for flag, v in (("-t", target), ("-d", draft)) if v is not None)
        target, draft = default_inputs(target, draft)
        check_outputs(audit_inputs(target, draft), files={"--json": json_out})
        names = tuple(e.strip() for e in engines.split(",") if e.strip())
        result = launch_lines(target, draft, names, storage, num_steps)
        warnings = {e.engine: launch_warning(str(target), str(draft), e.engine, given) for e in result.engines}
        if json_out != "-":
            render_lines(result, out, warnings)
        if json_out:
            data = result.to_json()
            for e in data["engines"]:
                e["warning"] = warnings.get(e["engine"])
            write_json(data, json_out)


def render_lines(result: LaunchLines, console: Console, warnings: dict[str, str | None] | None = None) -> None:
    """The lines per engine; ``warnings``: engine -> the one line saying `layers` finds the draft mis-wired there."""
    console.print(Text.assemble(("target", "bold"), f" {result.target}"), highlight=False)
    console.print(Text.assemble(("draft", "bold"), f"  {result.draft}"), highlight=False)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, markup=False, style="dim", soft_wrap=True)
    for e in result.engines:
        console.print()
        console.print(Text(f"{e.title} ({e.engine})", style="bold"), highlight=False)
        if (warnings or {}).get(e.engine):
            console.print(f"warning: {warnings[e.engine]}", highlight=False, markup=False, style="yellow",
                          soft_wrap=True)
        for role, what in ROLES:
            launch = getattr(e, role)
            cap = launch.capture
            states = f"; captures {', '.join(s.label() for s in cap.states)}" if cap is not None else ""
            console.print(f"  {role}: {what}{states}", highlight=False, markup=False, soft_wrap=True)
            if launch.argv:
                console.print(f"    {launch.line}", highlight=False, markup=False, soft_wrap=True)
            for note in launch.notes:
                console.print(f"    note: {note}", highlight=False, markup=False, style="dim", soft_wrap=True)
