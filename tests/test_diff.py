"""patchkit.engine.diff: unified diffs that `git apply` and `patch -p1` take, byte for byte difflib's hunks."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import patchkit
from patchkit.engine.diff import NO_EOL, unified
from patchkit.engine.marks import split_lines

from conftest import FIXTURES

DEMO = Path(__file__).resolve().parent.parent / "patchkit" / "demo"
COMMON = ["pass", "    return x", "        )", "x = 1", "    ", "#", "else:"]  # lines files have many times


def apply_patch(before: str, patch: str) -> str:
    """``patch`` applied to ``before`` line by line (lines split as patchkit splits them), checking every context line."""
    lines, out, at = split_lines(before), [], 0
    body = split_lines(patch)[2:]
    k = 0
    while k < len(body):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n$", body[k])
        assert m, body[k]
        start = int(m.group(1)) - (0 if m.group(2) == "0" else 1)
        out += lines[at:start]
        at, k = start, k + 1
        while k < len(body) and not body[k].startswith("@@"):
            line = body[k]
            if k + 1 < len(body) and body[k + 1] == NO_EOL:
                line, k = line[:-1], k + 1  # the newline the patch adds after a last line that has none
            if line[0] in " -":
                assert lines[at] == line[1:], (at, lines[at], line)
                at += 1
            if line[0] in " +":
                out.append(line[1:])
            k += 1
    return "".join(out + lines[at:])


def check(before: str, after: str, context: int = 3) -> str:
    """The diff of ``before`` -> ``after``, checked to give ``after`` back when applied to ``before``."""
    patch = unified(before, after, "pkg/mod.py", context)
    assert apply_patch(before, patch) == after if patch else before == after
    return patch


def insert(lines, at_lines):
    """``lines`` with ``{index: [new lines]}`` inserted (indexes into the original)."""
    out = list(lines)
    for at in sorted(at_lines, reverse=True):
        out[at:at] = at_lines[at]
    return out


# ---------------------------------------------------------------- generated cases

def varied_lines(draw, rnd, size):
    """Lines with varied content, many blank or repeated ones (popular past 200 lines) or none."""
    blank = draw(st.sampled_from([0.0, 0.15, 0.4, 0.9]))
    repeated = draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
    common = COMMON[: draw(st.integers(1, len(COMMON)))]
    return [("" if rnd.random() < blank else rnd.choice(common) if rnd.random() < repeated
             else f"v{k} = f({rnd.randrange(99)})") for k in range(size)], []


def copied_lines(draw, rnd, size):
    """Where difflib may match a run of lines to a copy of it elsewhere: short runs (lines mostly followed by
    a blank line, or by one of a few separators used about 4 times each, popular or not depending on the
    size) and short blocks found 2-4 times; also the places inside each block's first copy, to split it."""
    seps = [""] if draw(st.booleans()) else [f"# {k}" for k in range(size // 8 + 1)]
    apart = draw(st.sampled_from([1.0, 0.9]))  # how often a line is followed by a separator
    blocks = [[f"b{m}.{k}" for k in range(rnd.randint(1, 3))] for m in range(draw(st.integers(1, 3)))]
    units = [[f"u{k}"] for k in range(size)]
    for block in blocks:
        for _ in range(rnd.randint(2, 4)):
            units.insert(rnd.randrange(size // 2 + 1), block)
    lines = []
    for unit in units:
        lines += unit
        if rnd.random() < apart:
            lines.append(seps[len(lines) % len(seps)])
    lines = lines[:size]
    return lines, [lines.index(block[0]) + 1 for block in blocks if block[0] in lines]


@st.composite
def edits(draw):
    """``(before, after, context)``: a file (small, or past difflib's 200-line autojunk threshold; \\n, \\r\\n,
    \\r or mixed endings, a final newline or not) and patchkit-like lines inserted in runs at 0, at the end,
    next to each other, close (hunks merge), far (they split), in copies of repeated blocks."""
    size = draw(st.one_of(st.integers(0, 12), st.integers(40, 120), st.integers(190, 420)))
    endings = draw(st.sampled_from([["\n"], ["\r\n"], ["\r"], ["\n", "\r\n", "\r"]]))
    rnd = random.Random(draw(st.integers(0, 2**32 - 1)))  # the bulk of the lines: too many to draw one by one
    bodies, spots = draw(st.sampled_from([varied_lines, copied_lines]))(draw, rnd, size)
    lines = [body + rnd.choice(endings) for body in bodies]
    if lines and draw(st.booleans()):
        lines[-1] = lines[-1].rstrip("\r\n") or "z"  # no newline at the end

    new = {}
    places = [st.just(0), st.just(size), st.integers(0, size)] + ([st.sampled_from(spots)] if spots else [])
    at = draw(st.one_of(places))
    same = draw(st.booleans())  # the same new line every time: popular new lines
    for n in range(draw(st.integers(1, 5))):
        body = "    _pk.hit()" if same else f"    _pk.hit({n})"
        new.setdefault(at, []).extend(f"{body}  # patchkit:r{k % 2}{rnd.choice(endings)}"
                                      for k in range(draw(st.integers(1, 3))))
        at = min(size, draw(st.one_of(places[2:])) if draw(st.booleans()) else
                 at + draw(st.sampled_from([0, 1, 2, 3, 5, 6, 7, 8, 30, 150])))
    after = insert(lines, new)
    if size in new and (not lines or lines[-1].endswith(("\n", "\r"))) and draw(st.booleans()):
        after[-1] = after[-1].rstrip("\r\n")  # a new last line without a newline
    return "".join(lines), "".join(after), draw(st.sampled_from([3, 3, 3, 0, 1, 2, 5]))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(edits())
def test_every_diff_applies_back_to_the_new_text(edit):
    before, after, context = edit
    patch = check(before, after, context)
    event("pure insertion" if not minus_lines(patch) else "lines shown removed")


def minus_lines(patch: str):
    return [line for line in patch.splitlines()[2:] if line.startswith("-")]


# ---------------------------------------------------------------- real files

def sample_files():
    return sorted(p for root in (DEMO, FIXTURES) for p in root.rglob("*.py"))


def test_sample_and_fixture_files_with_lines_inserted_here_and_there_show_insertions_only():
    checked = 0
    for path in sample_files():
        lines = split_lines(path.read_text(encoding="utf-8"))
        n = len(lines)
        before = "".join(lines)
        body = next((k + 1 for k, line in enumerate(lines) if line.lstrip().startswith("def ")), n // 2)
        placements = [{0: ["import _pk  # patchkit:t\n"]},
                      {n: ["_pk.done()  # patchkit:t\n"]},
                      {body: ["        _pk.enter()  # patchkit:t\n"], min(n, body + 4): ["        _pk.mid()  # patchkit:t\n"],
                       n // 2: ["    _pk.a()  # patchkit:t\n", "    _pk.b()  # patchkit:t\n"],
                       min(n, n // 2 + 7): ["    _pk.c()  # patchkit:t\n"], 2 * n // 3: ["    _pk.d()  # patchkit:t\n"]}]
        for new in placements:
            patch = check(before, "".join(insert(lines, new)))
            assert not minus_lines(patch), f"{path}: {minus_lines(patch)[:3]}"
            checked += 1
    assert checked > 250


@pytest.mark.parametrize("fixture, recipe", [
    ("verl-0.4", "verl-fsdp-update"), ("verl-0.6", "verl-megatron-update"), ("verl-0.9", "verl-engine-update"),
    ("sglang-0.5.5", "sglang-forward"), ("vllm-0.15", "vllm-decode"), ("vllm-ascend-0.23", "vllm-ascend-decode"),
    (DEMO / "sample", "verl-fsdp-update"),
])
def test_recipes_diffs_are_insertions_that_git_apply_takes(fixture, recipe, tmp_path):
    plan = patchkit.plan(patchkit.load(recipe), str(FIXTURES / fixture))
    changed = [f for f in plan.files if f.changes]
    assert changed
    for f in changed:
        patch = check(f.text, f.result.text)
        assert not minus_lines(patch), f.relpath
        copy = tmp_path / f.relpath
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(f.data)
        (tmp_path / "p.diff").write_text(unified(f.text, f.result.text, f.relpath), encoding="utf-8", newline="")
        done = subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert copy.read_bytes() == f.new_bytes()


# ---------------------------------------------------------------- beyond plain insertions

def test_lines_taken_out_or_changed_are_shown_removed():
    lines = [f"line {k}\n" for k in range(30)]
    before = "".join(lines)
    deleted = "".join(lines[:10] + lines[11:])
    changed = "".join(lines[:10] + ["line ten\n"] + lines[11:])
    replaced = "".join(insert(lines[:10] + lines[11:], {10: ["x = 1  # patchkit:r\n"]}))  # an older patch redone
    for after in (deleted, changed, replaced):
        text = check(before, after)
        assert text.startswith("--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ ")
        assert minus_lines(text) == ["-line 10"]


def test_a_stretch_copied_elsewhere_is_still_a_plain_insertion():
    before, after = "x\ny\nR\nx\ny\n", "x\nP  # patchkit:r\ny\nR\nP  # patchkit:r\nx\ny\n"
    assert not minus_lines(check(before, after))


def test_blank_lines_past_200_are_not_shown_removed_and_added_again():
    """difflib's autojunk would skip the popular blank line here and show 50 of them removed and added."""
    lines = [f"v{k} = {k}\n" for k in range(150)] + ["\n"] * 100
    before = "".join(lines)
    after = "".join(insert(lines, {200: ["P  # patchkit:r\n"], 201: ["Q  # patchkit:r\n"]}))
    text = check(before, after)
    assert not minus_lines(text)
    assert [ln for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")] == \
        ["+P  # patchkit:r", "+Q  # patchkit:r"]


def test_many_blank_lines_past_200_and_no_newline_at_the_end():
    lines = [line for k in range(300) for line in ([f"v{k} = {k}\n", "\n"] if k % 3 else [f"v{k} = {k}\n", "\n", "\n"])]
    before = "".join(lines)
    after = "".join(insert(lines, {0: ["A  # patchkit:r\n"], 101: ["B  # patchkit:r\n"], 104: ["C  # patchkit:r\n"],
                                   400: ["D  # patchkit:r\n"], len(lines): ["E  # patchkit:r"]}))
    text = check(before, after)
    assert not minus_lines(text)
    assert "+E  # patchkit:r\n\\ No newline at end of file\n" in text


TWENTY = "".join(f"{k}\n" for k in range(20))  # two insertions 6 lines apart: contexts touch, one hunk; 7: two


@pytest.mark.parametrize("before, after, hunks", [
    ("", "a  # patchkit:r\n", "@@ -0,0 +1 @@\n+a  # patchkit:r\n"),
    ("", "a  # patchkit:r\nb  # patchkit:r", "@@ -0,0 +1,2 @@\n+a  # patchkit:r\n+b  # patchkit:r\n" + NO_EOL),
    ("x\n", "a  # patchkit:r\nx\n", "@@ -1 +1,2 @@\n+a  # patchkit:r\n x\n"),
    ("x\n", "x\na  # patchkit:r\n", "@@ -1 +1,2 @@\n x\n+a  # patchkit:r\n"),
    ("x\ny", "a  # patchkit:r\nx\ny", "@@ -1,2 +1,3 @@\n+a  # patchkit:r\n x\n y\n" + NO_EOL),
    ("x\r\ny\r\n", "x\r\na  # patchkit:r\r\ny\r\n", "@@ -1,2 +1,3 @@\n x\r\n+a  # patchkit:r\r\n y\r\n"),
    (TWENTY, "".join(insert(split_lines(TWENTY), {5: ["A  # patchkit:r\n"], 11: ["B  # patchkit:r\n"]})),
     "@@ -3,12 +3,14 @@\n 2\n 3\n 4\n+A  # patchkit:r\n 5\n 6\n 7\n 8\n 9\n 10\n+B  # patchkit:r\n 11\n 12\n 13\n"),
    (TWENTY, "".join(insert(split_lines(TWENTY), {5: ["A  # patchkit:r\n"], 12: ["B  # patchkit:r\n"]})),
     "@@ -3,6 +3,7 @@\n 2\n 3\n 4\n+A  # patchkit:r\n 5\n 6\n 7\n@@ -10,6 +11,7 @@\n 9\n 10\n 11\n+B  # patchkit:r\n"
     " 12\n 13\n 14\n"),
])
def test_small_cases(before, after, hunks):
    assert check(before, after)
    assert unified(before, after, "m.py") == "--- a/m.py\n+++ b/m.py\n" + hunks


def test_no_change_is_no_diff():
    assert unified("", "", "m.py") == unified("x\n", "x\n", "m.py") == ""


def test_lines_that_look_like_headers_are_kept_as_they_are():
    """A removed "--x" or added "++x" line is content: its \\r\\n stays, and a missing newline is still marked."""
    text = unified("a\r\n--x\r\n", "a\r\n++y\r\n", "m.py")
    assert "\n---x\r\n+++y\r\n" in text
    assert unified("a\n--x", "a\n", "m.py").endswith("\n---x\n\\ No newline at end of file\n")


def test_importing_patchkit_diff_does_not_import_difflib():
    code = "import sys, patchkit.engine.diff; print('difflib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


def test_applying_again_with_new_settings_shows_each_old_line_replaced_in_place():
    """The file already holds this recipe's lines (and another recipe's): only this recipe's lines change."""
    body = [f"v{k} = {k}\n" for k in range(40)] + ["\n"] * 5
    before = "".join(insert(body, {0: ["import r  # patchkit:r\n"], 10: ["    s()  # patchkit:s\n", "    r(1)  # patchkit:r\n"],
                                   30: ["    r(1)  # patchkit:r\n"]}))
    after = "".join(insert(body, {0: ["import r  # patchkit:r\n"], 10: ["    s()  # patchkit:s\n", "    r(2)  # patchkit:r\n"],
                                  30: ["    r(2)  # patchkit:r\n"]}))
    text = check(before, after)
    assert minus_lines(text) == ["-    r(1)  # patchkit:r"] * 2
    assert "-    s()" not in text and "+    s()" not in text
