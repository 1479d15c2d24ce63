"""The double's text export: the CSV files torch_npu's parse writes, in torch_npu's column layout.

The double has no device.  It takes each computing host operator (a
``cpu_op`` event; views, reshapes and allocations launch no kernel) for
one kernel that starts with it on the NPU and runs for the operator's self
time (its time less that of the operators nested in it), and writes:

* ``kernel_details.csv``: one row per kernel.  Columns as torch_npu's
  KernelViewParser writes them: "Step Id" first when the profile had a
  schedule, then the op_summary columns renamed (Device_id, Name, Type,
  Accelerator Core, Start Time(us), Duration(us), Wait Time(us), Block Num);
  with aic_metrics set, the long op_summary layout instead.
* ``op_statistic.csv``: per (OP Type, Core Type): Count and Total/Min/Avg/Max
  Time(us), Ratio(%), as CANN's op_statistic summary.
* ``step_trace_time.csv``: per ProfilerStep#N: Computing, Communication,
  their overlap, Free, Stage, Bubble, Preparing (torch_npu's TraceStepTimeParser
  columns); Step is empty when there was no schedule.

These three need NPU in the activities (as in torch_npu).  With CPU in the
activities, ``operator_details.csv`` holds one row per host operator.
Times are microseconds.  Tests should assert on structure and on
relations between the files, not on the numbers.
"""

from __future__ import annotations

import csv
import os
import re
from collections import defaultdict

KERNEL_BASE = ["Device_id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)",
               "Block Num"]
KERNEL_ALL = ["Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "Accelerator Core", "Start Time(us)",
              "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim", "Input Shapes", "Input Data Types",
              "Input Formats", "Output Shapes", "Output Data Types", "Output Formats", "Context ID"]
OP_STATISTIC = ["Device_id", "OP Type", "Core Type", "Count", "Total Time(us)", "Min Time(us)", "Avg Time(us)",
                "Max Time(us)", "Ratio(%)"]
STEP_TRACE = ["Device_id", "Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication",
              "Free", "Stage", "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
OPERATOR_DETAILS = ["Name", "Input Shapes", "Call Stack", "Host Self Duration(us)", "Host Total Duration(us)",
                    "Device Self Duration(us)", "Device Total Duration(us)", "Device Self Duration With AICore(us)",
                    "Device Total Duration With AICore(us)"]
_STEP = re.compile(r"ProfilerStep#(\d+)$")
_COMM = re.compile(r"c10d::|allreduce|all_reduce|allgather|all_gather|broadcast|reduce_scatter|send|recv", re.I)
_NO_KERNEL = re.compile(r"::(_?unsafe_view|view|as_strided|resolve_conj|resolve_neg|empty|empty_strided|empty_like|"
                        r"reshape|_reshape_alias|expand|t|transpose|permute|detach_?|alias|slice|select|unsqueeze|"
                        r"squeeze|lift_fresh|unbind|split|chunk|narrow|numpy_T|to|_to_copy)$")
_CUBE = re.compile(r"mm|matmul|conv|linear|baddbmm|bmm", re.I)


def write_text_views(out, events, info, device_id):
    common = (info.get("config") or {}).get("common_config") or {}
    activities = common.get("activities") or []
    exp = (info.get("config") or {}).get("experimental_config") or {}
    ops, steps = _host_ops(events), _steps(events)
    if any(str(a).endswith("CPU") for a in activities):
        _write(os.path.join(out, "operator_details.csv"), OPERATOR_DETAILS, [
            [o["name"], o["shapes"], "", _r(o["self"]), _r(o["dur"]), _r(o["dev_self"]), _r(o["dev_total"]),
             _r(o["dev_self"]), _r(o["dev_total"])] for o in ops])
    if not any(str(a).endswith("NPU") for a in activities):
        return
    kernels = [dict(o, dur=o["self"], end=o["ts"] + o["self"]) for o in ops if o["kernel"]]
    long_layout = exp.get("_aic_metrics") not in (None, "ACL_AICORE_NONE")
    _write(os.path.join(out, "kernel_details.csv"), (["Step Id"] if steps else []) +
           (KERNEL_ALL if long_layout else KERNEL_BASE), _kernel_rows(kernels, steps, device_id, long_layout))
    _write(os.path.join(out, "op_statistic.csv"), OP_STATISTIC, _op_statistic(kernels, device_id))
    _write(os.path.join(out, "step_trace_time.csv"), STEP_TRACE, _step_trace(kernels, steps, device_id))


def _write(path, header, rows):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)


def _r(value):
    return round(value, 3)


def _steps(events):
    steps = {}
    for e in events:
        match = _STEP.match(str(e.get("name", "")))
        if e.get("ph") == "X" and match:
            steps.setdefault(int(match.group(1)), (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    return [(n,) + steps[n] for n in sorted(steps)]


def _host_ops(events):
    """cpu_op events with self and total time, whether each stands for a kernel, and the kernel time under each."""
    threads = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            threads[(str(e.get("pid")), str(e.get("tid")))].append(e)
    ops = []
    for spans in threads.values():
        spans.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        stack = []
        for e in spans:
            ts, dur = float(e["ts"]), float(e.get("dur", 0))
            op = {"name": str(e.get("name", "")), "ts": ts, "dur": dur, "end": ts + dur, "self": dur,
                  "dev_total": 0.0, "dev_self": 0.0, "tid": str(e.get("tid")),
                  "shapes": str((e.get("args") or {}).get("Input Dims", "")).replace(" ", "")}
            while stack and stack[-1]["end"] <= ts:
                stack.pop()
            if stack:
                stack[-1]["self"] -= min(dur, stack[-1]["end"] - ts)
            op["parents"] = list(stack)
            stack.append(op)
            ops.append(op)
    for op in ops:  # a kernel per computing operator, as long as its self time
        op["self"] = max(op["self"], 0.0)
        op["kernel"] = op["self"] > 0 and not _NO_KERNEL.search(op["name"])
        if op["kernel"]:
            op["dev_self"] = op["self"]
            for holder in [op] + op["parents"]:
                holder["dev_total"] += op["self"]
        del op["parents"]
    return sorted(ops, key=lambda o: o["ts"])


def _kind(name):
    base = name.split("::")[-1].strip("_")
    op_type = "".join(part[:1].upper() + part[1:] for part in base.split("_") if part) or "Unknown"
    if _COMM.search(name):
        return "hcom_" + op_type, "HCCL"
    return op_type, "AI_CORE" if _CUBE.search(base) else "AI_VECTOR_CORE"


def _step_of(ts, steps):
    for number, start, end in steps:
        if start <= ts < end:
            return number
    return None


def _kernel_rows(kernels, steps, device_id, long_layout):
    rows, last_end = [], {}
    for task, k in enumerate(kernels, 1):
        op_type, core = _kind(k["name"])
        wait = max(k["ts"] - last_end.get(k["tid"], k["ts"]), 0.0)
        last_end[k["tid"]] = k["end"]
        if long_layout:
            row = [device_id, 4294967295, task, 2, k["name"], op_type, core, _r(k["ts"]), _r(k["dur"]), _r(wait), 1,
                   0, k["shapes"] or "N/A", "N/A", "N/A", "N/A", "N/A", "N/A", "N/A"]
        else:
            row = [device_id, k["name"], op_type, core, _r(k["ts"]), _r(k["dur"]), _r(wait), 1]
        step = _step_of(k["ts"], steps)
        rows.append(([step if step is not None else ""] if steps else []) + row)
    return rows


def _op_statistic(kernels, device_id):
    groups = defaultdict(list)
    for k in kernels:
        groups[_kind(k["name"])].append(k["dur"])
    total = sum(sum(d) for d in groups.values()) or 1.0
    rows = [[device_id, op_type, core, len(d), _r(sum(d)), _r(min(d)), _r(sum(d) / len(d)), _r(max(d)),
             _r(100 * sum(d) / total)] for (op_type, core), d in groups.items()]
    return sorted(rows, key=lambda row: -row[4])


def _union(intervals):
    total, end = 0.0, None
    for start, stop in sorted(intervals):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total


def _step_trace(kernels, steps, device_id):
    spans = steps or ([("", min(k["ts"] for k in kernels), max(k["end"] for k in kernels))] if kernels else [])
    rows = []
    for number, start, end in spans:
        inside = [(max(k["ts"], start), min(k["end"], end), _kind(k["name"])[1]) for k in kernels
                  if k["ts"] < end and k["end"] > start]
        compute = [(a, b) for a, b, core in inside if core != "HCCL"]
        comm = [(a, b) for a, b, core in inside if core == "HCCL"]
        computing, communication = _union(compute), _union(comm)
        busy = _union(compute + comm)
        not_overlapped = busy - computing
        free = max((end - start) - busy, 0.0)
        first = min((a for a, _b, _c in inside), default=start)
        rows.append([device_id, number, _r(computing), _r(not_overlapped), _r(communication - not_overlapped),
                     _r(communication), _r(free), _r(end - start), 0, _r(not_overlapped), _r(first - start)])
    return rows
