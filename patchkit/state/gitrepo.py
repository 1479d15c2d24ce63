"""Target files in a git checkout: where the work tree is, uncommitted changes, patchkit's commits.

Finding a work tree (:func:`work_tree`) needs only :mod:`os.path`, so
commands on site-packages never import git.  Everything else goes through
gitpython, imported on first use.

``apply --commit`` puts a recipe's patch in one commit on a new branch
``patchkit/<recipe-id>`` made from the commit that was checked out, and
leaves the work tree on that branch.  ``revert`` takes the commit out
again: once patchkit has put the original bytes back in the files, HEAD
goes back to the branch (or detached commit) apply started from, the
index entries of the patched files are reset, and the branch is deleted;
no file is written by git.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from patchkit.core.errors import Location, TargetError

BRANCH_PREFIX = "patchkit/"


def work_tree(path) -> Optional[Path]:
    """The top of the git work tree that holds ``path`` (a ``.git`` found walking up), else None.  No git import."""
    here = os.path.abspath(os.fspath(path))
    if not os.path.isdir(here):
        here = os.path.dirname(here)
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return Path(here)
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


_repos: Dict[str, object] = {}


def _repo(top: Path):
    """A gitpython Repo for ``top``, or None when the ``.git`` there is not a usable repository."""
    key = str(top)
    if key not in _repos:
        try:
            import git
        except ImportError as exc:  # gitpython missing, or no git executable
            raise TargetError(f"{top} is a git work tree, but git cannot be used: {exc}", Location(key),
                              "install git and gitpython (`pip install gitpython`)") from None
        try:
            _repos[key] = git.Repo(key)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            _repos[key] = None
    return _repos[key]


def _git(top: Path, *args: str, raw: bool = False):
    """Run ``git args`` in ``top``; a failure is a TargetError quoting git's message."""
    import git

    repo = _repo(top)
    if repo is None:
        raise TargetError(f"{top} is not a git repository (any more)", Location(str(top)),
                          "check the checkout; patchkit's files are handled, only the git step was skipped")
    try:
        if raw:
            return repo.git.execute(["git", *args], stdout_as_string=False, strip_newline_in_stdout=False)
        return repo.git.execute(["git", *args])
    except git.GitCommandError as exc:
        said = (exc.stderr or exc.stdout or "").strip().replace("stderr: ", "").strip("'\n ")
        raise TargetError(f"`git {' '.join(args)}` failed in {top}: {said or exc.status}", Location(str(top)),
                          "fix the repository state, then run the command again") from None


def _ok(top: Path, *args: str) -> Optional[str]:
    """Output of ``git args``, or None when git exits non-zero."""
    repo = _repo(top)
    if repo is None:
        return None
    import git

    try:
        return repo.git.execute(["git", *args])
    except git.GitCommandError:
        return None


def _rel(top: Path, path) -> str:
    return Path(os.path.relpath(os.fspath(path), top)).as_posix()


def checkout_of(path) -> Tuple[Optional[Path], bool]:
    """``(top, tracked)``: the work tree holding ``path`` (None outside git) and whether git tracks the file."""
    top = work_tree(path)
    if top is None or _repo(top) is None:
        return None, False
    return top, bool(_ok(top, "ls-files", "--", _rel(top, path)))


def uncommitted(path, top: Optional[Path] = None) -> str:
    """git's two-letter status of a tracked file (``" M"``, ``"M "``, ...), or ``""`` when it is as committed."""
    top = top or work_tree(path)
    out = _git(top, "status", "--porcelain", "--untracked-files=no", "--", _rel(top, path))
    return out[:2] if out else ""


def committed(path, top: Optional[Path] = None) -> Optional[bytes]:
    """The file's bytes in HEAD, or None (not in HEAD, or no commit yet)."""
    top = top or work_tree(path)
    import git

    try:
        return _repo(top).git.execute(["git", "cat-file", "blob", f"HEAD:{_rel(top, path)}"],
                                      stdout_as_string=False, strip_newline_in_stdout=False)
    except git.GitCommandError:
        return None


def head(top: Path) -> Tuple[Optional[str], Optional[str]]:
    """``(branch, commit)`` checked out in ``top``; branch is None on a detached HEAD, commit None before the first commit."""
    branch = _ok(top, "symbolic-ref", "--quiet", "--short", "HEAD")
    return branch or None, _ok(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}") or None


def branch_tip(top: Path, branch: str) -> Optional[str]:
    return _ok(top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}") or None


def commit_on_branch(top: Path, branch: str, paths: Iterable[str], message: str) -> dict:
    """Commit ``paths`` (as they are in the work tree) on ``branch``: a new branch from HEAD, or HEAD's own branch.

    Hooks and signing are skipped: the commit is patchkit's local, throwaway
    record of the patch (a formatting hook would change the bytes revert
    must give back).  Returns what :func:`drop_commit` needs.
    """
    paths = sorted(set(paths))
    current, base = head(top)
    if base is None:
        raise TargetError(f"{top} has no commit yet; --commit needs one to branch from", Location(str(top)),
                          "commit the checkout first, or apply without --commit")
    made = current != branch
    if made:
        _git(top, "checkout", "--quiet", "-b", branch)
    try:
        _git(top, "commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", message, "--only", "--", *paths)
    except TargetError:
        if made:
            _back_to(top, current, base, paths)
            _git(top, "branch", "-D", branch)
        raise
    return {"work_tree": str(top), "branch": branch, "commit": head(top)[1], "previous": current,
            "previous_commit": base, "files": paths, "made": made}


def undo_commit(info: dict) -> None:
    """Take back what :func:`commit_on_branch` just did (the files already hold their earlier bytes)."""
    top = Path(info["work_tree"])
    if info["made"]:
        drop_commit(info)
        return
    _git(top, "update-ref", "-m", "patchkit: commit taken back", f"refs/heads/{info['branch']}", info["previous_commit"])
    _git(top, "reset", "--quiet", "--", *info["files"])


def _back_to(top: Path, branch: Optional[str], commit: str, paths: List[str]) -> str:
    """Point HEAD at ``branch`` (or detached ``commit``) without touching the work tree; reset the index of ``paths``."""
    _git(top, "update-ref", "--no-deref", "-m", "patchkit: back to the commit apply started from", "HEAD", commit)
    _git(top, "reset", "--quiet", "--", *paths)
    if branch is None:
        return f"detached HEAD at {commit[:10]}"
    if branch_tip(top, branch) == commit:
        _git(top, "symbolic-ref", "-m", f"patchkit: back to {branch}", "HEAD", f"refs/heads/{branch}")
        return branch
    if branch_tip(top, branch) is None:
        return f"detached HEAD at {commit[:10]} ({branch} no longer exists)"
    # the branch moved on while patchkit's branch was checked out: a real checkout, refused by git if it would lose changes
    if _ok(top, "checkout", "--quiet", branch) is None:
        return f"detached HEAD at {commit[:10]} (could not check out {branch}, which moved on; check it out yourself)"
    return branch


def drop_commit(info: dict) -> str:
    """Take out the commit of ``apply --commit`` (see :func:`commit_on_branch`); what was done, for the user.

    Call it after the files hold their original bytes again.  If HEAD is
    on patchkit's branch, HEAD goes back to where apply started and the
    branch is deleted.  If you checked out another branch since, you stay
    there and only patchkit's branch is deleted.  A branch with commits on
    top of patchkit's is kept.
    """
    top, branch, commit = Path(info["work_tree"]), info["branch"], info["commit"]
    if _repo(top) is None:
        return f"{top} is no longer a git work tree; nothing to do in git"
    tip = branch_tip(top, branch)
    current, _ = head(top)
    if tip is None:
        return f"branch {branch} is already gone"
    if commit is None:  # apply --commit stopped (killed) before it recorded its commit: patchkit's if it sits on the start
        base = info["previous_commit"]
        if tip == base or (_ok(top, "rev-parse", "--verify", "--quiet", f"{tip}^") == base
                           and (_ok(top, "log", "-1", "--format=%s", tip) or "").startswith("patchkit: apply ")):
            commit = tip
        else:
            return f"kept branch {branch}: patchkit cannot tell its commit from yours (tip {tip[:10]})"
    if tip != commit:
        return (f"kept branch {branch}: it has commits after patchkit's {commit[:10]} (tip {tip[:10]}); to drop "
                f"patchkit's commit from it: git rebase --onto {commit[:10]}^ {commit[:10]} {branch}")
    if current == branch:
        where = _back_to(top, info.get("previous"), info["previous_commit"], list(info.get("files", [])))
        _git(top, "branch", "-D", branch)
        return f"removed commit {commit[:10]} and branch {branch}; back on {where}"
    _git(top, "branch", "-D", branch)
    return f"removed branch {branch} (commit {commit[:10]}); the work tree stays on {current or 'a detached HEAD'}"


class History(NamedTuple):
    """Where a checkout's HEAD stands among the repository's tags (see :func:`history`)."""

    top: Path
    tag: Optional[str]  # the nearest tag in HEAD's history (git describe --tags), None without one
    distance: int  # commits from that tag to HEAD
    branch: Optional[str]  # None on a detached HEAD
    forked: Tuple[str, ...]  # tags on branches that left HEAD's history after ``tag`` (see history)


def source_top(root) -> Optional[Path]:
    """The top of the git work tree that holds ``root``, unless git ignores ``root`` or cannot read the repository."""
    top = work_tree(root)
    if top is None or _repo(top) is None:
        return None
    rel = _rel(top, root)
    if rel != "." and _ok(top, "check-ignore", "--quiet", rel) is not None:
        return None
    return top


def history(root, top: Optional[Path] = None) -> Optional[History]:
    """The nearest tag, the branch, and the releases made since on branches that left this history.

    Release tags often live on release branches: vLLM-Ascend tags v0.20.2rc1
    to v0.25.1rc1 on ``releases/...`` branches, so ``git describe`` on main
    still names v0.19.1rc1, the last tag made on main, 1600 commits back.
    ``forked`` lists the tags whose history shares a commit with HEAD that
    is newer than the nearest tag (their branch left HEAD's history after
    it), leaving out tags that contain HEAD itself (releases made later from
    this very commit's descendants).  A checkout with such tags is newer than
    its nearest tag says.  Three git commands, whatever the number of tags.

    None outside a git work tree, in a folder git ignores (a virtualenv
    inside a project does not take the project's history), or when git
    cannot read the repository.  ``top``: :func:`source_top` of ``root``, when the caller has it already.
    """
    top = top or source_top(root)
    if top is None:
        return None
    branch, commit = head(top)
    tag, distance = None, 0
    described = _ok(top, "describe", "--tags", "--long") if commit else None
    if described:  # v0.19.1rc1-1637-g182b75ea84 (a tag may hold dashes itself)
        tag, count, _ = described.rsplit("-", 2)
        distance = int(count)
    elif commit:
        distance = int(_ok(top, "rev-list", "--count", "HEAD") or 0)
    return History(top, tag, distance, branch, _forked(top, tag) if commit else ())


def _forked(top: Path, tag: Optional[str]) -> Tuple[str, ...]:
    """The tags that share a commit newer than ``tag`` with HEAD, without containing HEAD (see :func:`history`)."""
    outside = _ok(top, "rev-list", "--boundary", "--tags", "^HEAD") or ""
    edges = {line[1:] for line in outside.splitlines() if line.startswith("-")}  # commits of HEAD's that tags grew from
    if not edges:
        return ()
    since = set((_ok(top, "rev-list", f"refs/tags/{tag}..HEAD" if tag else "HEAD") or "").split())
    forks = sorted(edges & since)
    if not forks:
        return ()
    names = _ok(top, "for-each-ref", "--format=%(refname:strip=2)", "--no-contains=HEAD",
                *(f"--contains={c}" for c in forks), "refs/tags")
    return tuple(names.split()) if names else ()


def tracked(top: Path, paths: Iterable) -> Optional[set]:
    """Those of ``paths`` (absolute) that git tracks in ``top``, as given; None when git cannot tell
    (no usable repository there, or git refuses it: another user's checkout, say)."""
    paths = list(paths)
    rels = {_rel(top, p): p for p in paths}
    if not rels:
        return set()
    out = _ok(top, "ls-files", "-z", "--", *rels)
    if out is None:
        return None
    return {rels[name] for name in out.split("\0") if name in rels}
