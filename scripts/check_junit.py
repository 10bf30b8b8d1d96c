"""Fail unless a pytest JUnit XML report shows tests that ran, none skipped or failed.

Usage: ``python scripts/check_junit.py REPORT.xml``. ``scripts/test`` runs it on the interop
suite: there, a skip means an OpenEnv feature silently went untested, so it is an error.
JUnit XML counts collection-time skips (``pytest.importorskip`` at module level) too.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

__all__ = ["check", "main"]


def check(path: str) -> str | None:
    """Return why the report fails, or None if it passes."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {
        key: sum(int(suite.get(key, 0)) for suite in suites)
        for key in ("tests", "skipped", "failures", "errors")
    }
    if counts["tests"] == 0:
        return f"{path}: no tests ran"
    if counts["skipped"] or counts["failures"] or counts["errors"]:
        skipped = [
            f"  {case.get('classname')}::{case.get('name')}: {skip.get('message', '')}"
            for case in root.iter("testcase")
            for skip in case.findall("skipped")
        ]
        return "\n".join([f"{path}: {counts}; skips are not allowed here", *skipped])
    return None


def main(argv: list[str]) -> int:
    """Check each report named in ``argv``; 0 if all pass."""
    failures = [why for why in map(check, argv) if why is not None]
    for why in failures:
        sys.stderr.write(why + "\n")
    return 1 if failures or not argv else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
