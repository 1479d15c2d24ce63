"""``attach --auto``: watch a job's stacks, find its step, and write the recipe that records it.

:class:`Watching` gets into each process as an attach does (the same checks, the same way in, the same request
folder and channel) with a request to watch instead of a recipe: the agent starts
:mod:`patchkit.runtime.attach.watch`, which changes none of the job's code, and writes what it saw.
:func:`watch` waits for it (the watching time, plus the time to get in), then reads each process's watch
(:mod:`patchkit.attach.watchread`) before the folders go; an interrupt asks every watcher out and exits as
attach does.  :func:`found` finds each process's step (:mod:`patchkit.attach.stepfind`) on the job's own files,
read as a stranger's (:func:`patchkit.attach.autorecipe.source`), and :func:`chosen` the candidate to record:
``--pick`` (a number, a place or a function's name), or the one found; :func:`listing` says it all, one line
each; :func:`clear_first` puts the process whose recipe is written first, and :func:`agree` says each process
whose step differs from its.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from patchkit.attach import autorecipe, jobpath, payload, watchread
from patchkit.attach.passover import check_all, nothing_left
from patchkit.attach.process import AttachError
from patchkit.attach.session import Attached, Session
from patchkit.runtime.attach.protocol import State

if TYPE_CHECKING:
    from patchkit.attach import stepfind

WATCH_DEFAULT = 30.0  # seconds at most, unless --watch says otherwise
REQUEST = "patchkit-watch"  # the name a watch takes in this home's records (`attach --status`)
SHOWN = 10  # candidates listed for each process


class Watching(Session):
    """The processes of one ``attach --auto``, asked to watch for ``seconds`` at most."""

    def __init__(self, pids: Sequence[int], seconds: float):
        super().__init__(pids, REQUEST)
        self.seconds = seconds
        self.watches: Dict[int, watchread.Watch] = {}
        self.unread: Dict[int, str] = {}

    def prepare(self, pass_over: bool = False) -> None:
        """Each process's own checks (as attach makes them); nothing is planned: a watch carries no code."""
        from patchkit.engine.lines import LINES

        self.pass_over, self.passed = pass_over, []
        self.passed, targets = check_all(self.pids, LINES, pass_over)
        if not targets:
            raise nothing_left([(p.pid, p.why) for p in self.passed])
        self.spec = {"format": payload.FORMAT, "recipe": REQUEST, "lines": LINES, "save_path": "",
                     "watch": {"seconds": self.seconds}}
        self.attached = [Attached(t, spec=self.spec) for t in targets]

    def collect(self) -> None:
        """Each watched process's watch, read from its channel (before :meth:`close` removes it)."""
        for a in self.attached:
            if a.state != State.WATCHED or a.folder is None:
                continue
            try:
                got = watchread.read(a.folder.base)
            except watchread.Unreadable as exc:
                self.unread[a.pid] = str(exc)
                continue
            if got is None:
                self.unread[a.pid] = "it wrote no watch.json"
            else:
                self.watches[a.pid] = got


def watch(s: Watching, on_change: Optional[Callable[[Attached], None]] = None, timeout: float = 60) -> bool:
    """Get into every process of ``s`` (prepared) and wait until each has watched; False when interrupted (each
    watcher is asked out, nothing of the job's changed).  The watches are in ``s.watches``; the folders go."""
    try:
        s.inject()
        s.wait(on_change, timeout, until=(State.WATCHING,))
        s.wait(on_change, s.seconds + timeout)
        s.collect()
        return True
    except KeyboardInterrupt:
        try:
            s.detach(on_change, timeout=10)
        except KeyboardInterrupt:
            pass
        return False
    finally:
        s.close()


class Proposal(NamedTuple):
    pid: int
    found: "stepfind.Found"
    job: Optional[jobpath.JobPath]
    uid: int


def found(s: Watching) -> List[Proposal]:
    """Each watched process's candidates, found on its own files."""
    from patchkit.attach import stepfind
    from patchkit.attach.stepcalls import with_call_sites

    out = []
    for a in s.attached:
        w = s.watches.get(a.pid)
        if w is None:
            continue
        try:
            job: Optional[jobpath.JobPath] = jobpath.of(a.target.proc)
        except (AttachError, OSError, ValueError):
            job = None
        uid = a.target.proc.uid
        cache: Dict[str, Optional[str]] = {}

        def source_of(file: str, job=job, uid=uid, cache=cache) -> Optional[str]:
            if file not in cache:
                cache[file] = autorecipe.source(job, uid, file) if job is not None else None
            return cache[file]

        result = with_call_sites(stepfind.find(w, source_of), w, source_of)
        result = result._replace(candidates=tuple(
            c._replace(qualname=autorecipe.qualname_at(source_of(c.file) or "", _firstline(w, c), c.qualname))
            if "." not in c.qualname else c for c in result.candidates))
        out.append(Proposal(a.pid, result, job, uid))
    return out


def _firstline(w: watchread.Watch, c) -> int:
    """The ``co_firstlineno`` of the candidate's function (a loop's line is its own)."""
    return next((n for f, n, q in w.codes if f == c.file and q == c.qualname and n <= c.line), c.line)


def chosen(p: Proposal, pick: Optional[str]) -> Tuple[Optional[int], str]:
    """(the index of the candidate to record, why); None when there is none (``pick`` matching none: said).

    ``pick`` is a number of this listing (``K``), or what holds across watches: a place as listed
    (``FILE:LINE``, the file by its name or the end of its path) or a function's name (``micro_step``,
    ``Trainer.step``)."""
    cands = p.found.candidates
    if pick is None:
        return p.found.chosen, p.found.why
    if pick.isdigit():
        if not 1 <= int(pick) <= len(cands):
            return None, f"--pick {pick}: there are {len(cands)} candidate(s)"
        return int(pick) - 1, f"--pick {pick}"
    file, _, line = pick.rpartition(":")
    if file and line.isdigit():
        hits = [i for i, c in enumerate(cands) if c.line == int(line) and
                (c.file == file or c.file.endswith("/" + file.lstrip("/")))]
    else:
        hits = [i for i, c in enumerate(cands) if c.kind == "function" and
                (c.qualname == pick or c.qualname.endswith("." + pick))]
    if not hits:
        return None, (f"--pick {pick}: no candidate of this watch is at that place or has that name (a number, "
                      f"FILE:LINE or a function's name, as listed)")
    return hits[0], f"--pick {pick}"


def _seconds(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def candidate_lines(found, chosen: Optional[int]) -> List[str]:
    """The candidates as ``patchkit points`` shows places: number (``*`` the chosen), file:line, the code, the
    function, how often it repeats, how regularly, its share of the time, the repetitions seen, what each holds."""
    out = []
    for i, c in enumerate(found.candidates[:SHOWN]):
        mark = "*" if i == chosen else " "
        where = f"{os.path.basename(c.file)}:{c.line}"
        code = c.code if len(c.code) <= 40 else c.code[:37] + "..."
        out.append(f"  {i + 1:>2}{mark} {c.kind:<8} {where:<28} {code:<40}  in {c.qualname}")
        detail = (f"every {_seconds(c.period)} ({c.regularity:.0%} regular), {c.share:.0%} of the time, "
                  f"{c.repeats} {'turns' if c.kind == 'loop' else 'calls'} seen")
        out.append(f"       {detail}" + (f"; each holds {c.holds}" if c.holds else ""))
    if len(found.candidates) > SHOWN:
        out.append(f"  ... and {len(found.candidates) - SHOWN} more (--pick K or FILE:LINE takes any of them)")
    return out


def top_lines(found) -> List[str]:
    return [f"  {share:.0%}  {os.path.basename(file)}:{line}  in {qualname}" for file, line, qualname, share in
            found.top]


def listing(p: Proposal, i: Optional[int], why: str, w: watchread.Watch) -> List[str]:
    """What one process's watch says: how long it watched, its candidates, the one chosen and why (or why none,
    with where its time went)."""
    judged = f", judged by each {p.found.marker}" if p.found.marker else ""
    out = [f"pid {p.pid}: watched {w.last - w.first:.1f} s ({w.samples} looks, {w.cost:.1%} of its time; stopped: "
           f"{w.stopped}); {len(p.found.candidates)} candidate(s){judged}:"] + candidate_lines(p.found, i)
    if i is not None:
        return out + [f"pid {p.pid}: chosen {i + 1}: {why}"]
    out.append(f"pid {p.pid}: no step is clear: {why}")
    if p.found.top:
        out += ["  where its time went (the innermost frames of the job's own code):"] + top_lines(p.found)
    return out


def clear_first(props: Sequence[Proposal], index: Sequence[Optional[int]]) -> Tuple[List[Proposal],
                                                                                   List[Optional[int]]]:
    """The proposals (and their chosen indexes) with the first whose step is clear first: its recipe is written."""
    clear = [k for k, i in enumerate(index) if i is not None][:1]
    order = clear + [k for k in range(len(props)) if k not in clear]
    return [props[k] for k in order], [index[k] for k in order]


def agree(props: Sequence[Proposal], index: Sequence[Optional[int]]) -> List[str]:
    """One line for each process whose chosen place differs from the first's (ranks of one job run one step)."""
    if not props or index[0] is None:
        return []
    first = props[0].found.candidates[index[0]]
    out = []
    for p, i in zip(props[1:], index[1:]):
        c = p.found.candidates[i] if i is not None else None
        if c is None or (c.file, c.qualname, c.line) != (first.file, first.qualname, first.line):
            out.append(f"pid {p.pid}: its step is " + (f"{c.qualname} line {c.line}" if c else "not clear") +
                       f", not {first.qualname} line {first.line} as pid {props[0].pid}'s: the recipe is pid "
                       f"{props[0].pid}'s")
    return out
