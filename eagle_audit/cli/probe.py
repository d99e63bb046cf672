"""`eagle-audit probe`: derive an engine's EAGLE-3 capture rules from its source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from ..probe import (DELEGATING_UNRESOLVED, PROBERS, SUPPORTED, UNRECOGNISED, UNSUPPORTED, ProbeResult, builtin_base,
                     probe_engine, to_convention, to_convention_data)
from ..probe.trainer import DELEGATING_TRAINERS, trainer_convention, trainer_convention_data
from ..terminal import print_table
from .edge import error_edge
from .safety import check_outputs
from .write import write_output


def probe(
    engine: Annotated[str, typer.Argument(
        help=f"Engine whose source to read: {', '.join(PROBERS)}; or a trainer that captures through an engine "
             f"({', '.join(f'{t.name}: {t.engine} {t.engine_version}' for t in DELEGATING_TRAINERS.values())}), "
             "whose rules are that engine's.", show_default=False)],
    source: Annotated[Optional[Path], typer.Option(
        "--source", help="A source folder (holding sglang/srt/models/*.py, or a repo with python/sglang) or a "
                         ".whl file. Default: the installed package, found without importing it.",
        show_default=False)] = None,
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Write the probed convention (eagle-audit/convention/1 JSON) to this file; '-' writes it "
                      "to stdout instead of the table.", show_default=False)] = None,
) -> None:
    """Read an engine's EAGLE-3 capture rules from its source (with ast; nothing is imported).

    For every registered architecture: the default capture ids, how explicit ids are shifted,
    which capture indices the forward can reach, and the file:line they were read from.
    Architectures without EAGLE-3 capture are listed after the table.

    Examples:

      eagle-audit probe sglang

      eagle-audit probe sglang --source sglang-0.5.23-cp311-cp311-manylinux.whl

      eagle-audit probe sglang --source ~/src/sglang --out sglang-probed.json

      eagle-audit layers ... --engine probes/sglang-probed.json

      eagle-audit probe specforge --source sglang-0.5.14-cp311-manylinux.whl
    """
    with error_edge():
        check_outputs({"source": source}, files={"--out": None if out is None else str(out)})
        trainer = DELEGATING_TRAINERS.get(engine)
        if trainer is not None:
            result = probe_engine(trainer.engine, source)
            data = trainer_convention_data(trainer, result)
            check = lambda: trainer_convention(trainer, result)  # noqa: E731
        else:
            result = probe_engine(engine, source)
            base = builtin_base(engine)
            data = to_convention_data(result, base)
            check = lambda: to_convention(result, base)  # noqa: E731
        if out is not None:
            check()  # the emitted file must load; raises BadConvention otherwise
            write_output(json.dumps(data, indent=2) + "\n", str(out), "the convention file", announce=True)
            if str(out) == "-":
                return
        render(result)


def render(result: ProbeResult, console: Console | None = None) -> None:
    """The table of capture rules, one row per architecture, then those without capture."""
    if console is None:
        console = Console()  # the terminal's width, 80 when piped (COLUMNS sets it): a table too wide becomes a list
    ids = ", ".join(_read_text(r) for r in result.id_reads) if result.id_reads else (
        ", ".join(result.ids_from) if result.ids_from else "not found")
    what = {"sglang-dflash": "DFlash", "sglang-dspark": "DSpark", "vllm-dflash": "DFlash / DSpark"}.get(result.name or "", "EAGLE-3")
    table = Table(title=f"{result.engine} {result.version}: {what} capture rules ({result.origin})",
                  title_justify="left", caption="ids: the draft's eagle_aux_hidden_state_layer_ids; "
                  "reachable: capture indices the forward can reach (boundary k = input of layer k)",
                  caption_justify="left")
    table.add_column("architecture", no_wrap=True)
    for col in ("default ids", "explicit ids", "reachable", "file:line"):
        table.add_column(col, overflow="fold")
    archs = sorted(result.archs, key=lambda a: a.arch.lower())
    for a in archs:
        if a.status == SUPPORTED:
            table.add_row(a.arch, a.rule.default_text(), a.rule.explicit_text(), a.rule.reach_text(), a.where())
    for a in archs:
        if a.status in (DELEGATING_UNRESOLVED, UNRECOGNISED):
            table.add_row(a.arch, f"[yellow]{a.status}[/]", a.reason, "", a.where())
    print_table(console, table)
    console.print(f"draft ids read from: {ids}"
                  + (f" ({result.ids_site.path}:{result.ids_site.line})" if result.ids_site else ""))
    unsupported = sorted(result.by_status(UNSUPPORTED), key=lambda a: a.arch.lower())
    if unsupported:
        names = ", ".join(a.arch for a in unsupported)
        console.print(f"\nWithout EAGLE-3 capture ({len(unsupported)}; start-up with EAGLE-3 fails or captures "
                      f"nothing): {names}", highlight=False)
    for s in result.skipped:
        console.print(f"[yellow]not parsed:[/] {s}")


def _read_text(read: dict) -> str:
    """``dflash_target_layer_ids +1 (empty: falls through)`` for one ids_from entry."""
    text = read["place"] + (f" {read['shift']:+d}" if read.get("shift") else "")
    if read.get("verbatim_model_types"):
        text += f" (verbatim for model_type {', '.join(read['verbatim_model_types'])})"
    return text + (" (empty: taken)" if read.get("empty") == "read" else "")
