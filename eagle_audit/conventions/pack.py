"""Write the release data (``probes/releases/<engine>.json``, :mod:`.releases`) from probed convention files.

Input: staging folders laid out ``<stage>/<engine>/<version>/<name>.json`` (what ``eagle-audit probe <name>
--source <engine>-<version>.whl --out ...`` writes; ``<engine>`` is ``sglang`` or ``vllm``), and beside them,
optionally, ``<name>.missing`` (one line: why that convention could not be probed from that release). The
built-in ``probes/<name>.json`` of each engine are packed as their own release too, and win over a staged file of
the same release (they are the files the rest of eagle-audit is tested on). Every file is loaded as a
convention first; one that does not load is left out and said.

Run::

    python -m eagle_audit.conventions.pack /work/stage            # writes probes/releases/*.json
    python -m eagle_audit.conventions.pack /work/stage --check    # exit 1 when the files would change

The result is the same whatever order the files are found in (docs/releases.md)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Iterable

from .parse import parse_convention
from .releases import SCHEMA, pack

#: the engines with release data, by the prefix of their conventions' names
ENGINES = ("sglang", "vllm")


def _engine_of(name: str) -> str | None:
    return next((e for e in ENGINES if name == e or name.startswith(e + "-")), None)


def collect(stages: Iterable[Path], probes: Path, say=print) -> tuple[dict[str, dict], dict[str, dict]]:
    """({engine: {(name, version): convention data}}, {engine: {version: {name: why missing}}})."""
    found: dict[str, dict] = {e: {} for e in ENGINES}
    missing: dict[str, dict] = {e: {} for e in ENGINES}
    for stage in stages:
        for f in sorted(Path(stage).glob("*/*/*")):
            engine, version, stem = f.parent.parent.name, f.parent.name, f.name.split(".")[0]
            if engine not in ENGINES:
                continue
            if f.suffix == ".missing":
                try:
                    text = f.read_text().strip()
                except OSError as e:  # a file being written as the pack runs
                    say(f"{f}: left out: {e}")
                    continue
                why = re.sub(r"(?:/[^\s/:]+)+/([^\s/:]+\.whl)", r"\1", text.splitlines()[0] if text else "not read")
                missing[engine].setdefault(version, {})[stem] = why[:400]  # no local folder in the package data
                continue
            if f.suffix != ".json":
                continue
            data = _load(f, say)
            if data is None:
                continue
            if str(data.get("version")) != version:
                say(f"{f}: version {data.get('version')!r} in the file, {version!r} in its path: the file's is kept")
            if _engine_of(data["name"]) != engine:
                say(f"{f}: convention {data['name']!r} is not an {engine} convention: left out")
                continue
            found[engine][(data["name"], str(data["version"]))] = data
    for f in sorted(Path(probes).glob("*.json")):
        data = _load(f, say)
        if data is None or data.get("kind") != "engine" or _engine_of(data["name"]) is None:
            continue
        key = (data["name"], str(data["version"]))
        engine = _engine_of(data["name"])
        if key in found[engine] and found[engine][key] != data:
            say(f"{f}: {key[0]} {key[1]} is also staged, with other content: the built-in file is packed")
        found[engine][key] = data
    for engine in ENGINES:  # a convention read after all is not missing
        for version, names in list(missing[engine].items()):
            for name in list(names):
                if (name, version) in found[engine]:
                    del names[name]
            if not names:
                del missing[engine][version]
    return found, missing


def _load(f: Path, say) -> dict | None:
    try:
        data = _local_paths_out(json.loads(f.read_text()))  # OSError / a half-written file: left out, said
        parse_convention(data, str(f))
        return data
    except Exception as e:  # noqa: BLE001 -- a staged file that does not load is said and left out, whatever the cause
        say(f"{f}: left out: {type(e).__name__}: {str(e)[:200]}")
        return None


def _local_paths_out(x):
    """Every string with this machine's folders taken out (the data ships): ``/a/b/sglang-0.5.6-...whl`` ->
    ``sglang-0.5.6-...whl``, ``/a/b/probes/sglang.json`` -> ``probes/sglang.json``."""
    if isinstance(x, dict):
        return {k: _local_paths_out(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_local_paths_out(v) for v in x]
    if isinstance(x, str) and "/" in x:
        x = re.sub(r"(?:/[^\s/:()]+)+/([^\s/:()]+\.whl)", r"\1", x)
        return re.sub(r"(?:/[^\s/:()]+)+/(probes/[^\s/:()]+\.json)", r"\1", x)
    return x


def render(packed: dict) -> str:
    """The release file's text: each release and each rule set on a line of its own (a change is one line)."""
    def block(d: dict) -> str:
        return "{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}" for k, v in d.items()) + "\n}"

    head = ",\n".join(f"{json.dumps(k)}: {json.dumps(packed[k])}" for k in ("schema", "engine", "generated_by"))
    return (f"{{{head},\n\"releases\": {block(packed['releases'])},\n\"sets\": {block(packed['sets'])},\n"
            f"\"missing\": {block(packed['missing'])}}}\n")


def write(stages: Iterable[Path], probes: Path, out: Path, check: bool = False, say=print) -> bool:
    """Pack; write (or with ``check`` only compare) ``out/<engine>.json``. True when nothing would change."""
    found, missing = collect(stages, probes, say)
    same = True
    for engine in ENGINES:
        if not found[engine]:
            continue
        packed = pack(found[engine].values(), engine, missing[engine],
                      generated_by="python -m eagle_audit.conventions.pack (eagle-audit probe output per release)")
        text = render(packed)
        path = out / f"{engine}.json"
        old = path.read_text() if path.is_file() else None
        sets = len(packed["sets"])
        say(f"{engine}: {len(packed['releases'])} releases, {len(found[engine])} convention files in {sets} rule sets, "
            f"{sum(len(m) for m in packed['missing'].values())} missing; {len(text) // 1024} KiB"
            + ("" if old == text else (" (would change)" if check else f" -> {path}")))
        if old != text:
            same = False
            if not check:
                out.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    return same


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parents[2] / "probes"
    ap = argparse.ArgumentParser(prog="python -m eagle_audit.conventions.pack", description=__doc__.split("\n\n")[0])
    ap.add_argument("stages", nargs="*", type=Path, help="staging folders <stage>/<engine>/<version>/<name>.json")
    ap.add_argument("--probes", type=Path, default=here, help="the built-in convention files (default: %(default)s)")
    ap.add_argument("--dest", type=Path, default=None, help="where the release files go (default: PROBES/releases)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file would change")
    a = ap.parse_args(argv)
    same = write(a.stages, a.probes, a.dest or a.probes / "releases", a.check)
    return 1 if a.check and not same else 0


assert SCHEMA  # the format written is releases.SCHEMA

if __name__ == "__main__":
    sys.exit(main())
