"""README.md documents every command, every option, every finding code and every exit code."""

from pathlib import Path

import typer.main

from eagle_audit.cli.main import app
from eagle_audit.result import CODES

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_readme_names_every_command_and_option():
    group = typer.main.get_command(app)
    missing = []
    for name, command in group.commands.items():
        if f"eagle-audit {name}" not in README:
            missing.append(f"eagle-audit {name}")
        for param in command.params:
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("--") and opt != "--help" and opt not in README:
                    missing.append(f"{name} {opt}")
    assert not missing, f"README.md does not mention: {missing}"


def test_readme_documents_every_finding_code():
    assert [c for c in CODES if f"`{c}`" not in README] == []


def test_readme_opens_with_the_two_setup_commands():
    first_block = README.split("```bash", 1)[1].split("```", 1)[0]
    assert "eagle-audit layers" in first_block and "pytest" in first_block
