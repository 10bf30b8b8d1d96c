"""The runner's side of method ``official``: its cells, workers, and derived images.

Imported by ``run.py``; the workers are ``_official.py`` (see its docstring).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

__all__ = ["OFFICIAL_WORKERS", "derive_official", "official_cells"]

OFFICIAL_WORKERS = {
    "official client native": "official-client",
    "our json native": "official-ours",
    "our batch derived": "official-ours",
    "in process": "official-inproc",
}
"""Which worker measures each variant (``run.py`` starts ``_official.py <mode>``)."""

CONCURRENT_N = (1, 64, 256)
SINGLE_SESSION_N = (1, 16)
"""N for a family not marked concurrent: natively a container per session."""
SINGLE_SESSION = frozenset({"grid_world", "connect4", "finqa"})


def official_cells(
    args: argparse.Namespace, have_openenv: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """The cells' specs (family, image, n, variant), N by N; and notes on what is skipped."""
    notes: list[str] = []
    images = dict(item.split("=", 1) for item in args.official_images)
    if not images:
        return [], ["(official) skipped: no --official-images FAMILY=IMAGE,... given"]
    specs: list[dict[str, Any]] = []
    variants = list(OFFICIAL_WORKERS)
    if not have_openenv:
        variants.remove("official client native")
        notes.append("(official) official-client rows skipped: no OpenEnv interpreter")
    for family, image in images.items():
        single = family in SINGLE_SESSION
        ns = args.official_n or (SINGLE_SESSION_N if single else CONCURRENT_N)
        if args.smoke:
            ns = [n for n in ns if n <= 16] or [1]
        for n in ns:
            for variant in variants:
                specs.append({"family": family, "image": image, "n": n, "variant": variant})
        if single:
            notes.append(
                f"(official) {family}: not marked concurrent, so natively one container per "
                "session (N containers); derived: one container, a worker process per session"
            )
    return specs, notes


def derive_official(cells: list[Any], note: Callable[[str], None]) -> list[Any]:
    """Derive each image of the run's official cells once (cached); the cells that cannot."""
    from openenv_gym.exceptions import OpenEnvGymError
    from openenv_gym.providers.derive import derive

    failed: list[Any] = []
    done: dict[str, str | None] = {}
    for cell in cells:
        if cell.method != "official":
            continue
        image = cell.options["image"]
        if image not in done:
            try:
                done[image] = derive(image).image
                note(f"(official) {image}: derived {done[image]}")
            except OpenEnvGymError as exc:
                done[image] = None
                note(f"(official) {image}: cannot be derived: {exc}")
        if done[image] is None and cell.variant in ("our batch derived", "in process"):
            failed.append(cell)
    return failed
