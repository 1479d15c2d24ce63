"""Stand-ins for the analysis tests: small torch traces, and an ``msprof-analyze`` command.

``torch_trace(path, rank, step_us, mm_us)`` writes a Chrome trace whose steps
take what you say.  The ``msprof-analyze`` stand-in records how it was called,
writes where it was told and exits as set.

``msprof_analyze(tmp_path, monkeypatch)`` puts it first on PATH and returns the
log file: one JSON list of arguments per call.  ``FAKE_MSPROF_EXIT`` sets its
exit status.  It checks its arguments the way the real command line does
(msprof-analyze 26.2: ``cluster -d DIR``, ``compare -d DIR -bp DIR -o DIR``),
so a wrong call fails as it would for real.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap

SCRIPT = textwrap.dedent("""\
    import json, os, sys
    args = sys.argv[1:]
    with open(os.environ["FAKE_MSPROF_LOG"], "a") as log:
        log.write(json.dumps(args) + "\\n")
    print("msprof-analyze (stand-in) " + " ".join(args))
    def value(flag):
        return args[args.index(flag) + 1] if flag in args[:-1] else None
    code = int(os.environ.get("FAKE_MSPROF_EXIT", "0"))
    if args[:1] == ["cluster"]:
        if not value("-d") or not os.path.isdir(value("-d")):
            sys.exit("Error: Invalid value for '--profiling_path' / '-d'")
        if code == 0:
            os.makedirs(os.path.join(value("-o") or value("-d"), "cluster_analysis_output"), exist_ok=True)
    elif args[:1] == ["compare"]:
        for flag in ("-d", "-bp"):
            if not value(flag) or not os.path.exists(value(flag)):
                sys.exit("Error: Missing option or bad path for " + flag)
        if code == 0:
            os.makedirs(value("-o") or ".", exist_ok=True)
            open(os.path.join(value("-o") or ".", "performance_comparison_result_1.xlsx"), "w").close()
    else:
        sys.exit("Error: No such command " + repr(args[:1]))
    if code:
        print("[ERROR] the stand-in fails as asked")
    sys.exit(code)
""")


def msprof_analyze(tmp_path, monkeypatch, exit_code=0):
    folder = tmp_path / "fake-bin"
    folder.mkdir(exist_ok=True)
    tool = folder / "msprof-analyze"
    tool.write_text(f"#!{sys.executable}\n" + SCRIPT)
    tool.chmod(0o755)
    log = tmp_path / "msprof-calls.jsonl"
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_MSPROF_LOG", str(log))
    monkeypatch.setenv("FAKE_MSPROF_EXIT", str(exit_code))
    return log


def calls(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def x(name, ts, dur, cat="cpu_op"):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur}


def torch_trace(path, rank, step_us, mm_us, steps=(1, 2, 3)):
    """A trace whose steps each take ``step_us`` and hold one aten::mm of ``mm_us``."""
    events = []
    for n, number in enumerate(steps):
        t = n * 10 * step_us
        events += [x(f"ProfilerStep#{number}", t, step_us, cat="user_annotation"), x("aten::mm", t + 1, mm_us),
                   x("aten::add", t + 1 + mm_us, 2)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": events}))
    return path
