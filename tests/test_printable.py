"""Text from others, escaped for the terminal: no ESC, BEL, CR or newline reaches it raw."""

from __future__ import annotations

import json

import pytest

from patchkit.core.printable import printable


@pytest.mark.parametrize("raw, shown", [
    ("aten::addmm", "aten::addmm"),
    ("\x1b]0;owned\x07", "\\x1b]0;owned\\x07"),  # a title-setting sequence
    ("op\r\nrank 0: mean step 1.000 ms", "op\\x0d\\x0arank 0: mean step 1.000 ms"),  # a forged line
    ("\x1b[2J\x1b[H", "\\x1b[2J\\x1b[H"),  # clear the screen
    ("nul\x00tab\tdel\x7f", "nul\\x00tab\\x09del\\x7f"),
    ("csi\x9b31m", "csi\\x9b31m"),  # C1: a one-byte CSI for terminals that take 8-bit controls
    ("lone \udc80 surrogate", "lone \\udc80 surrogate"),  # would fail to encode on the way out
    ("abc\u202edcba", "abc\\u202edcba"),  # a right-to-left override reorders what follows
    ("a\u2028rank 0: b\u2029c", "a\\u2028rank 0: b\\u2029c"),  # line and paragraph separators: a forged line
    ("abc\u061cdef", "abc\\u061cdef"),  # the Arabic letter mark, a bidirectional control
    ("Élan 名前 ∑ café", "Élan 名前 ∑ café"),  # letters and symbols are kept
])
def test_control_characters_are_written_as_escapes(raw, shown):
    assert printable(raw) == shown


def test_what_it_prints_has_no_control_character_left_and_escaping_twice_changes_nothing():
    every = "".join(chr(c) for c in range(0x00, 0xA0)) + "\ud800\u2066\u2069\u2028\u2029\u061c"
    once = printable(every)
    assert all(0x20 <= ord(c) < 0x7F or ord(c) >= 0xA0 for c in once)
    assert len(once.splitlines()) == 1  # nothing str.splitlines (or a terminal) ends a line at
    assert printable(once) == once
    once.encode("utf-8")  # no lone surrogate left


def test_anything_is_made_text_and_json_needs_no_help():
    assert printable(12) == "12" and printable(None) == "None"
    assert "\\u001b" in json.dumps({"name": "\x1b[31m"})  # --json output escapes on its own


def test_traces_lists_a_file_name_with_control_characters_escaped(tmp_path):
    from click.testing import CliRunner

    from patchkit.cli.commands import main

    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "rank0\x1b]0;owned\x07\r.pt.trace.json").write_text('{"traceEvents": []}')
    result = CliRunner().invoke(main, ["traces", str(folder)])
    assert result.exit_code == 0, result.output
    assert not set(result.stdout) & set("\x1b\x07\r") and "rank0\\x1b]0;owned\\x07\\x0d.pt.trace.json" in result.stdout
