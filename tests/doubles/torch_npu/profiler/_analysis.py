"""The double's stand-in for torch_npu's offline/online analysis.

Reads FRAMEWORK/double_events.json and profiler_info*.json of one *_ascend_pt
folder and writes ASCEND_PROFILER_OUTPUT/:
  Text: trace_view.json (chrome trace, JSON array) and, in torch_npu's column layout
        (see _text_views): operator_details.csv (CPU activity), kernel_details.csv,
        op_statistic.csv and step_trace_time.csv (NPU activity)
  Db:   ascend_pytorch_profiler[_<rank>].db (STRING_IDS, MSTX_EVENTS, PYTORCH_API) + empty analysis.db
Tests should assert on structure, not on numbers.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sqlite3

from torch_npu import _double

from ._text_views import write_text_views

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
FRAMEWORK_DIR = "FRAMEWORK"
_PROF_DIR_RE = re.compile(r"PROF_\d+_\d+_[0-9a-zA-Z]+")


def is_prof_dir(path):
    if not os.path.isdir(path):
        return False
    if os.path.isdir(os.path.join(path, FRAMEWORK_DIR)):
        return True
    return any(_PROF_DIR_RE.fullmatch(name) for name in os.listdir(path))


def find_info(prof_dir):
    files = sorted(glob.glob(os.path.join(prof_dir, "profiler_info*.json")))
    if not files:
        return {}
    with open(files[0], encoding="utf-8") as fh:
        return json.load(fh)


def device_id(prof_dir, info):
    """The rank the capture recorded (profiler_info_<rank>.json), standing in for the NPU's id; else 0."""
    rank = info.get("rank_id")
    if isinstance(rank, int):
        return rank
    for name in sorted(os.listdir(prof_dir)):
        match = re.fullmatch(r"profiler_info_(\d+)\.json", name)
        if match:
            return int(match.group(1))
    return 0


def rank_id():
    rank = os.environ.get("RANK")
    return rank if rank not in (None, "") else None


def _recorded_export_type(info):
    exp = (info.get("config") or {}).get("experimental_config") or {}
    return exp.get("_export_type") or ["text"]


def _as_list(export_type):
    if isinstance(export_type, str):
        return [export_type]
    return list(export_type)


def _load_raw(prof_dir):
    path = os.path.join(prof_dir, FRAMEWORK_DIR, "double_events.json")
    if not os.path.isfile(path):
        return {"traceEvents": [], "double_mstx": []}
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    if isinstance(data, list):
        data = {"traceEvents": data}
    return data


def analyse_prof_dir(prof_dir, export_type=None):
    """Analyse one *_ascend_pt folder; returns the output directory."""
    raw = _load_raw(prof_dir)
    info = find_info(prof_dir)
    types = _as_list(export_type if export_type else _recorded_export_type(info))
    out = os.path.join(prof_dir, OUTPUT_DIR)
    os.makedirs(out, exist_ok=True)
    events = raw.get("traceEvents", [])
    if "text" in types:
        with open(os.path.join(out, "trace_view.json"), "w", encoding="utf-8") as fh:
            json.dump(events, fh)
        write_text_views(out, events, info, device_id(prof_dir, info))
    if "db" in types:
        if not _double.get("cann_supports_db"):
            raise RuntimeError("Current CANN package version does not support export db")
        _write_db(out, events, raw.get("double_mstx", []))
    return out


def _write_db(out, events, mstx):
    rank = rank_id()
    name = f"ascend_pytorch_profiler_{rank}.db" if rank is not None else "ascend_pytorch_profiler.db"
    path = os.path.join(out, name)
    if os.path.exists(path):
        os.remove(path)
    strings = {}

    def sid(text):
        if text not in strings:
            strings[text] = len(strings) + 1
        return strings[text]

    con = sqlite3.connect(path)
    try:
        con.execute("CREATE TABLE STRING_IDS (id INTEGER, value TEXT)")
        con.execute("CREATE TABLE PYTORCH_API (startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId "
                    "INTEGER, name INTEGER, sequenceNumber INTEGER, fwdThreadId INTEGER, inputDtypes INTEGER, "
                    "inputShapes INTEGER, callchainId INTEGER, type INTEGER)")
        con.execute("CREATE TABLE MSTX_EVENTS (startNs INTEGER, endNs INTEGER, eventType INTEGER, rangeId "
                    "INTEGER, category INTEGER, message INTEGER, globalTid INTEGER, endGlobalTid INTEGER, "
                    "domainId INTEGER, connectionId INTEGER)")
        for ev in events:
            if ev.get("ph") != "X" or ev.get("cat") == "MsTx":
                continue
            start = int(float(ev.get("ts", 0)) * 1000)
            end = start + int(float(ev.get("dur", 0)) * 1000)
            tid = ev.get("tid") if isinstance(ev.get("tid"), int) else 0
            con.execute("INSERT INTO PYTORCH_API VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                        (str(start), str(end), tid, None, sid(str(ev.get("name", ""))), None, None, None,
                         None, None, None))
        range_id = 0
        for kind, message, domain, has_stream, t_ns, tid in mstx:
            range_id += 1
            con.execute("INSERT INTO MSTX_EVENTS VALUES (?,?,?,?,?,?,?,?,?,?)",
                        (t_ns, t_ns, {"mark": 0, "range_start": 2, "range_push": 2}.get(kind, 3), range_id,
                         None, sid(str(message)), tid, tid, sid(str(domain)), None))
        con.executemany("INSERT INTO STRING_IDS VALUES (?,?)", [(i, s) for s, i in strings.items()])
        con.commit()
    finally:
        con.close()
    sqlite3.connect(os.path.join(out, "analysis.db")).close()
    return path
