"""Reading one capture: steps, operators' self time, and what a cut-off or foreign file gets."""

from __future__ import annotations

import gzip
import json

import pytest

from patchkit.core.errors import TraceError
from patchkit.traces.read import Op, Step, read, self_times, steps_in
from patchkit.traces.files import Capture

from conftest import snapshot


def x(name, ts, dur, cat="cpu_op", tid=1):
    return {"ph": "X", "cat": cat, "name": name, "pid": 7, "tid": tid, "ts": ts, "dur": dur}


# One step of 100 us on thread 1: linear (40) holds addmm (30), which holds a copy (5); relu (20) alone.
# Thread 2 runs a second addmm (10) at the same time: threads do not nest into each other.
EVENTS = [
    x("ProfilerStep#3", 0, 100, cat="user_annotation"),
    x("aten::linear", 10, 40), x("aten::addmm", 12, 30), x("aten::copy_", 20, 5),
    x("aten::relu", 60, 20),
    x("aten::addmm", 15, 10, tid=2),
    x("PyTorch Profiler (0)", 0, 100, cat="Trace", tid=3),
    {"ph": "i", "name": "Record Window End", "ts": 100},
    {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "python"}},
]


def test_self_time_is_duration_less_the_events_nested_directly_on_the_same_thread():
    ops = {(o.name, o.kind): (o.calls, o.self_us) for o in self_times(EVENTS)}
    assert ops == {("aten::linear", "cpu_op"): (1, 10.0),  # 40 - addmm's 30
                   ("aten::addmm", "cpu_op"): (2, 35.0),  # (30 - copy's 5) + 10 on thread 2
                   ("aten::copy_", "cpu_op"): (1, 5.0),
                   ("aten::relu", "cpu_op"): (1, 20.0)}  # the step span and the profiler's own span are no operators
    assert [o.name for o in self_times(EVENTS)][:2] == ["aten::addmm", "aten::relu"]  # largest first


def test_steps_are_the_profiler_step_spans_by_number():
    events = EVENTS + [x("ProfilerStep#1", 200, 50, cat="user_annotation")]
    assert steps_in(events) == (Step(1, 50.0), Step(3, 100.0))


@pytest.mark.parametrize("suffix", [".pt.trace.json", ".pt.trace.json.gz"])
def test_a_torch_trace_reads_as_steps_and_operators(tmp_path, suffix):
    path = tmp_path / ("h_1.1" + suffix)
    text = json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}, indent=1)
    path.write_bytes(gzip.compress(text.encode()) if suffix.endswith(".gz") else text.encode())
    data = read(Capture(str(path), "torch"))
    assert data.steps == (Step(3, 100.0),) and data.ops[0] == Op("aten::addmm", "cpu_op", 2, 35.0)
    assert (data.steps_from, data.ops_from) == ("ProfilerStep# events", "trace events")


def test_a_truncated_trace_names_the_line_and_column_where_it_ends(tmp_path):
    path = tmp_path / "h_1.1.pt.trace.json"
    text = json.dumps({"traceEvents": EVENTS}, indent=1)
    path.write_text(text[: len(text) // 2])
    before = snapshot(tmp_path)
    with pytest.raises(TraceError) as caught:
        read(Capture(str(path), "torch"))
    where = caught.value.where
    assert where.path == str(path) and where.line == text[: len(text) // 2].count("\n") + 1 and where.col
    assert "cut off while written or copied" in caught.value.message and "patchkit collect" in caught.value.hint
    assert snapshot(tmp_path) == before


def test_a_truncated_compressed_trace_is_an_error(tmp_path):
    path = tmp_path / "h_1.1.pt.trace.json.gz"
    data = gzip.compress(json.dumps({"traceEvents": EVENTS}).encode())
    path.write_bytes(data[: len(data) - 12])
    with pytest.raises(TraceError, match="cut off"):
        read(Capture(str(path), "torch"))


@pytest.mark.parametrize("content, message", [
    ("", "the trace is empty"),
    ('{"traceEvents": {}}', "not a Chrome trace"),
    ('{"a": 1,, }', "not valid JSON"),
])
def test_files_that_are_no_trace_get_a_clear_error(tmp_path, content, message):
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(TraceError, match=message):
        read(Capture(str(path), "torch"))


# ---------------------------------------------------------------- torch_npu's parsed output

STEP_HEADER = ("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
               "Communication(Not Overlapped and Exclude Receive),Preparing")
OP_HEADER = "Device_id,OP Type,Core Type,Count,Total Time(us),Min Time(us),Avg Time(us),Max Time(us),Ratio(%)"


def parsed(tmp_path, **files):
    folder = tmp_path / "h_1_20260101000000000_ascend_pt"
    (folder / "FRAMEWORK").mkdir(parents=True)
    out = folder / "ASCEND_PROFILER_OUTPUT"
    out.mkdir()
    for name, text in files.items():
        (out / name.replace("_csv", ".csv").replace("_json", ".json").replace("_db", ".db")).write_text(text)
    return folder


def test_ascend_steps_add_computing_communication_not_overlapped_and_free(tmp_path):
    folder = parsed(tmp_path, step_trace_time_csv=f"{STEP_HEADER}\n0,5,70,10,5,15,20,100,0,10,1\n"
                                                   f"0,6,60.5,0,0,0,9.5,70,0,0,1\n",
                    op_statistic_csv=f"{OP_HEADER}\n0,MatMulV2,AI_CORE,4,40,9,10,11,50\n"
                                     f"0,Add,AI_VECTOR_CORE,8,80,9,10,11,50\n")
    data = read(Capture(str(folder), "ascend"))
    assert data.steps == (Step(5, 100.0), Step(6, 70.0))
    assert data.ops == (Op("Add", "AI_VECTOR_CORE", 8, 80.0), Op("MatMulV2", "AI_CORE", 4, 40.0))
    assert (data.steps_from, data.ops_from) == ("step_trace_time.csv", "op_statistic.csv")


def test_without_op_statistic_kernels_are_added_up_and_without_step_trace_the_host_steps_count(tmp_path):
    kernels = "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Num\n" \
              "3,0,aclnnMm_MatMul,MatMul,AI_CORE,1,7.5,0,20\n3,0,aclnnMm_MatMul,MatMul,AI_CORE,9,2.5,0,20\n"
    folder = parsed(tmp_path, kernel_details_csv=kernels, trace_view_json=json.dumps(EVENTS))
    data = read(Capture(str(folder), "ascend"))
    assert data.ops == (Op("aclnnMm_MatMul", "AI_CORE", 2, 10.0),) and data.ops_from == "kernel_details.csv"
    assert data.steps == (Step(3, 100.0),) and data.steps_from == "ProfilerStep# events of trace_view.json"


def test_a_cut_off_csv_row_names_its_line(tmp_path):
    folder = parsed(tmp_path, step_trace_time_csv=f"{STEP_HEADER}\n0,5,70,10,5,15,20,100,0,10,1\n0,6,60.5,0")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 3 and "4 of 11 fields: the file is cut off" in caught.value.message


def test_a_csv_without_the_columns_patchkit_reads_says_which_are_missing(tmp_path):
    folder = parsed(tmp_path, op_statistic_csv="OP Type,Count\nAdd,1\n")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 1
    assert "no 'Core Type', 'Total Time(us)' column (its columns: OP Type, Count)" in caught.value.message


def test_a_capture_not_parsed_yet_says_to_run_analyse(tmp_path):
    folder = tmp_path / "h_1_20260101000000000_ascend_pt"
    (folder / "FRAMEWORK").mkdir(parents=True)
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert "not parsed yet" in caught.value.message and f"patchkit analyse {tmp_path}" in caught.value.hint


def test_a_db_only_export_says_what_reads_it(tmp_path):
    folder = parsed(tmp_path, ascend_pytorch_profiler_0_db="", analysis_db="")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert "only the Db export" in caught.value.message and "export_type=text" in caught.value.hint


def test_an_empty_ascend_folder_is_a_copy_cut_short(tmp_path):
    folder = tmp_path / "h_1_20260101000000000_ascend_pt"
    folder.mkdir()
    with pytest.raises(TraceError, match="empty or was copied in part"):
        read(Capture(str(folder), "ascend"))


# ---------------------------------------------------------------- hostile input, and memory

@pytest.mark.parametrize("count", ["1e400", "nan", "inf", "-Infinity"])
def test_a_count_that_is_not_a_finite_number_is_refused_with_its_line(tmp_path, count):
    folder = parsed(tmp_path, op_statistic_csv=f"{OP_HEADER}\n0,MatMulV2,AI_CORE,4,40,9,10,11,50\n"
                                               f"0,Add,AI_VECTOR_CORE,{count},80,9,10,11,50\n")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 3 and caught.value.where.path.endswith("op_statistic.csv")
    assert f"Count is '{count}', not a finite number" in caught.value.message


def test_a_step_number_of_5000_digits_is_refused_in_a_csv_and_in_a_trace(tmp_path):
    folder = parsed(tmp_path, step_trace_time_csv=f"{STEP_HEADER}\n0,{'7' * 5000},70,10,5,15,20,100,0,10,1\n")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 2 and "Step has 5000 digits" in caught.value.message
    path = tmp_path / "h_1.1.pt.trace.json"
    path.write_text(json.dumps({"traceEvents": EVENTS + [x("ProfilerStep#" + "7" * 5000, 0, 1)]}, indent=1))
    with pytest.raises(TraceError) as caught:
        read(Capture(str(path), "torch"))
    line = path.read_text().splitlines().index(next(t for t in path.read_text().splitlines() if "7777" in t)) + 1
    assert caught.value.where.line == line and "numbered with 5000 digits" in caught.value.message


def test_a_csv_row_that_is_not_utf8_is_refused_with_its_line(tmp_path):
    folder = parsed(tmp_path, op_statistic_csv="")
    (folder / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv").write_bytes(
        f"{OP_HEADER}\n0,Add,AI_CORE,4,40,9,10,11,50\n".encode() + b"0,Mat\xffMul,AI_CORE,4,40,9,10,11,50\n")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 3 and "not UTF-8" in caught.value.message


def test_a_csv_line_longer_than_torch_npu_writes_is_refused_before_it_is_held(tmp_path):
    from patchkit.traces.read import LINE_LIMIT

    folder = parsed(tmp_path, step_trace_time_csv=f"{STEP_HEADER}\n0,5,70,10,5,15,20,100,0,10,1\n" + "7" * (3 * LINE_LIMIT))
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 3 and f"longer than {LINE_LIMIT:,} characters" in caught.value.message


def test_distinct_kernel_names_in_a_csv_are_bounded_as_a_trace_s_are(tmp_path):
    from patchkit.traces.selftime import OTHER, Names

    rows = "".join(f"3,0,kernel{n},MatMul,AI_CORE,1,1.5,0,20\n" for n in range(5))
    folder = parsed(tmp_path, kernel_details_csv="Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),"
                                                 f"Duration(us),Wait Time(us),Block Num\n{rows}")
    data = read(Capture(str(folder), "ascend"), names=Names(count=2))
    assert data.ops == (Op(OTHER[0], OTHER[1], 3, 4.5), Op("kernel0", "AI_CORE", 1, 1.5), Op("kernel1", "AI_CORE", 1, 1.5))
    assert data.note.startswith("3 event(s) have names past patchkit's bound")


def test_distinct_steps_in_step_trace_time_are_bounded(tmp_path, monkeypatch):
    import patchkit.traces.read as traceread

    monkeypatch.setattr(traceread, "MAX_NAMES", 2)
    rows = "".join(f"0,{n},70,10,5,15,20,100,0,10,1\n" for n in (1, 2, 2, 3))
    folder = parsed(tmp_path, step_trace_time_csv=f"{STEP_HEADER}\n{rows}")
    with pytest.raises(TraceError) as caught:
        read(Capture(str(folder), "ascend"))
    assert caught.value.where.line == 5 and "more than 2 distinct steps" in caught.value.message


def test_trace_view_json_is_read_once_for_steps_and_operators(tmp_path, monkeypatch):
    import patchkit.traces.read as traceread

    opened = []

    class Counted(traceread.TraceStream):
        def __iter__(self):
            opened.append(self.path)
            return super().__iter__()

    monkeypatch.setattr(traceread, "TraceStream", Counted)
    folder = parsed(tmp_path, trace_view_json=json.dumps(EVENTS))
    data = read(Capture(str(folder), "ascend"))
    assert data.steps == (Step(3, 100.0),) and data.ops[0] == Op("aten::addmm", "cpu_op", 2, 35.0)
    assert (data.steps_from, data.ops_from) == ("ProfilerStep# events of trace_view.json", "host events of trace_view.json")
    assert len(opened) == 1


# The process's own peak: VmHWM starts again at exec; ru_maxrss keeps the high-water mark of the process that
# started it (the test runner's), so it is the fallback where there is no /proc.
PEAK_MB = ("next((int(line.split()[1]) // 1024 for line in open('/proc/self/status') if line.startswith('VmHWM')), 0) "
           "if __import__('os').path.exists('/proc/self/status') else "
           "__import__('resource').getrusage(__import__('resource').RUSAGE_SELF).ru_maxrss // 1024")


def test_memory_is_bounded_by_the_summary_not_by_the_trace(tmp_path):
    """A trace of 57 MB (3.5 MB compressed) is summarised in the memory of a few thousand events: streaming, it
    never holds the file; the whole-file read it replaced took about five times the file's size."""
    import subprocess
    import sys

    path = tmp_path / "big.pt.trace.json.gz"
    event = ('{"ph": "X", "cat": "cpu_op", "name": "aten::op%d", "pid": 1, "tid": 1, "ts": %d.5, "dur": 2.0, '
             '"args": {"External id": %d, "Record function id": 0, "Ev Idx": %d, "Sequence number": 12345}},\n')
    size = 0
    with gzip.open(path, "wt", compresslevel=1) as out:
        out.write('{"traceEvents": [\n')
        for block in range(100):
            size += out.write("".join(event % (i % 50, 4 * i, i, i) for i in range(block * 3000, (block + 1) * 3000)))
        out.write('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, '
                  '"dur": 1200000}\n]}')
    code = ("import sys; from patchkit.traces.read import chrome_totals; s, o = chrome_totals(sys.argv[1]); "
            "print(len(s), sum(op.calls for op in o), " + PEAK_MB + ")")
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=300)
    steps, calls, peak_mb = map(int, done.stdout.split())
    assert (steps, calls) == (1, 300_000) and size > 55_000_000 and path.stat().st_size < 5_000_000
    assert peak_mb < 60, f"{peak_mb} MB for a trace of {size // 1_000_000} MB"
