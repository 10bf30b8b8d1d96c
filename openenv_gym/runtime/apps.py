"""Unmodified OpenEnv app modules: what their app factory was given, read at import.

An OpenEnv environment ships an app module (``server/app.py``) that builds its FastAPI app
when it is imported::

    app = create_app(EchoEnvironment, CallToolAction, CallToolObservation,
                     env_name="echo_env", max_concurrent_envs=8)

:func:`load_app` imports such a module while OpenEnv's app factories (``create_app``,
``create_fastapi_app``, ``create_web_interface_app``, wherever an OpenEnv module holds
them) are replaced by recorders. A recorder keeps what its factory was given, as an
:class:`OpenEnvApp`, and returns a bare FastAPI app in place of OpenEnv's: no OpenEnv server
is built, no environment instance made, no web interface started. The runtime then hosts
the recorded environment itself (:mod:`openenv_gym.runtime.serving`).

Where the module is found (:class:`AppTarget`):

* ``--app MODULE:ATTR``: an importable module (an env package installed with
  ``pip install -e envs/echo_env``: ``echo_env.server.app:app``);
* ``--app-dir DIR``: ``DIR/openenv.yaml``'s ``app:`` (``server.app:app``), imported with
  ``DIR`` first on ``sys.path``, as upstream's ``cd DIR && uvicorn server.app:app`` does.
  When that module reaches above its top-level package (``from ..models import ...``, as
  ``grid_world_env`` and ``finqa_env`` do, which upstream runs as
  ``envs.grid_world_env.server.app``), ``DIR`` is imported as the package it is, from its
  parent directory.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from openenv_gym.exceptions import AppError
from openenv_gym.runtime.loader import EnvModels, mcp_accepts

__all__ = [
    "FACTORIES",
    "AppTarget",
    "OpenEnvApp",
    "app_models",
    "load_app",
    "recorded",
]

logger = logging.getLogger("openenv_gym.runtime")

FACTORIES = ("create_app", "create_fastapi_app", "create_web_interface_app")
"""OpenEnv's app factories, by name: each is recorded, in every module that holds it."""

_HOMES = (
    "openenv.core.env_server.http_server",
    "openenv.core.env_server.web_interface",
    "openenv.core.env_server",
    "openenv.core",
    "openenv",
)
"""Where the factories are defined and re-exported (openenv 0.10 and openenv-core 0.3)."""

_DEFAULT_APP = "server.app:app"
"""What upstream's images run when ``openenv.yaml`` names no ``app``."""

_BEYOND_TOP = ("beyond top-level package", "no known parent package")
"""What Python says when a relative import reaches above the module's top-level package."""


# --------------------------------------------------------------------------- target


@dataclass(frozen=True, slots=True)
class AppTarget:
    """Which app module to import, and from where.

    Attributes:
        module: The module's dotted name (``server.app``).
        attr: The app's name in it (``app``).
        paths: Directories put first on ``sys.path`` (in this order) before the import.
        cwd: The working directory the app expects (``--app-dir``: the directory, as
            upstream's ``cd``); None: leave it.
        fallback: Where to import the module from instead when it reaches above its
            top-level package (``--app-dir`` of a directory that is a package).
        appended: Directories put last on ``sys.path``: ``--app-dir``'s parent, so that
            the env imports under its package name too (``textarena_env.models``), as
            when it is installed (upstream's images install it).
    """

    module: str
    attr: str = "app"
    paths: tuple[str, ...] = ()
    cwd: str | None = None
    appended: tuple[str, ...] = ()
    fallback: AppTarget | None = field(default=None, compare=False)

    @property
    def spec(self) -> str:
        """``module:attr``."""
        return f"{self.module}:{self.attr}"

    @classmethod
    def parse(cls, text: str) -> AppTarget:
        """``MODULE:ATTR`` (``MODULE`` alone: ``ATTR`` is ``app``), as uvicorn takes it.

        >>> AppTarget.parse("echo_env.server.app:app").spec
        'echo_env.server.app:app'

        Raises:
            AppError: Not a dotted module name and an attribute name.
        """
        module, _, attr = text.strip().partition(":")
        attr = attr or "app"
        if not _dotted(module) or not attr.isidentifier():
            raise AppError(f"--app wants MODULE:ATTR (e.g. echo_env.server.app:app), got {text!r}")
        return cls(module, attr)

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> AppTarget:
        """The app of an env directory: ``openenv.yaml``'s ``app:``, else ``server.app:app``.

        Raises:
            AppError: No such directory, or an ``app:`` that is not ``MODULE:ATTR``.
        """
        root = Path(directory).expanduser().resolve()
        if not root.is_dir():
            raise AppError(f"--app-dir {str(directory)!r} is not a directory")
        declared = _yaml_value(root / "openenv.yaml", "app")
        try:
            plain = cls.parse(declared or _DEFAULT_APP)
        except AppError:
            raise AppError(
                f"{root / 'openenv.yaml'}: app: {declared!r} is not MODULE:ATTR"
            ) from None
        plain = replace(plain, paths=(str(root),), cwd=str(root))
        if (root / "__init__.py").is_file() and root.name.isidentifier():
            package = replace(
                plain, module=f"{root.name}.{plain.module}", paths=(str(root), str(root.parent))
            )
            plain = replace(plain, fallback=package, appended=(str(root.parent),))
        return plain

    def as_dict(self) -> dict[str, Any]:
        """The target as JSON values (its fallback dropped: it is the one that loaded)."""
        return {
            "module": self.module,
            "attr": self.attr,
            "paths": list(self.paths),
            "cwd": self.cwd,
            "appended": list(self.appended),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AppTarget:
        """The inverse of :meth:`as_dict`."""
        return cls(
            data["module"],
            data["attr"],
            tuple(data["paths"]),
            data["cwd"],
            appended=tuple(data.get("appended", ())),
        )

    def enter(self) -> None:
        """Put :attr:`paths` first on ``sys.path`` and change to :attr:`cwd` (this process)."""
        for path in reversed(self.paths):
            with contextlib.suppress(ValueError):
                sys.path.remove(path)
            sys.path.insert(0, path)
        sys.path.extend(path for path in self.appended if path not in sys.path)
        if self.cwd is not None:
            os.chdir(self.cwd)


def _dotted(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def _yaml_value(path: Path, key: str) -> str | None:
    """A top-level ``key: value`` of a small YAML file (``openenv.yaml``), None if absent."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(rf"^{re.escape(key)}\s*:\s*(.*?)\s*(?:#.*)?$", text, re.MULTILINE)
    if match is None:
        return None
    return match.group(1).strip("'\"") or None


# --------------------------------------------------------------------------- recording


@dataclass(frozen=True, slots=True)
class OpenEnvApp:
    """What one call of an OpenEnv app factory was given.

    Attributes:
        factory: Which factory was called (``create_app``...).
        env: The environment class, or a zero-argument factory of instances.
        action: The action model (what ``/schema`` publishes and actions are validated as).
        observation: The observation model.
        env_name: The ``env_name`` given (None: none).
        max_concurrent_envs: The native server's session limit (from ``concurrency_config``
            too); None when not given (the native server then takes one session).
        state: The state model given (``state_cls``, openenv >= 0.4), None if none.
        mode: The server mode given (``mode``, openenv >= 0.7: ``"production"`` serves no
            HTTP ``/reset``, ``/step``, ``/state``), None if none.
        app: What the recorder returned in place of OpenEnv's app.
        routes: Routes the module added to that app (not served by our runtime).
    """

    factory: str
    env: Callable[[], Any]
    action: type[BaseModel]
    observation: type[BaseModel]
    env_name: str | None = None
    max_concurrent_envs: int | None = None
    state: type[BaseModel] | None = None
    mode: str | None = None
    app: Any = None
    routes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The environment's name: ``env_name``, else the class (or factory) name."""
        return self.env_name or str(getattr(self.env, "__name__", "env"))

    @property
    def env_class(self) -> type | None:
        """The environment class, when it can be told without making an instance.

        A class; a ``functools.partial`` of one; a function annotated to return one.
        """
        env: Any = self.env
        while isinstance(env, functools.partial):
            env = env.func
        if inspect.isclass(env):
            return env
        try:
            hinted = inspect.signature(env, eval_str=True).return_annotation
        except Exception:
            return None
        if hinted is inspect.Signature.empty or not inspect.isclass(hinted):
            return None
        return hinted


class _Recording:
    """The factory calls of one import (one import records at a time)."""

    lock = threading.Lock()
    calls: list[OpenEnvApp] | None = None
    depth = 0


def _stand_in(title: str) -> Any:
    """What a recorder returns: a bare FastAPI app (the module may add routes to it)."""
    try:
        fastapi = importlib.import_module("fastapi")
    except ImportError:  # pragma: no cover - every OpenEnv line depends on FastAPI
        return _NoApp(title)
    return fastapi.FastAPI(title=title, docs_url=None, redoc_url=None, openapi_url=None)


@dataclass
class _NoApp:
    title: str
    routes: list[Any] = field(default_factory=list)


def _recorder(original: Callable[..., Any], name: str) -> Callable[..., Any]:
    """``original``, recording its calls (and not making its app) inside :func:`load_app`."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def record(*args: Any, **kwargs: Any) -> Any:
        calls = _Recording.calls
        if calls is None:  # outside load_app: OpenEnv's own factory
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)  # a wrong call fails as OpenEnv's would
        bound.apply_defaults()
        given = bound.arguments
        app = _stand_in(f"{name} (recorded by openenv-gym)")
        calls.append(
            OpenEnvApp(
                factory=name,
                env=given.get("env"),  # type: ignore[arg-type]
                action=given.get("action_cls"),  # type: ignore[arg-type]
                observation=given.get("observation_cls"),  # type: ignore[arg-type]
                env_name=given.get("env_name"),
                max_concurrent_envs=_limit(given),
                state=given.get("state_cls"),
                mode=_mode(given.get("mode")),
                app=app,
            )
        )
        return app

    record.__openenv_gym_recorder__ = original  # type: ignore[attr-defined]
    return record


def _mode(mode: Any) -> str | None:
    """A ``ServerMode`` member or string as its lower-case value (None stays None)."""
    if mode is None:
        return None
    return str(getattr(mode, "value", mode)).lower()


def _limit(given: dict[str, Any]) -> int | None:
    limit = given.get("max_concurrent_envs")
    config = given.get("concurrency_config")
    if limit is None and config is not None:
        limit = getattr(config, "max_concurrent_envs", None)
    return limit if isinstance(limit, int) else None


@contextlib.contextmanager
def recorded() -> Iterator[list[OpenEnvApp]]:
    """Record OpenEnv's app factory calls made inside the block (their list, in order).

    Every OpenEnv module that holds a factory gets a recorder in its place for the block
    (a module imported in the block keeps it, and calls OpenEnv's factory outside any
    block). A factory that calls another records once, as the outer call.

    Raises:
        AppError: OpenEnv is not installed.
    """
    originals = _factories()
    with _Recording.lock:
        calls: list[OpenEnvApp] = []
        _Recording.calls = calls
        swapped = _swap(originals)
        try:
            yield calls
        finally:
            _Recording.calls = None
            _swap_back(swapped)


def _factories() -> dict[int, tuple[str, Callable[..., Any]]]:
    """Id -> (name, OpenEnv's factory) of each factory OpenEnv defines."""
    found: dict[int, tuple[str, Callable[..., Any]]] = {}
    imported = False
    for home in _HOMES:
        try:
            module = importlib.import_module(home)
        except ImportError:
            continue
        imported = True
        for name in FACTORIES:
            factory = getattr(module, name, None)
            factory = getattr(factory, "__openenv_gym_recorder__", factory)
            if callable(factory):
                found[id(factory)] = (name, factory)
    if not imported:
        raise AppError(
            "hosting an OpenEnv app needs OpenEnv in this Python: pip install openenv "
            "(or openenv-core)"
        )
    return found


_Swapped = list[tuple[Any, str, Any]]


def _swap(originals: dict[int, tuple[str, Callable[..., Any]]]) -> _Swapped:
    """Put a recorder wherever an OpenEnv module holds a factory; what was replaced."""
    recorders = {key: _recorder(fn, name) for key, (name, fn) in originals.items()}
    swapped: _Swapped = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("openenv"):
            continue
        for name in FACTORIES:
            held = vars(module).get(name)
            recorder = recorders.get(id(held))
            if recorder is not None:
                setattr(module, name, recorder)
                swapped.append((module, name, held))
    return swapped


def _swap_back(swapped: _Swapped) -> None:
    for module, name, original in swapped:
        setattr(module, name, original)


# --------------------------------------------------------------------------- loading


def load_app(target: AppTarget) -> tuple[OpenEnvApp, AppTarget]:
    """Import ``target``'s module with the factories recorded; what its app was given.

    The target's :attr:`~AppTarget.paths` are put first on ``sys.path`` (its ``cwd`` is not
    entered: :meth:`AppTarget.enter` does both). A module imported before is imported again.

    Returns:
        The recorded call that built ``target.attr``, and the target that imported (its
        fallback, if the module reached above its top-level package).

    Raises:
        AppError: The module cannot be imported (its error chained), or it builds no app
            with an OpenEnv factory, or one without an environment and models.
    """
    for path in reversed(target.paths):
        if path not in sys.path:
            sys.path.insert(0, path)
    sys.path.extend(path for path in target.appended if path not in sys.path)
    if target.paths:
        _check_not_elsewhere(target.module, target.paths)
    before = set(sys.modules)
    try:
        calls, module = _import_recorded(target.module)
    except ImportError as exc:
        if target.fallback is not None and any(text in str(exc) for text in _BEYOND_TOP):
            _forget_modules(set(sys.modules) - before, target.paths)
            logger.info(
                "%s reaches above its top-level package: importing it as %s",
                target.module,
                target.fallback.module,
            )
            return load_app(target.fallback)
        raise AppError(f"cannot import {target.module!r}: {exc}") from exc
    except AppError:
        raise
    except Exception as exc:
        raise AppError(f"importing {target.module!r} raised {exc!r}") from exc
    return _pick(target, module, calls), replace(target, fallback=None)


def _import_recorded(name: str) -> tuple[list[OpenEnvApp], Any]:
    with recorded() as calls:
        loaded = sys.modules.get(name)
        module = importlib.reload(loaded) if loaded is not None else importlib.import_module(name)
    return calls, module


def _check_not_elsewhere(name: str, paths: tuple[str, ...]) -> None:
    """Refuse a module already imported from another directory than ``paths``.

    ``server.app`` of one env directory is not ``server.app`` of another, and the modules
    it imported (``models``...) would be the other's: one app module of a name per process.
    """
    where = getattr(sys.modules.get(name), "__file__", None)
    if not where:
        return
    path = Path(where).resolve()
    entry = path.parents[name.count(".") + (path.name == "__init__.py")]
    if str(entry) not in {str(Path(p).resolve()) for p in paths}:
        raise AppError(
            f"this process imported {name!r} from {entry} already: it cannot import another "
            f"{name!r} (one app module of a name per process)"
        )


def _forget_modules(names: set[str], paths: tuple[str, ...]) -> None:
    """Drop the modules a failed import left behind from ``paths`` (to import them anew)."""
    roots = tuple(str(Path(p).resolve()) for p in paths)
    for name in names:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", [])), "")
        if where and str(Path(where).resolve()).startswith(roots):
            del sys.modules[name]


def _pick(target: AppTarget, module: Any, calls: list[OpenEnvApp]) -> OpenEnvApp:
    """The recorded call behind ``module.<attr>``, checked."""
    if not hasattr(module, target.attr):
        built = f"; it called {', '.join(c.factory for c in calls)}" if calls else ""
        raise AppError(f"module {target.module!r} has no attribute {target.attr!r}{built}")
    app = getattr(module, target.attr)
    chosen = next((c for c in calls if c.app is app), None)
    if chosen is None and len(calls) == 1:
        chosen = calls[0]
        logger.warning(
            "%s is a %s, not the app create_app returned: hosting the environment that "
            "app was made for",
            target.spec,
            type(app).__name__,
        )
    if chosen is None:
        factories = " or ".join(FACTORIES)
        if not calls:
            raise AppError(
                f"{target.spec} is a {type(app).__module__}.{type(app).__qualname__} that no "
                f"OpenEnv app factory ({factories}) built: nothing to host"
            )
        raise AppError(
            f"{target.spec} is a {type(app).__qualname__}, and the module built "
            f"{len(calls)} OpenEnv apps: cannot tell which one it serves"
        )
    _check(target, chosen)
    extra = _added_routes(chosen.app)
    if extra:
        logger.warning(
            "%s adds routes our runtime does not serve: %s", target.spec, ", ".join(extra)
        )
    return replace(chosen, routes=extra)


def _check(target: AppTarget, app: OpenEnvApp) -> None:
    """What the factory was given is an environment factory and two models (as recorded)."""
    problems = []
    given: tuple[Any, Any, Any] = (app.env, app.action, app.observation)
    if not callable(given[0]):
        problems.append(f"env is {type(given[0]).__name__!r}, not a class or factory")
    for what, model in (("action_cls", given[1]), ("observation_cls", given[2])):
        if not (inspect.isclass(model) and issubclass(model, BaseModel)):
            problems.append(f"{what} is {model!r}, not a Pydantic model")
    if problems:
        raise AppError(f"{target.spec}: {app.factory} was given " + "; ".join(problems))


def _added_routes(app: Any) -> tuple[str, ...]:
    """``METHOD /path`` of every route the module added to the recorder's app."""
    shown = []
    for route in getattr(app, "routes", ()):
        path = getattr(route, "path", None)
        methods = sorted(getattr(route, "methods", None) or ("WS",))
        if path is not None:
            shown.append(f"{'|'.join(methods)} {path}")
    return tuple(shown)


# --------------------------------------------------------------------------- models


def app_models(app: OpenEnvApp) -> EnvModels:
    """The models the runtime validates and publishes, as OpenEnv's server does.

    ``/schema`` publishes the action, observation and state models the factory was given
    (OpenEnv's base ``State`` when it was given none). Actions are validated as the action
    model; when that is OpenEnv's ``Action`` or one of its MCP actions, a ``{"type":
    "list_tools"}`` or ``{"type": "call_tool"}`` action becomes that MCP action (OpenEnv's
    ``deserialize_action``). A subclass of ``CallToolAction`` (upstream's finqa) is
    validated as itself, as upstream does: its server lists tools over MCP only.
    """
    env_server = _env_server_package(app.action)
    state: type[BaseModel]
    try:
        state = importlib.import_module(env_server + ".types").State
        accepts = mcp_accepts(env_server, app.action)
    except (ImportError, AttributeError):
        from openenv_gym.runtime.environment import State

        state, accepts = State, None
    if inspect.isclass(app.state) and issubclass(app.state, BaseModel):
        state = app.state
    return EnvModels(app.action, app.observation, state, accepts)


def _env_server_package(model: type) -> str:
    """``openenv.core.env_server`` (the package of OpenEnv's models) for ``model``."""
    for kind in model.__mro__:
        module = kind.__module__
        if module.startswith("openenv.") and ".env_server." in module:
            return module.rsplit(".", 1)[0]
    return "openenv.core.env_server"
