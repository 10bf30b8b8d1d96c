"""A griffe extension for the docs site: our docstrings' reST bits, as Markdown.

The docstrings are Google style, written for ``help()`` and doctest as much as for the site,
and they carry three reST habits that Markdown renders wrongly: Sphinx roles
(``:class:`~a.b.C```), bare doctest blocks (``>>>`` lines, which Markdown reads as nested
quotes) and literal-block markers (a paragraph ending in ``::``). This extension rewrites
them, on the site only, before mkdocstrings parses the docstring: a role becomes inline
code, a doctest block a ``pycon`` code fence, ``text::`` becomes ``text:`` (the indented
block after it is a Markdown code block already). Listed in ``mkdocs.yml`` under the
python handler's ``extensions``.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

__all__ = ["SphinxToMarkdown", "to_markdown"]

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|exc|data|obj|const):`(~?)([^`]+)`")


def _role(match: re.Match[str]) -> str:
    tilde, target = match.groups()
    return f"`{target.rsplit('.', 1)[-1] if tilde else target}`"


def _literal_marker(line: str) -> str:
    stripped = line.rstrip()
    if stripped.strip() == "::":
        return ""
    if stripped.endswith(" ::"):
        return stripped[:-3]
    if stripped.endswith("::"):
        return stripped[:-1]
    return line


def to_markdown(text: str) -> str:
    r"""Rewrite a docstring's Sphinx roles, bare doctests and ``::`` markers as Markdown.

    Doctests inside a Google ``Example:`` section are indented, so they are left to griffe,
    which renders that section's examples itself; so is anything inside a code fence.

    >>> to_markdown("See :class:`~openenv_gym.vector.OpenEnvVectorEnv`::")
    'See `OpenEnvVectorEnv`:'
    >>> to_markdown(">>> 1 + 1\n2\n\nDone.").splitlines()
    ['```pycon', '>>> 1 + 1', '2', '```', '', 'Done.']
    """
    out: list[str] = []
    in_fence = in_doctest = False
    for line in _ROLE.sub(_role, text).split("\n"):
        if in_doctest and not line.strip():
            out.append("```")
            in_doctest = False
        elif not in_doctest and line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and not in_doctest and line.startswith(">>>"):
            out.append("```pycon")
            in_doctest = True
        if not in_fence and not in_doctest:
            line = _literal_marker(line)
        out.append(line)
    if in_doctest:
        out.append("```")
    return "\n".join(out)


class SphinxToMarkdown(griffe.Extension):
    """Rewrites every docstring with :func:`to_markdown` once griffe has loaded the object."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring in place (griffe hook)."""
        if obj.docstring is not None:
            obj.docstring.value = to_markdown(obj.docstring.value)
