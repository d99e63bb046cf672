"""SGLang: capture rules from ``sglang/srt/models/*.py``, the ids' source from ``spec_aux_hidden_state.py``.

SGLang registers an architecture by listing its class in the model file's ``EntryClass``; the
target's ``set_eagle3_layers_to_capture(ids)`` is called once at start-up with the ids the draft
config names (``model_executor/model_runner_components/spec_aux_hidden_state.py``,
``_resolve_eagle_aux_hidden_state``), or ``None``.
"""

from __future__ import annotations

import ast
import os

from .architectures import ArchitectureReader
from .ids_reader import read_id_places, read_ids_from
from .modules import ModuleIndex
from .results import ProbeResult, Site
from .source import BadSource, SourceTree, locate, parse_python

ENGINE = "sglang"
IDS_FILE = "spec_aux_hidden_state.py"
IDS_FUNCTION = "_resolve_eagle_aux_hidden_state"
AUX_FILE = "aux_hidden_states.py"
#: the packer's counters, as they appear in its message, and the placeholders a convention fills in
COUNTERS = {"_idx": "captured", "_num_captures": "expected"}


def read_count_error(path: str, text: str) -> tuple[str, str, Site] | None:
    """``AuxHiddenStatePacker.finalize``'s ``raise E(f"captured {self._idx} of {self._num_captures} ...")`` as
    (E, "captured {captured} of {expected} ...", site); None when the file does not have that shape."""
    try:
        tree = parse_python(text)
    except SyntaxError:
        return None
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == "AuxHiddenStatePacker"):
            continue
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "finalize"):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                        isinstance(node.exc.func, ast.Name) and node.exc.args and \
                        isinstance(node.exc.args[0], ast.JoinedStr):
                    parts = []
                    for v in node.exc.args[0].values:
                        if isinstance(v, ast.Constant):
                            parts.append(str(v.value).replace("{", "{{").replace("}", "}}"))
                        elif isinstance(v, ast.FormattedValue) and isinstance(v.value, ast.Attribute) \
                                and v.value.attr in COUNTERS:
                            parts.append("{" + COUNTERS[v.value.attr] + "}")
                        else:
                            return None
                    return node.exc.func.id, "".join(parts), Site(path, node.lineno, node.end_lineno)
    return None


def _literal_version(text: str) -> str | None:
    try:
        tree = parse_python(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            if any(isinstance(t, ast.Name) and t.id in ("__version__", "version") for t in node.targets):
                return node.value.value
    return None


def read_version(tree: SourceTree) -> str:
    """``__version__`` from ``sglang/version.py`` (or the ``_version.py`` it imports), else the
    distribution's version, else "unknown"."""
    for name in ("version.py", "_version.py"):
        text = tree.files.get(f"{tree.package}/{name}")
        found = _literal_version(text) if text else None
        if found:
            return found
    return tree.dist_version or "unknown"


def probe_sglang(source: str | os.PathLike | None = None) -> ProbeResult:
    """Probe SGLang's EAGLE-3 capture rules from ``source`` (a folder or a .whl) or the installed copy."""
    tree = locate(ENGINE, source, extra_names=(IDS_FILE, AUX_FILE))
    index = ModuleIndex({p: tree.files[p] for p in tree.model_files()})
    if not index.modules:
        raise BadSource(f"{tree.origin}: none of the files under {tree.models_dir()} could be parsed")
    archs = ArchitectureReader(index).read_all()
    ids, reads = None, None
    for path in tree.find(IDS_FILE):
        ids = read_ids_from(path, tree.files[path], IDS_FUNCTION)
        if ids:
            reads = read_id_places(path, tree.files[path], IDS_FUNCTION)
            if reads:
                ids = (tuple(r["place"] for r in reads[0]), ids[1])
            break
    count_error = None
    for path in tree.find(AUX_FILE):
        count_error = read_count_error(path, tree.files[path])
        if count_error:
            break
    return ProbeResult(engine=ENGINE, version=read_version(tree), origin=tree.origin,
                       ids_from=ids[0] if ids else None, ids_site=ids[1] if ids else None,
                       archs=tuple(archs), skipped=tuple(index.skipped), count_error=count_error,
                       id_reads=reads[0] if reads else None)
