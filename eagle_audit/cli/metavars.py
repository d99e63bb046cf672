"""What an option's value is called in ``--help`` (``PATH``, ``DIR``, ``N``...): short on purpose, since
``--help`` is designed for 80 columns (a wide type column squeezed every description)."""

from __future__ import annotations

#: what an option's value is called in --help, by parameter name; any other value is N (an integer), X (a number)
#: or TEXT. Short on purpose: --help is designed for 80 columns (a wide type column squeezed every description)
METAVARS = {"target": "PATH", "draft": "DIR", "engine": "NAME|FILE", "trainer": "NAME|FILE", "trained_boundaries": "LIST",
            "trained_ids": "LIST", "boundaries": "LIST", "fail_under_positions": "LIST", "prompts": "FILE",
            "json_out": "FILE", "report": "DIR", "write_fixed_config": "DIR", "out_dir": "DIR", "out": "FILE",
            "html": "FILE", "md": "FILE", "source": "PATH", "server": "URL",
            "states_server": "URL", "hidden_states_dir": "DIR", "server_kind": "KIND", "api_key": "TOKEN",
            "device": "DEVICE", "dtype": "DTYPE", "device_map": "auto"}
_BY_TYPE = {int: "N", float: "X"}


def short_metavars(command) -> None:
    """Give every option and argument of ``command`` its short metavar (:data:`METAVARS`), where none is set; a
    flag shows none (never ``<bool>``)."""
    for p in command.params:
        if getattr(p, "is_flag", False) or p.metavar is not None:
            continue
        if p.param_type_name == "argument":  # its name is its metavar (ENGINE, RESULTS...); no type beside it
            p.display_type_rich = lambda ctx=None: None
            continue
        kind = getattr(getattr(p, "type_descriptor", None), "annotation", str)
        p.metavar = METAVARS.get(p.name) or _BY_TYPE.get(kind, "TEXT")
