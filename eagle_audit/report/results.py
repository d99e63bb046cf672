"""What a report is made from: result JSON documents, read, checked and merged.

A report renders one of three documents, all plain JSON dicts:

``eagle-audit/layers/1``
    a ``layers`` result (:meth:`eagle_audit.layers.result.LayersResult.to_json`).
``eagle-audit/accept-rate/1``
    an ``accept-rate`` result. Every key is optional; the report uses ``accept_length``
    (wiring -> mean accept length), ``per_position`` (wiring -> acceptance rate at each draft
    position), ``attribution`` (``[{slot, accept_length}]``), ``server`` (``{accept_length, source}``),
    ``target``, ``draft`` and ``provenance`` when present.
``eagle-audit/report/1``
    both of the above for the same target and draft: ``{"schema", "layers", "accept_rate"}``
    (:func:`merge`).
``eagle-audit/fingerprint/2`` (and ``/1``, written before the per-slot guard of ``inferred.states``)
    a ``fingerprint`` result (:meth:`eagle_audit.fingerprint.result.FingerprintResult.to_json`), reported
    on its own (never merged).
``eagle-audit/check/1``
    a ``check`` result (:meth:`eagle_audit.check.result.CheckResult.to_json`): rendered as its layers audit
    (the captured stage, else the static one) and its accept-rate stage, below a section per stage and the
    one verdict (the merged form's ``check`` key).

:func:`normalize` turns any of them into the merged form; nothing else in the package reads schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ..errors import AuditError, InputNotFound
from ..jsonfile import read_json_object
from ..layers.result import LAYERS_SCHEMA

ACCEPT_SCHEMA = "eagle-audit/accept-rate/1"
REPORT_SCHEMA = "eagle-audit/report/1"
FINGERPRINT_SCHEMA = "eagle-audit/fingerprint/2"
FINGERPRINT_SCHEMA_1 = "eagle-audit/fingerprint/1"  # same keys; inferred.states unguarded (the report reads both)
CHECK_SCHEMA = "eagle-audit/check/1"

#: schema -> the key that document takes in a merged report
KINDS = {LAYERS_SCHEMA: "layers", ACCEPT_SCHEMA: "accept_rate", FINGERPRINT_SCHEMA: "fingerprint",
         FINGERPRINT_SCHEMA_1: "fingerprint"}

#: keys a fingerprint result cannot be rendered without
_FINGERPRINT_REQUIRED = {"verdict": str, "target": dict, "draft": dict, "inferred": dict, "findings": list}

#: keys a layers result cannot be rendered without, with the JSON type each must have
_LAYERS_REQUIRED = {"verdict": str, "target": dict, "draft": dict, "slots": list, "findings": list}


class BadResult(AuditError):
    """A result file that is not JSON, not an object, of an unknown schema, or missing a key."""


class ResultsDiffer(AuditError):
    """Two results that cannot be merged: other targets or drafts, or two of the same kind."""


def load_result(path: str | Path) -> dict:
    """Read one result file and check it (:func:`normalize` raises for a document it cannot render)."""
    p = Path(path)
    if not p.exists():
        raise InputNotFound(f"{path}: no such result file",
                            hint="write one with: eagle-audit layers --json FILE")
    if not p.is_file():
        raise BadResult(f"{path}: not a file")
    data = read_json_object(p, BadResult, "a JSON result", non_finite="null")  # NaN/Infinity: no value
    normalize(data, where=str(path))
    return data


def normalize(data: Any, where: str = "result") -> dict:
    """Any renderable document -> ``{"schema": REPORT_SCHEMA, "layers": dict | None, "accept_rate": dict | None}``."""
    if not isinstance(data, Mapping):
        raise BadResult(f"{where}: expected a JSON object, got {type(data).__name__}")
    schema = data.get("schema")
    if not isinstance(schema, (str, type(None))):
        raise BadResult(f"{where}: 'schema' must be a string, got {type(schema).__name__}")
    if schema == REPORT_SCHEMA or (schema is None and ("layers" in data or "accept_rate" in data)):
        layers, accept = data.get("layers"), data.get("accept_rate")
        if layers is None and accept is None and isinstance(data.get("fingerprint"), Mapping):  # normalized before
            fp = data["fingerprint"]
            _check(fp, fp.get("schema") if fp.get("schema") in (FINGERPRINT_SCHEMA, FINGERPRINT_SCHEMA_1)
                   else FINGERPRINT_SCHEMA, f"{where}: fingerprint")
            return {"schema": REPORT_SCHEMA, "layers": None, "accept_rate": None, "fingerprint": dict(fp)}
        if layers is None and accept is None:
            raise BadResult(f"{where}: a merged report that holds no result (neither 'layers', 'accept_rate' nor "
                            "'fingerprint'): nothing to render")
        if layers is not None:
            _check(layers, LAYERS_SCHEMA, f"{where}: layers")
        if accept is not None:
            _check(accept, ACCEPT_SCHEMA, f"{where}: accept_rate")
        if layers is not None and accept is not None:
            _same_subject(layers, accept)
        out = {"schema": REPORT_SCHEMA, "layers": layers, "accept_rate": accept}
        if isinstance(data.get("check"), Mapping):  # a check result's own part, normalized again (render after merge)
            out["check"] = dict(data["check"])
        return out
    if schema == CHECK_SCHEMA:
        return _from_check(data, where)
    not_rendered = _not_rendered(data)
    if schema not in KINDS and not_rendered:
        raise BadResult(f"{where}: {not_rendered}; report renders layers, accept-rate, fingerprint and check results")
    if schema not in KINDS:
        known = ", ".join([*KINDS, REPORT_SCHEMA, CHECK_SCHEMA])
        shown = repr(schema) if schema is not None else "no 'schema' key"
        raise BadResult(f"{where}: unknown result schema ({shown}); this eagle-audit reads: {known}",
                        hint="results come from eagle-audit layers --json FILE or eagle-audit accept-rate --json FILE")
    _check(data, schema, where)
    merged: dict[str, Any] = {"schema": REPORT_SCHEMA, "layers": None, "accept_rate": None}
    merged[KINDS[schema]] = dict(data)  # a fingerprint result adds its own key
    return merged


#: files eagle-audit writes that are not results a report renders: schema -> what the file is
NOT_RENDERED = {"eagle-audit/convention/1": "a convention file (what probe writes), not a result: give it "
                                            "to layers as the engine, by its file name"}
#: the keys of a train-canary --json record (it has no schema key)
_CANARY_KEYS = {"out_dir", "boundaries", "first_token_accuracy"}


def _not_rendered(data: Mapping[str, Any]) -> str | None:
    """What a file eagle-audit wrote is, when it is not a result a report renders (None: anything else)."""
    if data.get("schema") in NOT_RENDERED:
        return NOT_RENDERED[data["schema"]]
    if data.get("schema") is None and _CANARY_KEYS <= set(data):
        return ("a train-canary record (the canary's training summary), not an audit result: audit the canary "
                "directory as the draft with layers or accept-rate and report that result")
    return None


def _from_check(data: Mapping[str, Any], where: str) -> dict:
    """A check result -> the merged form, with its verdict and stages under ``check``."""
    stages, verdict = data.get("stages"), data.get("verdict")
    if not isinstance(stages, list) or not all(isinstance(s, Mapping) and isinstance(s.get("name"), str)
                                               for s in stages):
        raise BadResult(f"{where}: key 'stages' should be a JSON array of stage objects")
    if not isinstance(verdict, Mapping):
        raise BadResult(f"{where}: key 'verdict' should be a JSON object")
    by = {s["name"]: s for s in stages}
    pick = lambda *names: next((by[n]["result"] for n in names if n in by and by[n].get("result")), None)  # noqa: E731
    layers, accept, fp = pick("captured", "static"), pick("accept_rate"), pick("fingerprint")
    if layers is None and accept is None:
        raise BadResult(f"{where}: a check result whose layers and accept-rate stages did not run has nothing to "
                        "render beyond its JSON")
    if layers is not None:
        _check(layers, LAYERS_SCHEMA, f"{where}: layers stage")
    if accept is not None:
        _check(accept, ACCEPT_SCHEMA, f"{where}: accept-rate stage")
    if fp is not None:
        _check(fp, FINGERPRINT_SCHEMA, f"{where}: fingerprint stage")
    summary = {"verdict": dict(verdict), "source": data.get("source"),
               "stages": [{k: v for k, v in s.items() if k != "result"} for s in stages],
               "fingerprint": ({"wiring": "[" + ", ".join(sl.get("text", "?") for sl in fp["inferred"].get("slots", []))
                                + "]", "confidence": fp["inferred"].get("confidence")} if fp else None)}
    return {"schema": REPORT_SCHEMA, "layers": layers, "accept_rate": accept, "check": summary}


def merge(*documents: Mapping[str, Any]) -> dict:
    """One report document from one or two results (a layers and an accept-rate result of the same
    target and draft, in either order)."""
    if not 1 <= len(documents) <= 2:
        raise ResultsDiffer(f"a report is made from one or two results, got {len(documents)}")
    parts = [normalize(d, where=f"result {i + 1}") for i, d in enumerate(documents)]
    if len(parts) == 1:
        return parts[0]
    if any(p.get("fingerprint") is not None for p in parts):
        raise ResultsDiffer("a fingerprint result is reported on its own: pass it alone")
    out: dict[str, Any] = {"schema": REPORT_SCHEMA, "layers": None, "accept_rate": None}
    for part in parts:
        for key in ("layers", "accept_rate"):
            if part[key] is not None:
                if out[key] is not None:
                    raise ResultsDiffer(f"two {key.replace('_', '-')} results given: pass at most one layers and one "
                                        "accept-rate result")
                out[key] = part[key]
    if out["layers"] is not None and out["accept_rate"] is not None:
        _same_subject(out["layers"], out["accept_rate"])
    return out


def _check(doc: Any, schema: str, where: str) -> None:
    if not isinstance(doc, Mapping):
        raise BadResult(f"{where}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("schema") != schema:
        raise BadResult(f"{where}: schema is {doc.get('schema')!r}, expected {schema!r}")
    required = {LAYERS_SCHEMA: _LAYERS_REQUIRED, FINGERPRINT_SCHEMA: _FINGERPRINT_REQUIRED,
                FINGERPRINT_SCHEMA_1: _FINGERPRINT_REQUIRED}.get(schema)
    if required:
        what = KINDS[schema]
        for key, kind in required.items():
            if key not in doc:
                raise BadResult(f"{where}: key {key!r} is missing from the {what} result")
            if not isinstance(doc[key], kind):
                raise BadResult(f"{where}: key {key!r} should be a JSON {_JSON_TYPE[kind]}, "
                                f"got {type(doc[key]).__name__}")


_JSON_TYPE = {str: "string", dict: "object", list: "array"}


def _identity(doc: Mapping[str, Any], side: str) -> tuple[str | None, str | None]:
    """(config_sha256, name) of the target or draft a result is about; either may be unknown."""
    part = doc.get(side)
    if not isinstance(part, Mapping):
        return None, None

    def text(v: Any) -> str | None:
        return v if isinstance(v, str) and v else None

    return text(part.get("config_sha256")), text(part.get("name")) or text(part.get("path"))


def _same_subject(layers: Mapping[str, Any], accept: Mapping[str, Any]) -> None:
    """Refuse to merge results about different targets or drafts. Compared by config_sha256 where
    both have one, else by name/path; a side the accept-rate result does not describe is not compared."""
    for side in ("target", "draft"):
        (sha_l, name_l), (sha_a, name_a) = _identity(layers, side), _identity(accept, side)
        if sha_l and sha_a:
            differ = sha_l != sha_a
        elif name_l and name_a:
            differ = name_l != name_a
        else:
            continue
        if differ:
            def show(name, sha):
                return f"{name or '?'} (config {sha[:12]})" if sha else f"{name or '?'}"

            raise ResultsDiffer(
                f"cannot merge: the layers result is for {side} {show(name_l, sha_l)}, the accept-rate result "
                f"for {side} {show(name_a, sha_a)}",
                hint="render them separately: eagle-audit report A.json --html a.html; eagle-audit report B.json ...")
