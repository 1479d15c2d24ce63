"""Reading traces: `patchkit summary` on generated torch traces of about 100 MB and 1 GB, against HTA's load.

Each trace is written into a temporary folder (deleted afterwards) in the
shape torch.profiler writes: ``ProfilerStep#N`` spans, nested ``cpu_op``
events with their ``cuda_runtime`` launches on the main thread, backward ops
on the autograd thread, kernels on two streams, ``ac2g`` flow events, in
torch's roughly-but-not-strictly sorted order.  Then, each as a whole
process, timed (wall seconds) and measured (peak resident memory, the
child's ``ru_maxrss``):

* ``patchkit summary TRACE``
* Holistic Trace Analysis loading it: ``TraceAnalysis(trace_dir=FOLDER)``
  (``pip install HolisticTraceAnalysis``; an optional bench-only package).

Goal on the 1 GB trace: peak memory under 300 MB, and no slower than HTA.

    python bench/traces.py            # 100 MB and 1 GB (needs ~1.2 GB of disk, a few minutes)
    python bench/traces.py --quick    # a few MB: the script still runs end to end
    python bench/traces.py --sizes 50 --no-hta
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import List, NamedTuple, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEMORY_GOAL_MB = 300
MB = 1000 * 1000

# ---------------------------------------------------------------- the trace

HEAD = """{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85045477376}],
  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 8},
  "record_shapes": 1,
  "traceEvents": [
"""
TAIL = """  {
    "name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": %.3f
  }
],
  "traceName": "rank0.pt.trace.json"
}
"""
CPU = ('  {\n    "ph": "X", "cat": "%s", "name": "%s", "pid": 4201, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
       '    "args": {\n      "External id": %d,"Record function id": 0, "Ev Idx": %d\n    }\n  },\n')
RUNTIME = ('  {\n    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4201, "tid": %d,\n'
           '    "ts": %.3f, "dur": %.3f,\n    "args": {\n      "External id": %d, "cbid": 211, "correlation": %d\n'
           '    }\n  },\n')
KERNEL = ('  {\n    "ph": "X", "cat": "kernel", "name": "%s", "pid": 0, "tid": %d,\n    "ts": %.3f, "dur": %.3f,\n'
          '    "args": {\n      "External id": %d, "queued": 0, "device": 0, "context": 1, "stream": %d,\n'
          '      "correlation": %d, "registers per thread": 128, "shared memory": 49152, "blocks per SM": 1.2,\n'
          '      "warps per SM": 4.8, "grid": [132, 1, 1], "block": [256, 1, 1], '
          '"est. achieved occupancy %%": 12\n    }\n  },\n')
FLOW = ('  {\n    "ph": "%s", "id": %d, "pid": %s, "tid": %d, "ts": %.3f,\n    "cat": "ac2g", "name": "ac2g"%s\n'
        '  },\n')
MAIN, BACKWARD, STREAMS = 4201, 4230, (7, 20)
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
ELEMENTWISE = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_"
               "scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)"
               "::{lambda()#1}::operator()() const::{lambda()#1}::operator()() const::{lambda(float)#1}, "
               "std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::launch_clamp_scalar)")
# One layer's ops: (name, depth, start, duration, launches a kernel); times in microseconds within the layer.
FORWARD = [("aten::linear", 0, 0.0, 38.0, None), ("aten::t", 1, 1.0, 4.0, None), ("aten::transpose", 2, 1.5, 2.5, None),
           ("aten::as_strided", 3, 2.0, 1.0, None), ("aten::addmm", 1, 6.0, 30.0, GEMM),
           ("aten::relu", 0, 40.0, 14.0, None), ("aten::clamp_min", 1, 41.0, 12.0, ELEMENTWISE)]
BACKWARD_OPS = [("autograd::engine::evaluate_function: AddmmBackward0", 0, 0.0, 60.0, None),
                ("AddmmBackward0", 1, 1.0, 55.0, None), ("aten::mm", 2, 3.0, 24.0, GEMM),
                ("aten::mm", 2, 30.0, 24.0, GEMM)]


class Written(NamedTuple):
    path: str
    size: int
    events: int
    steps: int
    seconds: float


def _step(step: int, ts: float, layers: int, ext: int):
    """One step's events in three parts, as kineto writes them: the CPU ops (sorted by start), the runtime's
    launches (written after every CPU op of the trace), the GPU's kernels (after those)."""
    layer_us, back_us = 60.0, 70.0
    step_us = layers * (layer_us + back_us) + 20.0
    cpu: List[str] = [CPU % ("user_annotation", f"ProfilerStep#{step}", MAIN, ts, step_us, ext, ext)]
    runtime: List[str] = []
    gpu: List[str] = []
    free = dict.fromkeys(STREAMS, ts)  # kernels on one stream run one after another
    t = ts + 10.0
    for ops, tid, span in ((FORWARD, MAIN, layer_us), (BACKWARD_OPS, BACKWARD, back_us)):
        for _layer in range(layers):
            for name, _depth, start, dur, kernel in ops:
                ext += 1
                cpu.append(CPU % ("cpu_op", name, tid, t + start, dur, ext, ext))
                if kernel:  # the launch, inside the op; its kernel on the next stream, once that stream is free
                    at = t + start + dur - 6.0
                    runtime.append(RUNTIME % (tid, at, 4.0, ext, ext))
                    runtime.append(FLOW % ("s", ext, "4201", tid, at, ""))
                    stream = STREAMS[len(gpu) // 2 % 2]
                    begin = max(at + 9.0, free[stream])
                    free[stream] = begin + dur * 0.8 + 1.0
                    gpu.append(KERNEL % (kernel, stream, begin, dur * 0.8, ext, stream, ext))
                    gpu.append(FLOW % ("f", ext, "0", stream, begin, ', "bp": "e"'))
            t += span
    return "".join(cpu), "".join(runtime), "".join(gpu), len(cpu) + len(runtime) + len(gpu), ts + step_us + 50.0, ext


def write_trace(path: str, target_bytes: int, layers: int = 48) -> Written:
    """A torch-shaped trace of about ``target_bytes``: as many steps of ``layers`` layers as it takes."""
    started = time.perf_counter()
    first = _step(1, 0.0, layers, 0)
    per_step = sum(len(part) for part in first[:3])
    steps = max(1, (target_bytes - len(HEAD)) // per_step)
    events = size = 0
    with open(path, "w", encoding="utf-8", buffering=1 << 22) as out:
        size += out.write(HEAD)
        for part in range(3):  # the same steps three times over: CPU ops, then launches, then kernels
            ts, ext = 1718000000000.0, 0
            for step in range(1, steps + 1):
                made = _step(step, ts, layers, ext)
                size += out.write(made[part])
                events += made[3] if part == 0 else 0
                ts, ext = made[4], made[5]
        size += out.write(TAIL % ts)
    return Written(path, size, events + 1, steps, time.perf_counter() - started)


# ---------------------------------------------------------------- measuring

class Run(NamedTuple):
    seconds: float  # wall clock
    cpu: float  # user + system seconds of the process
    peak_mb: float  # its peak resident memory (ru_maxrss)
    ok: bool
    why: str  # the last line it wrote to stderr, when it failed
    timed_out: bool = False  # stopped at the time limit: its figures are lower bounds


HTA_LOAD = """\
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
print(len(analysis.t.get_trace(0)), "events loaded")
"""


def measured(cmd: List[str], env: dict, timeout: float) -> Run:
    """Run ``cmd`` as a process of its own; its wall time, CPU time and peak memory (from wait4's rusage)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                return Run(time.perf_counter() - started, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024,
                           False, f"did not finish in {timeout:.0f} s (stopped; its figures are what it had used "
                                  "by then)", True)
            time.sleep(0.05)
        seconds = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = [line for line in err.read().decode("utf-8", "replace").splitlines() if line.strip()]
    why = "" if proc.returncode == 0 else (lines[-1] if lines else f"exit status {proc.returncode}")
    return Run(seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode == 0, why[:300])


def hta_version() -> Optional[str]:
    try:
        from importlib.metadata import version

        return version("HolisticTraceAnalysis")
    except Exception:  # not installed (an optional, bench-only package)
        return None


def figures(run: Optional[Run]) -> str:
    if run is None:
        return f"{'-':>8} {'-':>8} {'-':>9}"
    if not run.ok and not run.timed_out:
        return f"{'failed':>8} {'':>8} {'':>9}"
    more = ">" if run.timed_out else ""
    return f"{more + format(run.seconds, '.1f'):>8} {more + format(run.cpu, '.1f'):>8} " \
           f"{more + format(run.peak_mb, '.0f'):>9}"


def ratios(ours: Run, theirs: Optional[Run]) -> str:
    """patchkit / HTA, time and memory; against a load stopped at the time limit, upper bounds."""
    if not ours.ok or theirs is None or not (theirs.ok or theirs.timed_out):
        return ""
    less = "<" if theirs.timed_out else ""
    return f"{less}{ours.seconds / theirs.seconds:.3f}x, {less}{ours.peak_mb / theirs.peak_mb:.3f}x " \
           f"(HTA {'over ' if less else ''}{theirs.seconds / ours.seconds:.1f}x the time, " \
           f"{'over ' if less else ''}{theirs.peak_mb / ours.peak_mb:.0f}x the memory)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one trace of a few MB: checks the script runs")
    parser.add_argument("--sizes", type=float, nargs="+", default=[100, 1000], metavar="MB",
                        help="uncompressed sizes of the traces, in MB (default: 100 1000)")
    parser.add_argument("--no-hta", action="store_true", help="skip Holistic Trace Analysis")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds each load may take (default: 1800)")
    args = parser.parse_args(argv)
    sizes = [4.0] if args.quick else args.sizes
    hta = None if args.no_hta else hta_version()
    import ijson

    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    print(f"`patchkit summary TRACE` (ijson {ijson.__version__}, backend {ijson.backend}) against "
          + (f"Holistic Trace Analysis {hta} loading it, `TraceAnalysis(trace_dir=...)` (its default parser)" if hta
             else "no Holistic Trace Analysis (" + ("--no-hta" if args.no_hta else
                                                     "not installed: pip install HolisticTraceAnalysis") + ")"))
    import resource

    floor = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; each a process of its own: wall seconds, CPU "
          f"seconds (user + system), peak resident MB (its ru_maxrss from wait4, which counts from this script's "
          f"{floor:.0f} MB: Linux keeps the launcher's high-water mark across exec)")
    print(f"{'':27} | {'patchkit summary':^27} | {'HTA load':^27} |")
    print(f"{'trace':>9} {'events':>10} {'steps':>6} | {'wall s':>8} {'cpu s':>8} {'peak MB':>9} | "
          f"{'wall s':>8} {'cpu s':>8} {'peak MB':>9} | patchkit / HTA: time, memory")
    verdict = 0
    folder = tempfile.mkdtemp(prefix="patchkit-bench-traces-")
    try:
        home = os.path.join(folder, "home")
        os.mkdir(home, 0o700)
        env["PATCHKIT_HOME"] = home
        for mb in sizes:
            free = shutil.disk_usage(folder).free
            if free < 1.5 * mb * MB + 500 * MB:
                print(f"{mb:6.0f} MB: skipped, {free // MB} MB free in {tempfile.gettempdir()}")
                continue
            traces = os.path.join(folder, "traces")
            os.mkdir(traces)
            written = write_trace(os.path.join(traces, "rank0.pt.trace.json"), int(mb * MB))
            ours = measured([sys.executable, "-m", "patchkit", "summary", written.path], env, args.timeout)
            theirs = measured([sys.executable, "-c", HTA_LOAD, traces], env, args.timeout) if hta else None
            print(f"{written.size / MB:6.0f} MB {written.events:>10,} {written.steps:>6} | {figures(ours)} | "
                  f"{figures(theirs)} | {ratios(ours, theirs)}")
            for name, run in (("patchkit", ours), ("HTA", theirs)):
                if run is not None and not run.ok:
                    print(f"  {name}: {run.why}" if run.timed_out else f"  {name} failed: {run.why}")
            if not ours.ok:
                verdict = 1
            elif written.size >= 900 * MB:
                memory_ok = ours.peak_mb < MEMORY_GOAL_MB
                compared = theirs is not None and (theirs.ok or theirs.timed_out)
                time_ok = compared and ours.seconds <= theirs.seconds
                print(f"  goal on {written.size / MB:.0f} MB: peak {ours.peak_mb:.0f} MB < {MEMORY_GOAL_MB} MB: "
                      f"{'PASS' if memory_ok else 'FAIL'}; no slower than HTA: "
                      + ("PASS" if time_ok else "FAIL" if compared else "no HTA figure"))
                verdict = verdict or int(not memory_ok or (compared and not time_ok))
            shutil.rmtree(traces)
        if all(mb < 900 for mb in sizes):
            print(f"goal (peak < {MEMORY_GOAL_MB} MB and no slower than HTA) applies to the 1 GB trace: "
                  "run without --quick")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
