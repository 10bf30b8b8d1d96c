"""What an environment is, in one record: :class:`EnvRecord`, and the table of them.

Every environment with a Gymnasium id declares ONE :class:`EnvRecord`: its id, the server
class ``openenv-gym serve NAME`` hosts, its codec (spaces and wire conversions), its text
interface (the tool TRL and the LLM loops give the model), whether an image is built for it,
and its Gymnasium options. The registry (:mod:`openenv_gym.registry`), the server loader
(:mod:`openenv_gym.runtime.loader`), :func:`openenv_gym.spaces.codec_for`, the text
interfaces (:mod:`openenv_gym.integrations.text`), the images (:mod:`openenv_gym.images`) and
the command line all read the table this module keeps.

Installed environments register by a Python entry point in the group :data:`ENTRY_POINTS`
(``openenv_gym.envs``): its name is the environment's name, its object the record (or a
function that returns it). So ``pip install`` of a package that declares one is all it
takes, in this process and in every ``openenv-gym serve`` process; the environments we ship
(Wordle, Echo, Catch) are registered the same way, by openenv-gym's own distribution. An
environment can also be added at run time with :func:`openenv_gym.register_environment`
(which registers its Gymnasium id too). A record names code as ``"module:attribute"``
strings, imported only when used, so reading the table imports no environment, model or
game code.

This module imports nothing of Gymnasium or the client side: the server runtime reads it too.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import threading
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from openenv_gym.exceptions import ConfigurationError

__all__ = [
    "DISTRIBUTION",
    "ENTRY_POINTS",
    "EnvRecord",
    "add_environment",
    "builtin_names",
    "environment",
    "environments",
    "import_root",
    "installed",
    "records_from",
    "resolve",
    "serve_target",
]

ENTRY_POINTS = "openenv_gym.envs"
"""The entry-point group environments register in: ``name = "module:RECORD"``."""

DISTRIBUTION = "openenv-gym"
"""The distribution whose entry points are the environments we ship."""


@dataclass(frozen=True, slots=True)
class EnvRecord:
    """Everything openenv-gym needs to know about one environment.

    Attributes:
        name: Short name (``"wordle"``): ``openenv-gym serve NAME``, the codec's name, the
            image ``openenv-gym/NAME:VERSION``. A lower-case identifier.
        env_id: The Gymnasium id (``"openenv/Wordle-v0"``).
        server: The environment class the server hosts, as ``"module:Class"`` (OpenEnv's
            ``Environment`` interface).
        codec: A factory of its :class:`~openenv_gym.spaces.Codec` (called once per env:
            spaces carry their own RNG), or ``"module:factory"``.
        text_interface: A factory of its
            :class:`~openenv_gym.integrations.text.TextInterface` (the TRL tool and how a
            plain-text answer becomes an action), or ``"module:factory"``; None: one built
            from the action space.
        image: ``openenv-gym images build`` builds an image for it.
        max_episode_steps: Gymnasium's ``max_episode_steps`` of the id (None: none).
        nondeterministic: Gymnasium's flag: False when the server replays an episode
            exactly from its seed.
        description: One line for listings.
        rank: Where listings (``openenv-gym envs``, the images built by default) put it:
            lower first, then by name.
        example_actions: Wire actions that move the env in a way its seed shows (a valid
            Wordle guess, whose feedback depends on the secret word): ``openenv-gym check``
            tries them on servers whose action schema they fit.
    """

    name: str
    env_id: str
    server: str
    codec: Callable[[], Any] | str
    text_interface: Callable[[], Any] | str | None = None
    image: bool = True
    max_episode_steps: int | None = None
    nondeterministic: bool = False
    description: str = ""
    rank: int = 100
    example_actions: tuple[dict[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not (self.name.isidentifier() and self.name == self.name.lower()):
            raise ConfigurationError(
                f"EnvRecord.name must be a lower-case identifier: {self.name!r}"
            )
        if self.name == "generic":
            raise ConfigurationError("'generic' names openenv/Generic-v0: choose another name")
        namespace, slash, rest = self.env_id.rpartition("/")
        if not rest or (slash and not namespace):
            raise ConfigurationError(f"EnvRecord.env_id is not a Gymnasium id: {self.env_id!r}")
        module, colon, attr = self.server.partition(":")
        if not (module and colon and attr):
            raise ConfigurationError(f"EnvRecord.server must be 'module:Class': {self.server!r}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ConfigurationError("EnvRecord.max_episode_steps must be positive or None")

    def make_codec(self) -> Any:
        """A fresh codec of the environment."""
        return resolve(self.codec, "codec")()

    def make_text_interface(self) -> Any:
        """Its text interface, or None when it has none of its own."""
        if self.text_interface is None:
            return None
        return resolve(self.text_interface, "text_interface")()


def resolve(
    target: Callable[..., Any] | str, what: str = "target", *, callable_only: bool = True
) -> Any:
    """``target`` itself, or the attribute a ``"module:attribute"`` string names.

    Raises:
        ConfigurationError: A malformed string, a missing module or attribute; with
            ``callable_only``, an attribute that is not callable.
    """
    if not isinstance(target, str):
        return target
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigurationError(f"{what} {target!r} is not 'module:attribute'")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import {module_name!r}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigurationError(f"{module_name!r} has no attribute {attr!r}") from None
    if callable_only and not callable(obj):
        raise ConfigurationError(f"{what} {target!r} is not callable")
    return obj


_lock = threading.RLock()
_installed: dict[str, EnvRecord] | None = None  # by entry points; read once per process
_builtin: tuple[str, ...] = ()  # the names of those openenv-gym itself registers
_added: dict[str, EnvRecord] = {}  # register_environment


def records_from(entries: Iterable[metadata.EntryPoint]) -> dict[str, EnvRecord]:
    """The records ``entries`` name, by name, in the order given.

    Each entry's object is an :class:`EnvRecord`, or a function that returns one; its name
    must be the record's. An entry that cannot be loaded, names something else, or takes a
    name or id another entry took first is left out with a :class:`RuntimeWarning` saying
    why: one broken package does not break the others, nor ``import openenv_gym``.
    """
    found: dict[str, EnvRecord] = {}
    ids: dict[str, str] = {}
    for entry in entries:
        where = f"entry point {entry.name!r} ({entry.value}) of group {entry.group!r}"
        try:
            record = _load(entry)
        except Exception as exc:  # whatever the package raises: it is left out, not us
            _left_out(f"{where} cannot be loaded: {type(exc).__name__}: {exc}")
            continue
        if not isinstance(record, EnvRecord):
            _left_out(f"{where} is {record!r}, not an EnvRecord (or a function making one)")
        elif record.name != entry.name:
            _left_out(f"{where} names the record {record.name!r}: the names must be equal")
        elif record.name in found:
            _left_out(f"{where}: {record.name!r} is registered already")
        elif record.env_id in ids:
            _left_out(f"{where}: {record.env_id!r} is the id of {ids[record.env_id]!r}")
        else:
            found[record.name] = record
            ids[record.env_id] = record.name
    return found


def _load(entry: metadata.EntryPoint) -> Any:
    obj = entry.load()
    return obj() if callable(obj) and not isinstance(obj, EnvRecord) else obj


def _left_out(why: str) -> None:
    warnings.warn(f"openenv-gym leaves out an environment: {why}", RuntimeWarning, stacklevel=2)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _ranked(records: dict[str, EnvRecord]) -> dict[str, EnvRecord]:
    return dict(sorted(records.items(), key=lambda kv: (kv[1].rank, kv[0])))


def _discover() -> dict[str, EnvRecord]:
    """The records every installed distribution registers: openenv-gym's first."""
    global _installed, _builtin
    with _lock:
        if _installed is None:
            shipped, others = installed(metadata.entry_points(group=ENTRY_POINTS))
            _installed = {**shipped, **others}
            _builtin = tuple(shipped)
        return _installed


def installed(
    entries: Iterable[metadata.EntryPoint],
) -> tuple[dict[str, EnvRecord], dict[str, EnvRecord]]:
    """The records of ``entries``: openenv-gym's own, and the others (each by ``rank``).

    Ours are read first, so they win a clash of names or ids (:func:`records_from`). None of
    ours is an install whose metadata predates the entry points (an old editable install):
    that says so in a :class:`RuntimeWarning`.
    """
    entries = list(entries)
    ours = [e for e in entries if _dist_name(e) == DISTRIBUTION]
    theirs = sorted((e for e in entries if e not in ours), key=lambda e: e.name)
    if not ours:
        warnings.warn(
            f"openenv-gym finds none of its own environments: its distribution declares no "
            f"{ENTRY_POINTS!r} entry point (metadata of an older install?): reinstall it",
            RuntimeWarning,
            stacklevel=2,
        )
    found = records_from([*ours, *theirs])
    names = {e.name for e in ours}
    shipped = _ranked({n: r for n, r in found.items() if n in names})
    return shipped, _ranked({n: r for n, r in found.items() if n not in names})


def _dist_name(entry: metadata.EntryPoint) -> str:
    dist = entry.dist
    return "" if dist is None else _normalized(dist.name)


def builtin_names() -> tuple[str, ...]:
    """The names of the environments we ship, in the order of their records' ``rank``."""
    _discover()
    return _builtin


def environments() -> dict[str, EnvRecord]:
    """Every record by name: the shipped ones, the other installed ones, then those added."""
    with _lock:
        return {**_discover(), **_added}


def environment(name: str) -> EnvRecord | None:
    """The record called ``name`` (any case), or None."""
    return environments().get(name.lower())


def add_environment(record: EnvRecord, *, replace: bool = False) -> None:
    """Add ``record`` to the table of this process (:func:`openenv_gym.register_environment`).

    The servers this process starts find it too: :func:`serve_target` tells a provider how.

    Raises:
        ConfigurationError: Not a record, or its name or id is taken (unless ``replace``).
    """
    if not isinstance(record, EnvRecord):
        raise ConfigurationError(f"expected an EnvRecord, got {record!r}")
    with _lock:
        known = environments()
        if not replace:
            if record.name in known and known[record.name] != record:
                raise ConfigurationError(f"an environment named {record.name!r} exists")
            ids = {r.env_id: r for r in known.values() if r.name != record.name}
            if record.env_id in ids:
                raise ConfigurationError(
                    f"{record.env_id!r} is the id of {ids[record.env_id].name!r}"
                )
        _added[record.name] = record


def serve_target(name: str) -> tuple[str, str | None]:
    """What another process is told to serve for ``name``, and where it imports it from.

    An installed environment (an entry point) or a ``module:Class`` is served as it is
    named: ``(name, None)``. One added in this process with
    :func:`openenv_gym.register_environment` is unknown to a new process, so it is served by
    its class, ``(record.server, directory)``, with the directory its top-level package is
    imported from here (None when that is not a directory of its own).
    """
    record = _added.get(name.lower())
    if record is None:
        return name, None
    return record.server, import_root(record.server)


def import_root(target: str) -> str | None:
    """The ``sys.path`` entry the top-level package of ``module:attribute`` is found in."""
    top = target.partition(":")[0].partition(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.has_location:
        return None
    path = Path(spec.origin).resolve()
    return str(path.parent.parent if path.name == "__init__.py" else path.parent)
