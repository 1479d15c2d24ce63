"""PEP 440 version ranges (``>=0.4,<0.8``), matched with pre-releases allowed.

:func:`contains` is PEP 440 with pre-releases admitted (as for a version
already installed).  :func:`covers` is what a recipe's range means: a
pre-release or development release of X (``0.9.1rc1``, ``0.8.0.dev``) is
matched as X itself, because it carries X's code: a release candidate is
X's code, and a checkout of ``main`` whose version file says ``0.8.0.dev`` is
on the way to 0.8.0.  So ``>=0.4`` takes ``0.4.0.dev``, ``<0.8`` refuses
``0.8.0.dev`` and ``0.8.0rc1``, and ``>=0.6.1,<0.10`` takes ``0.9.1rc1``.
Only a clause whose bound is itself a pre-release of that same X
(``>=0.11.0rc2``) compares pre-releases one by one, in PEP 440 order.

Bounds are releases or pre-releases (``<0.8``, ``>=0.11.0rc1``, ``==1.2.*``,
``~=2.0``); candidates may be any version (post, dev and local included).

``packaging`` is not imported at all: ``packaging.specifiers`` pulls in
``packaging.tags`` (platform, subprocess, logging, sysconfig), and even
``packaging.version`` costs 3-4 ms, most of it compiling a large verbose
regular expression, which is a quarter of patchkit's start-up.  So versions
are parsed here by plain string handling (no ``re``), with PEP 440's
normalisation (any case, a leading ``v``, surrounding whitespace, ``.``/``-``/``_``
separators, alternate spellings, implicit numbers and post-releases, epochs,
local labels), and ordered by a sort key; the operators follow PEP 440 rule
for rule.  The test suite checks the parser and the order against
``packaging.version``, and the operators against ``packaging.specifiers``,
on many generated cases.
"""

from __future__ import annotations


class InvalidVersion(ValueError):
    """Not a PEP 440 version."""


def contains(specifiers: str, version: str) -> bool:
    """Whether ``version`` satisfies every clause of ``specifiers`` (pre-releases included)."""
    try:
        candidate = Version(version)
    except InvalidVersion:
        return False
    return all(_clause(clause.strip(), candidate, version) for clause in specifiers.split(",") if clause.strip())


def covers(specifiers: str, version: str) -> bool:
    """Whether the release lines in ``specifiers`` include ``version`` (see the module's docstring)."""
    try:
        candidate = Version(version)
    except InvalidVersion:
        return False
    line = _release_of(candidate) if candidate.is_prerelease else candidate
    for clause in (c.strip() for c in specifiers.split(",")):
        if not clause:
            continue
        op, text = _split(clause)
        if op == "===":
            chosen, raw = candidate, version
        else:
            bound = Version(text[:-2] if text.endswith(".*") else text)
            same = bound.pre is not None and bound.base_key == candidate.base_key
            chosen = candidate if same else line
            raw = str(chosen)
        if not _clause(clause, chosen, raw):
            return False
    return True


def has_upper_bound(specifiers: str) -> bool:
    """Whether ``specifiers`` caps versions from above (``<``, ``<=``, ``==``, ``~=``, ``===``)."""
    return any(_split(c.strip())[0] in ("<", "<=", "==", "~=", "===") for c in specifiers.split(",") if c.strip())


def _release_of(version: Version) -> Version:
    """``version`` without its pre-release and development parts: ``0.9.1rc1`` -> ``0.9.1``, ``1.0.post1.dev2`` -> ``1.0.post1``."""
    text = (f"{version.epoch}!" if version.epoch else "") + ".".join(map(str, version.release))
    if version.post is not None:
        text += f".post{version.post}"
    if version.local is not None:
        text += "+" + ".".join(map(str, version.local))
    return Version(text)


def check(specifiers: str) -> None:
    """Raise ValueError naming the first clause of ``specifiers`` that patchkit cannot match on."""
    clauses = [clause.strip() for clause in specifiers.split(",") if clause.strip()]  # as contains reads them
    if not clauses:
        raise ValueError("no version clause")
    for clause in clauses:
        op, text = _split(clause)
        if op == "===":
            if any(ch.isspace() for ch in text):
                raise ValueError(f"{clause!r}: === takes one string, without spaces")
            continue
        prefix = op in ("==", "!=") and text.endswith(".*")
        try:
            version = Version(text[:-2] if prefix else text)
        except InvalidVersion:
            raise ValueError(f"{clause!r}: {text!r} is not a PEP 440 version") from None
        if prefix and (version.pre or version.post is not None or version.dev is not None or version.local):
            raise ValueError(f"{clause!r}: a .* prefix is made of release numbers only")
        if op == "~=" and len(version.release) < 2:
            raise ValueError(f"{clause!r}: ~= needs at least two release numbers, e.g. ~=2.0")
        if op not in ("==", "!=") and version.local is not None:
            raise ValueError(f"{clause!r}: only == and != take a local version label")
        if op in ("<", "<=", ">", ">=") and (version.post is not None or version.dev is not None):
            raise ValueError(f"{clause!r}: patchkit ranges use release or pre-release bounds")


# -- parsing -----------------------------------------------------------------

_DIGITS = frozenset("0123456789")
_SEPARATORS = frozenset("._-")
_LOCAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
# (spelling, normalised label); the longer of two spellings sharing a start comes first ("alpha", "a")
_PRE_SPELLINGS = (("alpha", "a"), ("a", "a"), ("beta", "b"), ("b", "b"),
                  ("preview", "rc"), ("pre", "rc"), ("c", "rc"), ("rc", "rc"))
_POST_SPELLINGS = (("post", "post"), ("rev", "post"), ("r", "post"))
_DEV_SPELLINGS = (("dev", "dev"),)


class _Cursor:
    """Reads a lower-cased ASCII version string left to right.

    A part once read is kept, never given back to let a later part match: the quantifiers of
    packaging's regular expression are possessive, so it accepts exactly the same strings
    (``1.0a-1`` is ``1.0a1``, not ``1.0a0.post1``).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def at(self, chars, offset: int = 0) -> bool:
        return self.text[self.pos + offset: self.pos + offset + 1] in chars  # "" (the end) is in no set

    def take(self, word: str) -> bool:
        if self.text.startswith(word, self.pos):
            self.pos += len(word)
            return True
        return False

    def separator(self) -> None:
        if self.at(_SEPARATORS):
            self.pos += 1

    def number(self) -> int | None:
        start = self.pos
        while self.at(_DIGITS):
            self.pos += 1
        return int(self.text[start:self.pos]) if self.pos > start else None

    def labelled(self, spellings) -> tuple[str, int] | None:
        """``[sep] spelling [sep] [number]``, e.g. ``-beta.2`` -> ("b", 2); the number defaults to 0."""
        start = self.pos
        self.separator()
        for spelling, label in spellings:
            if self.take(spelling):
                self.separator()
                number = self.number()
                return label, 0 if number is None else number
        self.pos = start
        return None


def _parse(text: str) -> tuple:
    """``(epoch, release, pre, post, dev, local)`` of a PEP 440 version, normalised; InvalidVersion if not one."""
    stripped = text.strip() if isinstance(text, str) else ""
    if not stripped.isascii():  # only the surrounding whitespace may be non-ASCII
        raise InvalidVersion(f"Invalid version: {text!r}")
    cur = _Cursor(stripped.lower())
    cur.take("v")

    epoch = 0
    start = cur.pos
    number = cur.number()
    if number is not None and cur.take("!"):  # 1!2.0
        epoch = number
    else:
        cur.pos = start

    release = [cur.number()]
    if release[0] is None:
        raise InvalidVersion(f"Invalid version: {text!r}")
    while cur.at(".") and cur.at(_DIGITS, 1):
        cur.pos += 1
        release.append(cur.number())

    pre = cur.labelled(_PRE_SPELLINGS)
    if cur.at("-") and cur.at(_DIGITS, 1):  # implicit post-release: 1.0-1
        cur.pos += 1
        post = cur.number()
    else:
        post = cur.labelled(_POST_SPELLINGS)
        post = None if post is None else post[1]
    dev = cur.labelled(_DEV_SPELLINGS)
    dev = None if dev is None else dev[1]

    local = None
    if cur.take("+"):  # "+Ubuntu-1.07" -> ("ubuntu", 1, 7)
        parts, part = [], ""
        for char in cur.text[cur.pos:] + ".":  # the "." ends the last part
            if char in _LOCAL_CHARS:
                part += char
            elif char in _SEPARATORS and part:
                parts.append(int(part) if part.isdigit() else part)
                part = ""
            else:  # another character, or an empty part
                raise InvalidVersion(f"Invalid version: {text!r}")
        cur.pos = len(cur.text)
        local = tuple(parts)

    if cur.pos != len(cur.text):
        raise InvalidVersion(f"Invalid version: {text!r}")
    return epoch, tuple(release), pre, post, dev, local


# -- ordering ----------------------------------------------------------------

_PRE_RANK = {"a": 0, "b": 1, "rc": 2}


class Version:
    """A PEP 440 version; compares in PEP 440 order (``1.0.dev0 < 1.0a1 < 1.0 == 1.0.0 < 1.0+local < 1.0.post1``)."""

    __slots__ = ("epoch", "release", "pre", "post", "dev", "local", "key")

    def __init__(self, text: str) -> None:
        self.epoch, self.release, self.pre, self.post, self.dev, self.local = _parse(text)
        self.key = self._sort_key()

    def _sort_key(self) -> tuple:
        release = list(self.release)
        while release and release[-1] == 0:  # 1.0.0 == 1
            release.pop()
        if self.pre is not None:
            pre = (_PRE_RANK[self.pre[0]], self.pre[1])
        elif self.dev is not None and self.post is None:
            pre = (-1, 0)  # 1.0.dev0 comes before 1.0a0
        else:
            pre = (3, 0)  # a release comes after its pre-releases
        post = (0, 0) if self.post is None else (1, self.post)  # 1.0 < 1.0.post0
        dev = (1, 0) if self.dev is None else (0, self.dev)  # 1.0.post1.dev0 < 1.0.post1
        # no local label < any label; within one, parts compare in turn, a number above any word
        local = () if self.local is None else tuple((1, p) if isinstance(p, int) else (0, p) for p in self.local)
        return self.epoch, tuple(release), pre, post, dev, local

    @property
    def public_key(self) -> tuple:
        """The sort key with the local label left out."""
        return self.key[:-1] + ((),)

    @property
    def base_key(self) -> tuple:
        """Epoch and release (trailing zeros dropped): what ``1.0rc1``, ``1.0.post2`` and ``1`` share."""
        return self.key[:2]

    @property
    def is_prerelease(self) -> bool:
        return self.pre is not None or self.dev is not None

    def __str__(self) -> str:
        """The normalised spelling, as ``packaging`` writes it."""
        text = (f"{self.epoch}!" if self.epoch else "") + ".".join(map(str, self.release))
        if self.pre is not None:
            text += f"{self.pre[0]}{self.pre[1]}"
        if self.post is not None:
            text += f".post{self.post}"
        if self.dev is not None:
            text += f".dev{self.dev}"
        if self.local is not None:
            text += "+" + ".".join(map(str, self.local))
        return text

    def __repr__(self) -> str:
        return f"<Version({str(self)!r})>"

    def __eq__(self, other: object) -> bool:
        return self.key == other.key if isinstance(other, Version) else NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __lt__(self, other: Version) -> bool:
        return self.key < other.key

    def __le__(self, other: Version) -> bool:
        return self.key <= other.key

    def __gt__(self, other: Version) -> bool:
        return self.key > other.key

    def __ge__(self, other: Version) -> bool:
        return self.key >= other.key


# -- specifiers --------------------------------------------------------------

def _split(clause: str):
    for op in ("===", "~=", "==", "!=", "<=", ">=", "<", ">"):
        if clause.startswith(op):
            return op, clause[len(op):].strip()
    raise ValueError(f"not a version specifier: {clause!r}")


def _clause(clause: str, candidate: Version, raw: str) -> bool:
    op, text = _split(clause)
    if op == "===":
        return raw.strip().lower() == text.lower()
    if op in ("==", "!="):
        equal = _prefix_equal(candidate, text[:-2]) if text.endswith(".*") else _equal(candidate, Version(text))
        return equal if op == "==" else not equal
    if op == "~=":
        spec = Version(text)
        prefix = ".".join(str(part) for part in spec.release[:-1])
        if spec.epoch:
            prefix = f"{spec.epoch}!{prefix}"
        return candidate >= spec and _prefix_equal(candidate, prefix)
    spec = Version(text)
    if spec.post is not None or spec.dev is not None or spec.local is not None:
        raise ValueError(f"patchkit ranges use release or pre-release bounds, not {clause!r}")
    public = candidate.public_key  # the bound has no local label, so spec.key is public too
    if op == "<=":
        return public <= spec.key
    if op == ">=":
        return public >= spec.key
    if op == "<":
        if not public < spec.key:
            return False
        # <V does not admit pre-releases of V itself, unless V is one
        return spec.is_prerelease or not candidate.is_prerelease or candidate.base_key != spec.base_key
    # ">": not the post-releases or local versions of V itself
    if not public > spec.key:
        return False
    same = candidate.base_key == spec.base_key and candidate.pre == spec.pre  # 1.0 == 1
    return not (same and (candidate.post is not None or candidate.local is not None))


def _equal(candidate: Version, spec: Version) -> bool:
    if spec.local is None:  # no local label asked for: the candidate's is ignored
        return candidate.public_key == spec.key
    return candidate == spec


def _prefix_equal(candidate: Version, prefix_text: str) -> bool:
    prefix = Version(prefix_text)
    if candidate.epoch != prefix.epoch:
        return False
    wanted = list(prefix.release)
    have = list(candidate.release)
    have += [0] * (len(wanted) - len(have))  # 1.2 matches ==1.2.0.*
    return have[: len(wanted)] == wanted
