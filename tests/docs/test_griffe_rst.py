"""The documentation site's reading of the docstrings (docs/griffe_rst.py): roles become inline code,
``::`` paragraphs end in ``:``, simple tables are fenced as written, and lists get the indentation
Python-Markdown needs; the text itself is kept."""

import importlib.util
from pathlib import Path

EXTENSION = Path(__file__).resolve().parents[2] / "docs" / "griffe_rst.py"
spec = importlib.util.spec_from_file_location("griffe_rst", EXTENSION)
assert spec is not None
assert spec.loader is not None
griffe_rst = importlib.util.module_from_spec(spec)
spec.loader.exec_module(griffe_rst)
rewrite = griffe_rst.rewrite


def test_a_role_becomes_inline_code_of_its_target_or_its_last_part_with_a_tilde():
    """``:class:`~a.b.C``` shows ``C``; ``:mod:`a.b``` shows ``a.b``."""
    text = "see :class:`~echomq.bus.Bus` and :mod:`echomq.finish`, :meth:`enqueue`."
    assert rewrite(text) == "see `Bus` and `echomq.finish`, `enqueue`."


def test_a_literal_block_marker_ends_its_paragraph_with_one_colon():
    """The indented block after it stays as it is: Markdown reads it as code."""
    text = "derives from :class:`E`::\n\n    E\n    ├── F"
    assert rewrite(text) == "derives from `E`:\n\n    E\n    ├── F"


def test_a_simple_table_is_fenced_as_written_with_plain_roles_and_literals_padded():
    """The columns stay aligned: a role or literal keeps its written width."""
    text = "\n".join(
        [
            "Keys:",
            "",
            "=========  ====",
            "key        type",
            "=========  ====",
            "``job``    hash",
            "=========  ====",
            "",
            "after",
        ]
    )
    lines = rewrite(text).splitlines()
    fence = lines.index("```text")
    assert lines[fence + 1 : fence + 6] == [
        "=========  ====",
        "key        type",
        "=========  ====",
        "job        hash",
        "=========  ====",
    ]
    assert lines[fence + 6] == "```"
    assert lines[-1] == "after"


def test_a_list_gets_four_space_indentation_and_a_blank_line_before_an_item_after_a_paragraph():
    """Two-space continuations and nested lists become four; text outside a list is untouched."""
    text = "\n".join(
        ["Intro", "", "* **One.** first", "  line two", "", "  1. nested", "", "  para", "* **Two.**", "Out"]
    )
    assert rewrite(text).splitlines() == [
        "Intro",
        "",
        "* **One.** first",
        "    line two",
        "",
        "    1. nested",
        "",
        "    para",
        "",
        "* **Two.**",
        "Out",
    ]


def test_text_inside_a_fence_is_left_alone():
    """A role inside a fenced block of the docstring is code, not a reference."""
    text = "```\n:class:`X`::\n```"
    assert rewrite(text) == text
