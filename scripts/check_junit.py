"""Fail unless a pytest JUnit XML report shows tests that ran, none failed, none skipped.

Usage: ``python scripts/check_junit.py [--allow-skip-marker NAME]... [--allow-skip TEXT]...
REPORT.xml...``. ``scripts/test`` runs it on every suite: a skip means something silently
went untested, so it is an error, except the skip of a test that carries marker ``NAME``
(the main run allows ``gpu``: tests marked ``gpu`` are the only ones that may skip in CI;
the ``gpu_marker`` plug-in of tests/plugins writes the marker into the report as the
property ``marker``), or whose message contains an ``--allow-skip`` text. JUnit XML counts
collection-time skips (``pytest.importorskip`` at module level) too.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET

__all__ = ["check", "main"]


def _markers(case: ET.Element) -> set[str]:
    """The markers the report records for a test case (``<property name="marker">``)."""
    return {
        prop.get("value", "")
        for props in case.findall("properties")
        for prop in props.findall("property")
        if prop.get("name") == "marker"
    }


def check(
    path: str, allowed: tuple[str, ...] = (), allowed_markers: tuple[str, ...] = ()
) -> str | None:
    """Return why the report fails, or None if it passes."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    counts = {
        key: sum(int(suite.get(key, 0)) for suite in suites)
        for key in ("tests", "skipped", "failures", "errors")
    }
    if counts["tests"] == 0:
        return f"{path}: no tests ran"
    skipped = [
        (f"{case.get('classname')}::{case.get('name')}", skip.get("message", ""), case)
        for case in root.iter("testcase")
        for skip in case.findall("skipped")
    ]
    refused = [
        (name, why)
        for name, why, case in skipped
        if not any(a in why for a in allowed) and not _markers(case) & set(allowed_markers)
    ]
    if refused or counts["failures"] or counts["errors"]:
        lines = [f"  {name}: {why}" for name, why in refused]
        return "\n".join([f"{path}: {counts}; these skips are not allowed here", *lines])
    return None


def main(argv: list[str]) -> int:
    """Check each report; 0 if all pass."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--allow-skip", action="append", default=[], metavar="TEXT")
    parser.add_argument("--allow-skip-marker", action="append", default=[], metavar="NAME")
    parser.add_argument("reports", nargs="*")
    args = parser.parse_args(argv)
    allowed, markers = tuple(args.allow_skip), tuple(args.allow_skip_marker)
    failures = [
        why for why in (check(r, allowed, markers) for r in args.reports) if why is not None
    ]
    for why in failures:
        sys.stderr.write(why + "\n")
    return 1 if failures or not args.reports else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
