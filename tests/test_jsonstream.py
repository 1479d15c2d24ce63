"""A trace read as a stream: the same events as a whole read, and every damaged or hostile file a located error."""

from __future__ import annotations

import gzip
import json
import os
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from patchkit.traces import jsonstream
from patchkit.core.errors import TraceError
from patchkit.traces.jsonstream import MAX_DEPTH, TraceStream, _Reader, _too_deep

EVENTS = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 1.5, "dur": 3,
           "args": {"Input Dims": [[2, 3], [3, 4]], "note": "[{\"x\\\\"}},
          {"ph": "M", "name": "process_name", "args": {"name": "python"}}, 7, None]


def write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


@pytest.mark.parametrize("name, data", [
    ("t.json", json.dumps({"schemaVersion": 1, "traceEvents": EVENTS, "traceName": "x"}, indent=1)),
    ("t.json", json.dumps(EVENTS)),  # a bare list, as some tools write
    ("t.json.gz", gzip.compress(json.dumps({"traceEvents": EVENTS}).encode())),
    ("t.json", "\n\n   " + json.dumps({"traceEvents": EVENTS})),
])
def test_the_stream_gives_the_events_a_whole_read_gives(tmp_path, name, data):
    assert list(TraceStream(write(tmp_path, name, data))) == EVENTS


def test_a_large_file_is_read_in_chunks_and_an_event_is_found_by_its_text(tmp_path):
    events = [{"ph": "X", "name": f"op{i}", "ts": i, "dur": 1} for i in range(20_000)]
    path = write(tmp_path, "t.json", json.dumps({"traceEvents": events}, indent=1))
    stream = TraceStream(path)
    for e in stream:
        if e["name"] == "op15000":
            break
    line = next(i for i, text in enumerate(open(path), 1) if '"op15000"' in text)
    assert stream.where("op15000") == (path, line, 13)  # `   "name": "op15000"`
    assert stream.where('say "op15000"').line is not None  # written "say \\"op15000\\"" in JSON: not found, not failed
    assert stream.where("not there").line is not None


@pytest.mark.parametrize("data, message, line, col", [
    ("", "the trace is empty (0 events)", None, None),
    ("  \n\t \n", "the trace is empty (0 events)", None, None),
    ('{"traceEvents": [\n {"ph": "X"', "cut off while written or copied", 2, 12),
    ('{"traceEvents": [\n  {"a": 1},\n  x\n]}', "not valid JSON (lexical error: invalid char in json text)", 3, 3),
    ('{"traceEvents": [{"name": "a\x1bb"}]}', "invalid character inside string", 1, 29),
    (b'{"traceEvents": [\n{"name": "ok\xc3\xa9 \xff\xfe"}]}', "invalid bytes in UTF8 string", 2, 16),
    ('{"traceEvents": []} {"more": 1}', "not valid JSON (parse error: trailing garbage)", 1, None),
    ('{"traceEvents": [{"ts": ' + "9" * 5000 + "}]}", "not valid JSON (parse error: integer overflow)", 1, None),
    ('{"traceEvents": [{"ts": 1e400}]}', "numeric (floating point) overflow", 1, None),
    ('{"traceEvents": [{"ts": NaN}]}', "not valid JSON (lexical error: invalid char in json text)", 1, None),
    ('{"traceEvents": {}}', "not a Chrome trace: no traceEvents list", 1, None),
    ('{"other": [1, 2]}', "not a Chrome trace: no traceEvents list", 1, None),
    ('"a string"', "not a Chrome trace: no traceEvents list", 1, None),
    ("42", "not a Chrome trace: no traceEvents list", 1, None),
    ("[" * 200_000 + "]" * 200_000, f"the JSON nests deeper than {MAX_DEPTH} levels", 1, MAX_DEPTH + 1),
    ('{"traceEvents": [\n{"ph": "X", "args": ' + "[" * 200_000 + "]" * 200_000 + "}]}",
     f"the JSON nests deeper than {MAX_DEPTH} levels", 2, 21 + MAX_DEPTH - 3),
])
def test_a_damaged_or_hostile_file_is_a_located_error(tmp_path, data, message, line, col):
    path = write(tmp_path, "t.json", data)
    with pytest.raises(TraceError) as caught:
        list(TraceStream(path))
    where = caught.value.where
    assert message in caught.value.message and where.path == path and caught.value.hint
    if line is not None:
        assert where.line == line
    if col is not None:
        assert where.col == col


def test_an_error_far_into_the_file_names_its_own_line(tmp_path):
    lines = ['{"traceEvents": ['] + [json.dumps({"ph": "X", "name": "op", "ts": i}) + "," for i in range(9000)]
    lines += ['  {"ph": "X", "name": "op", "ts": 1,, "dur": 2}', "]}"]
    path = write(tmp_path, "t.json", "\n".join(lines))
    with pytest.raises(TraceError) as caught:
        list(TraceStream(path))
    assert (caught.value.where.line, caught.value.where.col) == (len(lines) - 1, 37)  # the second comma
    assert os.path.getsize(path) > 4 * jsonstream.CHUNK


def test_brackets_and_escaped_quotes_inside_strings_are_not_nesting(tmp_path):
    name = "[{" * 5000 + '\\"' + "[" * 300
    data = '{"traceEvents": [{"name": "%s", "ph": "X"}, {"name": "\\\\", "x": "]]]]"}]}' % name
    events = list(TraceStream(write(tmp_path, "t.json", data)))
    assert events[0]["name"] == json.loads('"%s"' % name) and events[1]["x"] == "]]]]"


@pytest.mark.parametrize("name, data, message", [
    ("t.json.gz", gzip.compress(json.dumps({"traceEvents": EVENTS * 500}).encode())[:-40],
     "the compressed trace is cut off"),
    ("t.json.gz", b'{"traceEvents": []}', "cannot read the trace: Not a gzipped file"),
    ("t.json.gz", gzip.compress(b"{}")[:10] + b"\x00" * 30, "cannot read the trace"),
])
def test_a_broken_compressed_file_is_an_error(tmp_path, name, data, message):
    with pytest.raises(TraceError, match=message):
        list(TraceStream(write(tmp_path, name, data)))


@pytest.mark.parametrize("name", ["gone.json", "gone.json.gz"])
def test_a_missing_file_is_an_error(tmp_path, name):
    with pytest.raises(TraceError, match="cannot read the trace: No such file"):
        list(TraceStream(str(tmp_path / name)))


# ---------------------------------------------------------------- the nesting scan, against the structure itself

TEXT = st.text(alphabet='[]{}"\\ab\n\t\u00e9', max_size=8)
VALUES = st.recursive(st.one_of(st.integers(), TEXT, st.none()),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                      max_leaves=30)


def depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(VALUES, st.lists(st.integers(1, 9), min_size=1, max_size=20), st.integers(1, 6))
def test_the_nesting_scan_sees_the_structure_whatever_the_chunks(monkeypatch_value, sizes, limit):
    data = json.dumps(monkeypatch_value, ensure_ascii=False, indent=1).encode("utf-8")
    saved, jsonstream.MAX_DEPTH = jsonstream.MAX_DEPTH, limit
    try:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "t.json")
            with open(path, "wb") as out:
                out.write(data)
            reader = _Reader(path)
            refused = None
            try:
                i = 0
                while reader.read(sizes[i % len(sizes)]):
                    i += 1
            except TraceError as exc:
                refused = exc.where
            finally:
                reader.close()
        assert (refused is not None) == (depth(monkeypatch_value) > limit)
        if refused is not None:
            at = _too_deep(data, 0, False, b"")
            assert (refused.line, refused.col) == (data.count(b"\n", 0, at) + 1, at - data.rfind(b"\n", 0, at))
    finally:
        jsonstream.MAX_DEPTH = saved
