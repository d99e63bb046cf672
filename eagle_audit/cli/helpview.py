"""What ``--help`` shows: the options every run names, grouped under headings (inputs, engine and server,
budget, outputs), one short line each, at 80 columns; ``--help-all`` shows every option with its whole text, as
docs/cli.md does (generated from the same options, cli/docgen.py).

The grouping is data (:data:`PANELS`): an option's heading, and whether plain ``--help`` shows it. An option a
command has that no heading names is shown under "Other" by ``--help-all`` and counted by ``--help``.
"""

from __future__ import annotations

import re

#: heading -> the options under it, in order; ``*`` marks those plain --help shows (the rest: --help-all)
PANELS: dict[str, tuple[str, ...]] = {
    "Inputs": ("*target", "*draft", "*engine", "*trainer", "*trained_boundaries", "trained_ids", "*prompts",
               "*source"),
    "Engine and server": ("*server", "*states_server", "states_from", "hidden_states_dir", "server_kind", "api_key",
                          "server_timeout", "server_deadline", "builtin_rules"),
    "Budget": ("*max_prompts", "max_tokens", "*max_new_tokens", "num_steps", "topk", "num_draft_tokens", "ttt_steps",
               "more_prompts", "confirm_prompts", "gen_batch"),
    "Checks and gates": ("*static", "*fingerprint", "scan", "tolerance", "*fail_under", "fail_under_positions", "live"),
    "Outputs": ("*json_out", "*report", "*write_fixed_config", "*out", "*verbose"),
    "Machine": ("device", "dtype", "device_map", "threads"),
}
COLUMN = 26  # the flags' column, at most
HEADING = {name.lstrip("*"): heading for heading, names in PANELS.items() for name in names}
SHOWN = {name.lstrip("*") for names in PANELS.values() for name in names if name.startswith("*")}
#: plain --help's one line for each option it shows (the whole text: --help-all and docs/cli.md)
SHORT = {
    "target": "Target: an HF directory, a cached hub id or a .gguf (default: SmolLM2-135M-Instruct)",
    "draft": "Draft directory (default: the embedded demo draft)",
    "engine": "Engine whose rules apply: sglang, vllm, vllm-v1, trtllm, or a .json",
    "trainer": "Training pipeline: specforge, speculators, eagle, modelopt, trtllm, ... (default: from the "
               "draft's layout)",
    "trained_boundaries": "The trained states as boundaries, e.g. 0,3,31 (0: the embedding)",
    "prompts": "Prompts file: JSONL or one prompt a line (default: built-in)",
    "server": "A server serving this draft: its own accept length, the arbiter",
    "states_server": "A server handing out the target's states (docs/server.md)",
    "max_prompts": "Prompts to use",
    "max_new_tokens": "Greedy continuation length per prompt",
    "static": "Configs only: no weights loaded",
    "fingerprint": "Read the trained wiring off the draft's weights, always",
    "fail_under": "CI gate: exit 1 below this served accept length",
    "json_out": "Write the result as JSON to FILE ('-': stdout)",
    "report": "Write JSON, HTML and Markdown reports into DIR",
    "write_fixed_config": "Write a corrected copy of the draft into DIR",
    "verbose": "Print the whole evidence, not the summary",
    "source": "Read the engine from this wheel or source folder (default: installed)",
    "out": "Write the probed rules as JSON to FILE ('-': stdout)",
}


def short(name: str, text: str) -> str:
    """Plain --help's text for option ``name``: its :data:`SHORT` line (else its first sentence) and its default."""
    m = re.search(r"\[default: ([^;\]]*)", text)
    line = SHORT.get(name) or re.split(r"(?<=[.;])\s", text, maxsplit=1)[0].rstrip(".;")
    return line + (f" [default: {m.group(1)}]" if m else "")


def _text(command, full: bool, width: int) -> list[tuple[str, str]]:
    """The docstring's paragraphs for --help: the summary, the examples (each on its one line, a comment that
    would wrap left out) and the exit codes; the rest only with ``full``. ("text" or "code", paragraph)."""
    import inspect

    out = []
    for i, para in enumerate(inspect.cleandoc(command.help or "").split("\n\n")):
        body = para.strip()
        if body.startswith("eagle-audit "):
            line = body if len(body) + 4 <= width else body.split("  #")[0].rstrip()
            out.append(("code", line))
        elif full or i == 0 or body.startswith(("Examples:", "Exit codes:")):
            out.append(("text", " ".join(body.split())))
    return out


#: set for one run by the command group when ``--help-all`` was given (cli/group.py ``Group.main``)
FULL = {"on": False}


def asked_all(args: list[str]) -> list[str]:
    """``args`` with ``--help-all`` turned into ``--help``, :data:`FULL` set where it was there."""
    FULL["on"] = "--help-all" in args
    return [("--help" if a == "--help-all" else a) for a in args]


def install(command) -> None:
    """Give ``command`` (a click command) the grouped help; commands whose options no heading names keep click's
    own listing."""
    if not any(p.name in HEADING for p in command.params):
        return

    def format_options(ctx, formatter) -> None:
        full = FULL["on"]
        groups: dict[str, list[tuple[str, str]]] = {h: [] for h in (*PANELS, "Other")}
        hidden = []
        for p in command.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is None:
                continue
            if full or p.name in SHOWN or p.name == "help":
                flags, text = record
                groups["Other" if p.name == "help" else HEADING.get(p.name, "Other")].append(
                    (flags, text if full else short(p.name, text)))
            else:
                hidden.append(p)
        groups["Other"].append(("--help-all", "Show every option, with its whole text."))
        width = min(max(len(f) for rows in groups.values() for f, _ in rows), COLUMN)
        for heading, rows in groups.items():
            if rows:
                with formatter.section(heading):
                    formatter.write_dl([(f.ljust(width), h) for f, h in rows], col_max=COLUMN)
        if hidden:
            formatter.write_paragraph()
            where = ", ".join(dict.fromkeys(HEADING.get(p.name, "Other").lower() for p in hidden))
            formatter.write_text(f"{len(hidden)} more options ({where}): {ctx.command_path} --help-all, or "
                                 "docs/cli.md.")

    def format_help_text(ctx, formatter) -> None:
        before = None
        for kind, para in _text(command, FULL["on"], formatter.width):
            if not (kind == before == "code"):  # the examples: one block
                formatter.write_paragraph()
            before = kind
            if kind == "code":
                formatter.write(" " * (formatter.current_indent + 4) + para + "\n")
            else:
                with formatter.indentation():
                    formatter.write_text(para)

    command.format_options = format_options
    command.format_help_text = format_help_text
