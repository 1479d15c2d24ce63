"""``patchkit analyse``: torch_npu's offline parse of captures taken with analysis off, then msprof-analyze.

The parse is torch_npu's own ``torch_npu.profiler.profiler.analyse``, run
in a child Python (the same interpreter and environment) so that its
process pool, its ``fork`` start method and its messages stay out of
patchkit's process.  It needs torch_npu, and CANN under it: elsewhere the
child says torch_npu does not import and :func:`parse` raises a TraceError
that says where to run it.  Captures that already hold
``ASCEND_PROFILER_OUTPUT`` are left as they are; when every capture of a
folder needs the parse, the folder is given to ``analyse`` at once (it
parses them in parallel).

The cluster analysis is ``msprof-analyze cluster -d FOLDER`` (the
optional extra ``patchkit-profiler[analysis]``), which writes
``FOLDER/cluster_analysis_output``.

Returns data; each line the tools print goes to an ``on_line`` callback.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import defaultdict
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.core.errors import Location, TraceError
from patchkit.traces.files import ASCEND_OUTPUT, check_ascend_capture, find

MSPROF = "msprof-analyze"
CLUSTER_OUTPUT = "cluster_analysis_output"
WHERE = ("run `patchkit analyse` where `python -c 'import torch_npu'` works: a training node (CANN installed) or "
         "the job's container; `patchkit summary` and `compare` then run anywhere")
MISSING, BROKEN, NO_EXPORT_TYPE = 3, 4, 5  # the child's exit statuses
_MARK = "patchkit-analyse: "  # the child's last line when it cannot parse
_CHILD = r"""
import inspect, sys
def say(code, text):
    print("patchkit-analyse: " + text, flush=True)
    sys.exit(code)
try:
    from torch_npu.profiler.profiler import analyse
except ImportError as exc:
    if (getattr(exc, "name", None) or "").split(".")[0] == "torch_npu" and isinstance(exc, ModuleNotFoundError):
        say(%(missing)d, "torch_npu is not installed in this environment (%%s)" %% sys.executable)
    say(%(broken)d, "torch_npu is installed but does not import: %%s: %%s" %% (type(exc).__name__, exc))
except Exception as exc:
    say(%(broken)d, "torch_npu is installed but does not import: %%s: %%s" %% (type(exc).__name__, exc))
kwargs = {}
if sys.argv[1]:
    if "export_type" not in inspect.signature(analyse).parameters:
        import torch_npu
        say(%(no_export)d, "torch_npu %%s's analyse() has no export_type (it came in 2.6.0, 2.5.1.post1 and "
                           "2.1.0.post13)" %% getattr(torch_npu, "__version__", "?"))
    kwargs["export_type"] = sys.argv[1]
for target in sys.argv[2:]:
    print("patchkit: torch_npu analyse(%%r)" %% target, flush=True)
    analyse(target, **kwargs)
""" % {"missing": MISSING, "broken": BROKEN, "no_export": NO_EXPORT_TYPE}


class Parsed(NamedTuple):
    folder: str
    state: str  # "parsed", "already parsed" or "failed"
    detail: str = ""


class ToolRun(NamedTuple):
    command: Tuple[str, ...]
    returncode: int
    output_dir: str
    tail: str = ""  # the last lines it printed


def capture_folders(path: str) -> List[str]:
    """The ``*_ascend_pt`` folders at or under ``path``; a TraceError when there is none."""
    folders = [c.path for c in find(path) if c.format == "ascend"]
    if not folders:
        raise TraceError("no torch_npu capture (*_ascend_pt folder) here; torch.profiler traces need no parse",
                         Location(path), hint=f"`patchkit summary {path}` reads torch.profiler traces as they are")
    for folder in folders:
        check_ascend_capture(folder)
    return folders


def is_parsed(folder: str) -> bool:
    out = os.path.join(folder, ASCEND_OUTPUT)
    return os.path.isdir(out) and bool(os.listdir(out))


def parse(folders: Sequence[str], export_type: Optional[str] = None,
          on_line: Optional[Callable[[str], None]] = None, python: str = sys.executable) -> List[Parsed]:
    """torch_npu's analyse on every folder not parsed yet; what became of each folder."""
    todo = [f for f in folders if not is_parsed(f)]
    done: Dict[str, Parsed] = {f: Parsed(f, "already parsed", f"{ASCEND_OUTPUT} is there; left as it is")
                               for f in folders if f not in todo}
    if todo:
        def relay(line: str) -> None:
            if on_line is not None and not line.startswith(_MARK):
                on_line(line)

        run = run_tool((python, "-c", _CHILD, export_type or "", *_targets(todo)), relay, "")
        last = run.tail.splitlines()[-1] if run.tail else ""
        if run.returncode in (MISSING, BROKEN, NO_EXPORT_TYPE) and last.startswith(_MARK):
            message = last[len(_MARK):]
            if run.returncode == NO_EXPORT_TYPE:
                raise TraceError(message, hint="leave --export-type out: analyse() then uses the export type each "
                                               "capture recorded")
            raise TraceError(f"the offline parse needs torch_npu and CANN: {message}", hint=WHERE)
        for folder in todo:
            ok = is_parsed(folder)
            why = "" if ok else (_error_line(run.tail) or f"torch_npu's analyse wrote no {ASCEND_OUTPUT} "
                                                           f"(exit status {run.returncode})")
            done[folder] = Parsed(folder, "parsed" if ok else "failed", why)
    return [done[f] for f in folders]


def _targets(todo: Sequence[str]) -> List[str]:
    """A parent folder where every capture it holds needs the parse (analyse() takes them in parallel), else each."""
    by_parent: Dict[str, List[str]] = defaultdict(list)
    for folder in todo:
        by_parent[os.path.dirname(folder)].append(folder)
    targets: List[str] = []
    for parent, group in by_parent.items():
        inside = {os.path.join(parent, n) for n in os.listdir(parent) if _torch_npu_takes(os.path.join(parent, n))}
        targets += [parent] if len(group) > 1 and inside == set(group) else group
    return targets


def _torch_npu_takes(folder: str) -> bool:
    """What analyse() of a parent folder parses: each subfolder holding FRAMEWORK/ or PROF_*/."""
    if not os.path.isdir(folder):
        return False
    names = os.listdir(folder)
    return "FRAMEWORK" in names or any(n.startswith("PROF_") for n in names)


def _error_line(tail: str) -> str:
    errors = [line.strip() for line in tail.splitlines() if "ERROR" in line or "Error" in line]
    return errors[-1] if errors else ""


def msprof_path() -> Optional[str]:
    """The ``msprof-analyze`` command on PATH, if it is installed."""
    return shutil.which(MSPROF)


def cluster(folder: str, on_line: Optional[Callable[[str], None]] = None,
            tool: Optional[str] = None) -> Optional[ToolRun]:
    """``msprof-analyze cluster -d FOLDER``; None when msprof-analyze is not installed."""
    exe = tool or msprof_path()
    if exe is None:
        return None
    return run_tool((exe, "cluster", "-d", folder), on_line, os.path.join(folder, CLUSTER_OUTPUT))


def run_tool(command: Sequence[str], on_line: Optional[Callable[[str], None]], output_dir: str) -> ToolRun:
    """Run a tool, passing each line it prints (stdout and stderr) to ``on_line``."""
    lines: List[str] = []
    try:
        proc = subprocess.Popen(list(command), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace")
    except OSError as exc:
        return ToolRun(tuple(command), 127, output_dir, f"cannot run {command[0]}: {exc.strerror or exc}")
    assert proc.stdout is not None
    with proc.stdout:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            del lines[:-40]
            if on_line is not None:
                on_line(lines[-1])
    code = proc.wait()
    return ToolRun(tuple(command), code, output_dir, "\n".join(lines))
