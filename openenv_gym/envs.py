"""What an environment is, in one record: :class:`EnvRecord`, and the table of them.

Every environment with a Gymnasium id declares ONE :class:`EnvRecord`: its id, the server
class ``openenv-gym serve NAME`` hosts, its codec (spaces and wire conversions), its text
interface (the tool TRL and the LLM loops give the model), whether an image is built for it,
and its Gymnasium options. The registry (:mod:`openenv_gym.registry`), the server loader
(:mod:`openenv_gym.runtime.loader`), :func:`openenv_gym.spaces.codec_for`, the text
interfaces (:mod:`openenv_gym.integrations.text`), the images (:mod:`openenv_gym.images`) and
the command line all read the table this module keeps.

The environments we ship are the subpackages of ``openenv_gym_servers``, each with its record
as ``RECORD`` in its ``record`` module: they are found on first use (no list of them
anywhere).
Others are added with :func:`openenv_gym.register_environment` (which also registers the
Gymnasium id). A record names code as ``"module:attribute"`` strings, imported only when used,
so reading the table imports no environment, model or game code.

This module imports nothing of Gymnasium or the client side: the server runtime reads it too.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import pkgutil
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_gym.exceptions import ConfigurationError

__all__ = [
    "SERVERS_PACKAGE",
    "EnvRecord",
    "add_environment",
    "builtin_names",
    "environment",
    "environments",
    "exported_server",
    "resolve",
]

SERVERS_PACKAGE = "openenv_gym_servers"
"""The package whose subpackages are the environments we ship (``servers/`` in the source)."""

_EXPORT_VAR = "OPENENV_GYM_ENVIRONMENTS"
"""Where :func:`add_environment` leaves the servers of added environments for child
processes (``openenv-gym serve NAME`` started by the local provider): JSON
``{name: [module:Class, import root or null]}``."""


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
_builtin: dict[str, EnvRecord] | None = None
_added: dict[str, EnvRecord] = {}


def _discover() -> dict[str, EnvRecord]:
    """The records of the subpackages of ``openenv_gym_servers`` (``<package>.record.RECORD``)."""
    global _builtin
    with _lock:
        if _builtin is None:
            found: dict[str, EnvRecord] = {}
            try:
                package = importlib.import_module(SERVERS_PACKAGE)
            except ImportError:  # pragma: no cover - always installed with openenv-gym
                package = None
            paths = getattr(package, "__path__", ())
            for info in sorted(pkgutil.iter_modules(paths), key=lambda i: i.name):
                if not info.ispkg:
                    continue
                name = f"{SERVERS_PACKAGE}.{info.name}.record"
                try:
                    module = importlib.import_module(name)
                except ModuleNotFoundError as exc:
                    if exc.name != name:
                        raise
                    continue  # a package without a record: not an environment
                record = getattr(module, "RECORD", None)
                if record is None and getattr(module.__spec__, "_initializing", False):
                    record = _fresh_record(module)
                if isinstance(record, EnvRecord):
                    found[record.name] = record
            _builtin = found
        return _builtin


def _fresh_record(module: Any) -> Any:
    """The ``RECORD`` of a record module that is importing us (it was imported first).

    Its import is stopped at its own ``from openenv_gym.envs import EnvRecord``, which runs
    ``import openenv_gym`` and so this discovery: a copy of it is run to read its record.
    """
    spec = module.__spec__
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    return getattr(copy, "RECORD", None)


def builtin_names() -> tuple[str, ...]:
    """The names of the environments we ship, in the order of their records' ``rank``."""
    return tuple(_ordered(_discover()))


def _ordered(records: dict[str, EnvRecord]) -> dict[str, EnvRecord]:
    return dict(sorted(records.items(), key=lambda kv: (kv[1].rank, kv[0])))


def environments() -> dict[str, EnvRecord]:
    """Every record by name: the shipped ones first, then those added."""
    with _lock:
        return {**_ordered(_discover()), **_added}


def environment(name: str) -> EnvRecord | None:
    """The record called ``name`` (any case), or None."""
    return environments().get(name.lower())


def add_environment(record: EnvRecord, *, replace: bool = False) -> None:
    """Add ``record`` to the table (:func:`openenv_gym.register_environment` calls this).

    Its server is also left in ``OPENENV_GYM_ENVIRONMENTS`` so that a child process (the
    local provider's ``openenv-gym serve NAME``) can import it, with the directory its
    module is imported from.

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
        exported = _exported()
        exported[record.name] = [record.server, _import_root(record.server)]
        os.environ[_EXPORT_VAR] = json.dumps(exported)


def _import_root(target: str) -> str | None:
    """The ``sys.path`` entry the module of ``target`` is imported from, if it is loaded."""
    module_name = target.partition(":")[0]
    top = module_name.partition(".")[0]
    module = sys.modules.get(top)
    file = getattr(module, "__file__", None)
    if file is None:
        return None
    path = Path(file).resolve().parent
    if Path(file).name == "__init__.py":
        path = path.parent
    return str(path)


def _exported() -> dict[str, list[Any]]:
    from openenv_gym.config import env_str

    text = env_str(_EXPORT_VAR)
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def exported_server(name: str) -> str | None:
    """The server of an environment a parent process added (``OPENENV_GYM_ENVIRONMENTS``).

    The directory its module is imported from is put on ``sys.path`` first.
    """
    entry = _exported().get(name.lower())
    if not isinstance(entry, list) or not entry or not isinstance(entry[0], str):
        return None
    root = entry[1] if len(entry) > 1 else None
    if isinstance(root, str) and root not in sys.path:
        sys.path.append(root)
    return entry[0]
