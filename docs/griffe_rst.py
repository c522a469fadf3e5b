"""A griffe extension for the API reference (mkdocs.yml): EchoMQ's docstrings are written for reading in
the source, with a few reStructuredText habits that Markdown would garble. Each docstring is rewritten,
for the site only, before mkdocstrings renders it:

* a role (``:class:`~echomq.bus.Bus```, ``:meth:`enqueue```, ``:mod:`echomq.finish```) becomes inline
  code of its target (the last part after ``~``), as Sphinx would display it, without a link;
* a paragraph that ends in ``::`` ends in ``:`` (the indented block after it is a Markdown code block);
* a simple table (rows of ``====  ====`` borders) is shown as preformatted text, as written (its roles
  and literals as plain text);
* inside a list, indentation is doubled: the docstrings indent a list item's continuation and a nested
  list by two spaces, Python-Markdown wants four.

The docstrings themselves stay as they are; nothing else changes.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")
BORDER = re.compile(r"^\s*=+(?: +=+)+\s*$")
ITEM = re.compile(r"^(?:[*-]|\d+\.) ")


def _target(match: re.Match[str], *, code: bool) -> str:
    short, target = match.groups()
    shown = target.rsplit(".", 1)[-1] if short else target
    return f"`{shown}`" if code else shown


LITERAL = re.compile(r"``([^`]+)``")


def _plain(line: str) -> str:
    """A line of a preformatted table: roles as their target, ``literals`` as their text, each padded to
    its written width so that the columns stay aligned."""
    line = ROLE.sub(lambda m: _target(m, code=False).ljust(len(m[0])), line)
    return LITERAL.sub(lambda m: m[1].ljust(len(m[0])), line)


def _tables(lines: list[str]) -> list[str]:
    """``lines`` with every simple table fenced as preformatted text."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not BORDER.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not (
            BORDER.match(lines[end]) and (end + 1 == len(lines) or not lines[end + 1].strip())
        ):
            end += 1
        out += ["", "```text", *(_plain(line) for line in lines[i : end + 1]), "```", ""]
        i = end + 1
    return out


def _lists(lines: list[str]) -> list[str]:
    """``lines`` with the indentation doubled inside each list (from a line that opens an item at the
    margin to the next line at the margin that does not), and a blank line before an item that follows
    an indented line."""
    out: list[str] = []
    in_list = False
    for line in lines:
        if line.strip() and not line[0].isspace():
            item = bool(ITEM.match(line))
            if item and in_list and out and out[-1][:1] == " ":
                out.append("")  # an item after an indented paragraph of the last: not a lazy continuation
            in_list = item
        indent = len(line) - len(line.lstrip(" "))
        out.append(" " * indent + line if in_list and line.strip() else line)
    return out


def rewrite(text: str) -> str:
    """The Markdown the site shows for a docstring ``text`` (see the module doc)."""
    lines = _lists(_tables(text.splitlines()))
    fenced = False
    out = []
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            line = ROLE.sub(lambda m: _target(m, code=True), line)  # noqa: PLW2901 (rewritten in place)
            if line.rstrip().endswith("::"):
                line = line.rstrip()[:-1]  # noqa: PLW2901
        out.append(line)
    return "\n".join(out)


class RstHabits(griffe.Extension):
    """Rewrites each docstring of the loaded package for Markdown (see the module doc)."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rewrite(obj.docstring.value)
