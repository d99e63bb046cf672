"""Per-test durations, written by every run (tests/conftest.py), and the table of the slowest.

Every pytest run writes ``reports/test-durations.json`` (``$EAGLE_AUDIT_DURATIONS`` to put it elsewhere) and a
copy in the test cache (its tests merged over the earlier runs'), which the next run reads to schedule its longest
groups first: each test's setup, call and teardown seconds and outcome, the pre-built artefacts' seconds
(tests/artefacts.py), the run's wall time and its worker count. Under pytest-xdist the controller writes it, from every worker's reports.

    python -m tests.durations [FILE] [--top N]     # the slowest tests, the seconds per area, the artefacts
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def default_path() -> Path:
    return Path(os.environ.get("EAGLE_AUDIT_DURATIONS") or ROOT / "reports" / "test-durations.json")


def cached_path() -> Path:
    from tests.artefacts import cache_root

    return cache_root() / "test-durations.json"


def area(nodeid: str) -> str:
    """A test's area: its folder under tests/ (``tests/fingerprint``), or the file for tests/test_*.py."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else path


def write(record: dict) -> list[Path]:
    """The run's record at :func:`default_path`; in the cache's copy (what orders the next run) its tests are
    merged over the earlier runs' there, so that running one file does not forget the rest of the suite."""
    out = []
    for p in (default_path(), cached_path()):
        doc = record
        if p == cached_path():
            try:
                doc = {**record, "tests": {**json.loads(p.read_text()).get("tests", {}), **record["tests"]}}
            except (OSError, ValueError):
                pass
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(doc, indent=0))
            out.append(p)
        except OSError:
            pass
    return out


def group_seconds() -> dict[str, float]:
    """Seconds per test file (setup + call + teardown) of the last run, from the cache's copy; {} without one."""
    try:
        tests = json.loads(cached_path().read_text()).get("tests", {})
    except (OSError, ValueError):
        return {}
    out: dict[str, float] = defaultdict(float)
    for nodeid, t in tests.items():
        out[nodeid.split("::", 1)[0]] += sum(t.get(w, 0.0) for w in ("setup", "call", "teardown"))
    return dict(out)


def table(record: dict, top: int = 15) -> str:
    tests = record.get("tests", {})
    total = {n: sum(t.get(w, 0.0) for w in ("setup", "call", "teardown")) for n, t in tests.items()}
    lines = [f"durations: {len(tests)} tests, {sum(total.values()):.0f} s of test time in {record.get('wall', 0):.0f} s "
             f"wall on {record.get('workers', 1)} worker(s)"]
    arts = [a for a in record.get("artefacts", []) if a.get("status") != "cached"]
    if record.get("artefacts"):
        lines.append(f"pre-built artefacts: {record.get('prebuild_wall', 0):.0f} s wall; "
                     + (", ".join(f"{a['name']} {a['seconds']:.0f} s ({a['status']})" for a in arts) or "all cached"))
    per_area: dict[str, float] = defaultdict(float)
    for n, s in total.items():
        per_area[area(n)] += s
    lines.append("seconds per area: " + ", ".join(f"{a} {s:.0f}" for a, s in
                                                    sorted(per_area.items(), key=lambda kv: -kv[1])[:12]))
    lines.append(f"slowest {min(top, len(total))}:")
    for n, s in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {s:7.1f} s  {n}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    top = 15
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    path = Path(argv[0]) if argv else default_path()
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        print(f"{path}: no durations to show ({type(e).__name__})", file=sys.stderr)
        return 2
    print(table(record, top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
