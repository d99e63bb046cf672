"""SGLang: capture rules from ``sglang/srt/models/*.py``, the ids' source from ``spec_aux_hidden_state.py``.

SGLang registers an architecture by listing its class in the model file's ``EntryClass``; the
target's ``set_eagle3_layers_to_capture(ids)`` is called once at start-up with the ids the draft
config names (``model_executor/model_runner_components/spec_aux_hidden_state.py``,
``_resolve_eagle_aux_hidden_state``), or ``None``.

Older layouts, read the same way:

* 0.4.9-0.5.15: the ids are read in ``model_executor/model_runner.py`` (the function that reads
  ``eagle_aux_hidden_state_layer_ids``: ``ModelRunner.initialize`` / ``__init__``);
* 0.4.4.post2-0.4.8: no reader; the setter takes no ids (``set_eagle3_layers_to_capture(self)``) and is called
  without any (``model_runner.py``): ``ids_from`` is empty, the default always applies;
* 0.4.4.post2-0.5.10: ``cuda_graph_runner.py`` (and some ``model_runner.py`` paths) call the setter again
  without ids; every such call is listed in ``notes`` with its line (what it does to CUDA-graph batches is not
  modelled).
"""

from __future__ import annotations

import ast
import os
import textwrap

from .architectures import ArchitectureReader
from .ids_reader import read_id_places, read_ids_from
from .modules import ModuleIndex
from .results import ProbeResult, Site
from .source import BadSource, SourceTree, locate, parse_python

ENGINE = "sglang"
IDS_FILE = "spec_aux_hidden_state.py"
IDS_FUNCTION = "_resolve_eagle_aux_hidden_state"
RUNNER_FILES = ("model_runner.py", "cuda_graph_runner.py")  # the ids reader and the setter's callers before 0.5.16
AUX_FILE = "aux_hidden_states.py"
ATTENTION_SETUP = "attention_backend_setup.py"  # 0.5.16 on: hands the ids to the setter
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


def _reader_function(text: str) -> tuple[str, str] | None:
    """(name, text) of the innermost function of a file that reads ``eagle_aux_hidden_state_layer_ids`` (as a
    string key); the text holds that function alone, dedented, on its own line numbers (``ModelRunner.__init__``
    is not the file's first ``__init__``)."""
    try:
        tree = parse_python(text)
    except SyntaxError:
        return None
    fns = sorted((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))),
                 key=lambda n: n.lineno)
    for fn in reversed(fns):  # the innermost function holding the read
        if any(isinstance(c, ast.Constant) and c.value == "eagle_aux_hidden_state_layer_ids" for c in ast.walk(fn)):
            start = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
            body = "\n".join(text.splitlines()[start - 1:fn.end_lineno])
            return fn.name, "\n" * (start - 1) + textwrap.dedent(body) + "\n"
    return None


def setter_calls(tree: SourceTree) -> tuple[list[Site], list[Site]]:
    """(calls handing ids, calls without ids) of ``set_eagle3_layers_to_capture`` in the model runner files."""
    with_ids, bare = [], []
    for path in sorted(p for name in RUNNER_FILES + (ATTENTION_SETUP,) for p in tree.find(name)):
        try:
            module = parse_python(tree.files[path])
        except SyntaxError:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr == "set_eagle3_layers_to_capture":
                (with_ids if node.args or node.keywords else bare).append(Site(path, node.lineno))
    order = {name: i for i, name in enumerate(RUNNER_FILES + (ATTENTION_SETUP,))}  # model_runner.py first
    key = lambda s: (order.get(s.file, 9), s.path, s.line)  # noqa: E731
    return sorted(with_ids, key=key), sorted(bare, key=key)


def read_ids(tree: SourceTree) -> tuple[tuple | None, tuple | None, list[str]]:
    """(ids_from with its site, the id reads with their site, notes): the reader of whichever layout the source
    has; ids_from ``()`` when the engine never hands the setter any ids."""
    notes: list[str] = []
    candidates = [(p, IDS_FUNCTION, tree.files[p]) for p in tree.find(IDS_FILE)]
    candidates += [(p, *found) for p in tree.find(RUNNER_FILES[0]) if (found := _reader_function(tree.files[p]))]
    for path, function, text in candidates:
        ids = read_ids_from(path, text, function)
        if ids:
            reads = read_id_places(path, text, function)
            if reads:
                ids = (tuple(r["place"] for r in reads[0]), ids[1])
            return ids, reads, notes
    with_ids, bare = setter_calls(tree)
    if bare and not with_ids:
        notes.append(f"ids_from is empty: the engine calls set_eagle3_layers_to_capture() without ids "
                     f"({', '.join(s.short() for s in bare)}) and reads no eagle_aux_hidden_state_layer_ids: a "
                     "draft's ids are never read, the default always applies.")
        return ((), bare[0]), None, notes
    return None, None, notes


ONE_LAYER = "EAGLE3 currently only supports 1 layer"
NO_AUX_WHAT = "no aux capture; the draft is fed the target's post-norm final state"


def read_no_aux(tree: SourceTree, reader: Site | None) -> dict | None:
    """``eagle_config.get("use_aux_hidden_state", True)`` in the ids reader's file (0.5.8 on): the convention's
    ``no_aux``, citing that line; None where the release does not read the flag (capture is always on)."""
    if reader is None:
        return None
    try:
        module = parse_python(tree.files[reader.path])
    except (SyntaxError, KeyError):
        return None
    for node in ast.walk(module):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and \
                node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == "use_aux_hidden_state":
            return {"what": NO_AUX_WHAT,
                    "source": f"sglang=={read_version(tree)}: {reader.file}:{node.lineno} (eagle_config.get("
                              "'use_aux_hidden_state', True): false turns capture off, so the target's final, "
                              "post-norm state is fed; post-norm as read in 0.5.23's model forwards)"}
    return None


def draft_class_facts(tree: SourceTree, index: ModuleIndex) -> tuple[list[str], list[str]]:
    """(the EntryClass names of the EAGLE-3 draft files ``*eagle3*.py``, a note per file with its lines): which
    draft classes the release serves, and whether it refuses a draft of more than one layer."""
    archs, notes = [], []
    for module, _expr, cls in index.entry_classes():
        path = index.module_path(module)
        if "eagle3" not in path.rsplit("/", 1)[-1] or cls is None:
            continue
        archs.append(cls.name)
        text = tree.files.get(path, "")
        entry = next((i for i, line in enumerate(text.splitlines(), 1) if line.startswith("EntryClass")), None)
        one = next((i for i, line in enumerate(text.splitlines(), 1) if ONE_LAYER in line), None)
        refusal = (f"; a draft whose num_hidden_layers != 1 is refused: ValueError('{ONE_LAYER}') at start-up "
                   f"({path.rsplit('/', 1)[-1]}:{one}; not modelled by the convention)") if one else \
            "; drafts of several layers are accepted"
        notes.append(f"draft class {cls.name}: {path.rsplit('/', 1)[-1]}:{entry} EntryClass{refusal}.")
    return archs, notes


def probe_sglang(source: str | os.PathLike | None = None) -> ProbeResult:
    """Probe SGLang's EAGLE-3 capture rules from ``source`` (a folder or a .whl) or the installed copy."""
    tree = locate(ENGINE, source, extra_names=(IDS_FILE, AUX_FILE, ATTENTION_SETUP) + RUNNER_FILES)
    index = ModuleIndex({p: tree.files[p] for p in tree.model_files()})
    if not index.modules:
        raise BadSource(f"{tree.origin}: none of the files under {tree.models_dir()} could be parsed")
    archs = ArchitectureReader(index).read_all()
    ids, reads, notes = read_ids(tree)
    with_ids, bare = setter_calls(tree)
    if ids is None:
        searched = ", ".join(tree.find(IDS_FILE) + tree.find(RUNNER_FILES[0])) or f"no {IDS_FILE} or {RUNNER_FILES[0]}"
        notes.append(f"sglang {read_version(tree)}: the draft-ids reader was not found (searched {searched}).")
    elif ids[0] and bare:
        notes.append(f"set_eagle3_layers_to_capture() is also called without ids at {', '.join(s.short() for s in bare)} "
                     f"(the draft's ids are handed over at {', '.join(s.short() for s in with_ids)}): a call without "
                     "ids stores the default; batches captured into CUDA graphs by such a call capture the default "
                     "ids. Not modelled: the rules below are those of the eager forward.")
    extra: dict = {}
    no_aux = read_no_aux(tree, ids[1] if ids else None)
    if no_aux is not None:
        extra["no_aux"] = no_aux
    elif ids and ids[0]:
        notes.append(f"use_aux_hidden_state is not read ({ids[1].file}): capture is on for every EAGLE-3 draft.")
    draft_archs, draft_notes = draft_class_facts(tree, index)
    extra.update({"notes": notes + draft_notes, "_draft_archs": draft_archs})
    count_error = None
    for path in tree.find(AUX_FILE):
        count_error = read_count_error(path, tree.files[path])
        if count_error:
            break
    return ProbeResult(engine=ENGINE, version=read_version(tree), origin=tree.origin,
                       ids_from=ids[0] if ids else None, ids_site=ids[1] if ids else None,
                       archs=tuple(archs), skipped=tuple(index.skipped), count_error=count_error,
                       id_reads=reads[0] if reads else None, extra=extra)
