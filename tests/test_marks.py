"""marks: patchkit's own lines (each ends with ``  # patchkit:<recipe-id>``), found and taken out without a parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from patchkit.engine import marks
from patchkit.core.errors import TargetError

SOURCE = ("import os\n"
          "import patchkit.runtime as _patchkit_runtime  # patchkit:a\n"
          "def f():\n"
          "    _patchkit_runtime.start('a')  # patchkit:a\n"
          "    _patchkit_runtime.step('b')  # patchkit:b\n"
          "    return 1\n")


def test_split_lines_breaks_only_where_python_does():
    assert marks.split_lines("a\r\nb\rc\nd") == ["a\r\n", "b\r", "c\n", "d"]
    assert marks.split_lines("x = '\x0c'\ny\u2028z\n") == ["x = '\x0c'\n", "y\u2028z\n"]  # str.splitlines would break
    assert marks.split_lines("") == []


def test_newline_of_is_the_first_ending_found():
    assert marks.newline_of(["a", "b\r\n", "c\n"]) == "\r\n"
    assert marks.newline_of(["a\r", "b\n"]) == "\r"
    assert marks.newline_of(["no ending"]) == "\n"


@pytest.mark.parametrize("line,recipe,own", [
    ("    x()  # patchkit:a\n", None, True),
    ("    x()  # patchkit:a\r\n", "a", True),
    ("    x()  # patchkit:a\n", "b", False),
    ("    x()  # patchkit:ab\n", "a", False),
    ("  # patchkit:a\n", "a", False),  # nothing before the mark: not a line patchkit wrote
    ("    x()  # patchkit:Bad\n", None, False),  # ids are lower case
    ("    x() # patchkit:a\n", None, False),  # patchkit always writes two spaces
    ("    x()  # patchkit:a  \n", None, False),  # the mark ends the line
])
def test_is_own_line(line, recipe, own):
    assert marks.is_own_line(line, recipe) is own


def test_applied_ids_in_order_of_appearance():
    assert marks.applied_ids(SOURCE) == ["a", "b"]
    assert marks.applied_ids("x = 1  # see patchkit:a in the docs\n") == []


def test_strip_takes_out_one_recipe_or_all():
    assert marks.strip(SOURCE, "a") == ("import os\ndef f():\n    _patchkit_runtime.step('b')  # patchkit:b\n"
                                        "    return 1\n")
    assert marks.strip(SOURCE) == "import os\ndef f():\n    return 1\n"
    text = "x = 1\n"
    assert marks.strip(text) is text  # nothing to look at


def test_strip_keeps_crlf_and_a_last_line_without_ending():
    text = "a\r\nb()  # patchkit:a\r\nc"
    assert marks.strip(text) == "a\r\nc"


@given(st.lists(st.sampled_from(["x = 1", "    y()", "", "# comment", "z = '''a'''"]), max_size=8),
       st.sampled_from(["\n", "\r\n"]))
def test_strip_after_inserting_marked_lines_gives_the_text_back(body, newline):
    original = "".join(line + newline for line in body)
    patched = "".join(f"start()  # patchkit:r{newline}" + line + newline for line in body)
    assert marks.strip(patched, "r") == marks.strip(patched) == original
    assert marks.applied_ids(patched) == (["r"] if body else [])


def test_leftover_finds_a_hand_edited_line_by_its_number_on_disk():
    text = SOURCE + "x = 2  # was patchkit:a\n"
    assert marks.leftover(text, {"a"}, everything=False) == (7, "x = 2  # was patchkit:a\n")
    assert marks.leftover(SOURCE, {"a"}, everything=False) is None
    unmarked = SOURCE.replace("    _patchkit_runtime.step('b')  # patchkit:b\n", "    _patchkit_runtime.step('b')\n")
    assert marks.leftover(unmarked, {"a", "b"}, everything=True) == (5, "    _patchkit_runtime.step('b')\n")
    assert marks.leftover(unmarked, {"a"}, everything=False) is None  # b stays: its runtime calls may too


def test_kept_line_numbers_map_lines_after_the_strip_to_the_file():
    assert marks.kept_line_numbers(SOURCE, {"a"}) == [1, 3, 5, 6]
    assert marks.kept_line_numbers(SOURCE, {"a", "b"}) == [1, 3, 6]


def test_decode_reads_the_coding_cookie_and_the_byte_order_mark():
    assert marks.decode("# -*- coding: latin-1 -*-\nx = 'é'\n".encode("latin-1"), Path("f.py")) == (
        "# -*- coding: latin-1 -*-\nx = 'é'\n", "iso-8859-1")
    text, encoding = marks.decode(b"\xef\xbb\xbfx = 1\n", Path("f.py"))
    assert (text, encoding) == ("x = 1\n", "utf-8-sig")
    assert text.encode(encoding) == b"\xef\xbb\xbfx = 1\n"  # written back with its mark
    assert marks.decode(b"x = 1\n", Path("f.py")) == ("x = 1\n", "utf-8")


@pytest.mark.parametrize("data", [b"x = '\xff'\n", b"# coding: nope\nx = 1\n"])
def test_a_file_that_does_not_decode_names_itself(data):
    with pytest.raises(TargetError) as exc:
        marks.decode(data, Path("/site/pkg/f.py"))
    assert exc.value.where.path == "/site/pkg/f.py" and "cannot decode the file" in exc.value.message
    assert exc.value.hint


# ---------------------------------------------------------------- lines ending in the marker that patchkit did not write

def test_the_lines_patchkit_writes_are_its_own():
    from patchkit.engine import lines as codegen
    from patchkit.recipe.load import all_recipes

    for settings in all_recipes():
        header = "".join(line + "\n" for line in codegen.header_lines(settings))
        points = "".join(f"    {line}\n" for p in settings.active_points() for line in codegen.shown(settings, p)
                         if line != "<the statement>")
        assert marks.foreign_line("import os\n" + header + "def f():\n" + points) is None, settings.id
    assert marks.foreign_line(SOURCE) is None and marks.foreign_line("x = 1  # patchkit\n") is None
    earlier = ("try:  # patchkit:a\n    import patchkit.runtime as _patchkit_runtime  # patchkit:a\n"
               "except Exception as _patchkit_missing:  # patchkit:a\n"
               "    try: __import__(\"sys\").stderr.write(\"%s\" % (repr(_patchkit_missing),))  # patchkit:a\n"
               "    except Exception: pass  # patchkit:a\n")  # a header as an earlier patchkit wrote it
    assert marks.foreign_line(earlier) is None


@pytest.mark.parametrize("line", [
    "USER_FLAG = 1  # patchkit:verl-fsdp-update",  # the case: the user's own line with the marker
    "print('kept')  # patchkit:other-recipe",
    "    return compute(x)  # patchkit:a",
    "pass  # patchkit:a",  # the header's `pass`, but no header of recipe a in the file
    "if x: do()  # patchkit:a",
])
def test_a_marked_line_patchkit_does_not_write_is_found_with_its_place(line):
    text = "import os\n" + line + "\nx = 2\n"
    col = line.index("  # patchkit:") + 3
    assert marks.foreign_line(text) == (2, col, line.rsplit(":", 1)[1])
    assert marks.strip(text) == "import os\nx = 2\n"  # what patchkit would otherwise lose


def test_take_out_removes_only_the_lines_patchkit_writes_and_numbers_the_ones_it_keeps():
    mine = "TAU = 2 * 3.14  # patchkit:a\n"
    text = SOURCE.replace("def f():\n", mine + "def f():\n")
    new, kept = marks.take_out(text, {"a"})
    assert new == "import os\n" + mine + "def f():\n    _patchkit_runtime.step('b')  # patchkit:b\n    return 1\n"
    assert kept == [(2, "a")]
    assert marks.take_out(text, {"b"})[1] == [(3, "a")]  # kept whatever is taken out; numbered in the new text
    assert marks.take_out(SOURCE, {"a", "b"}) == (marks.strip(SOURCE), [])


def test_written_ids_leave_out_recipes_only_someone_s_own_lines_name():
    text = SOURCE + "x = 1  # patchkit:mine\n"
    assert marks.applied_ids(text) == ["a", "b", "mine"] and marks.written_ids(text) == ["a", "b"]
    assert [(n, rid) for n, _col, rid in marks.foreign_lines(text)] == [(7, "mine")]


def test_the_lines_revert_keeps_are_numbered_as_in_the_file():
    text = SOURCE + "x = 1  # patchkit:a\n"
    assert marks.leftover(text, {"a"}, False) is None  # a marked line is never a hand edit left over
    assert marks.kept_line_numbers(text, {"a"}, keep={7}) == [1, 3, 5, 6, 7]
    assert marks.kept_line_numbers(text, {"a"}) == [1, 3, 5, 6]
