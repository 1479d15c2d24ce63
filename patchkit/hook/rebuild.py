"""One run-cache entry rebuilt in a process of its own, so the job's process never loads the engine or libcst.

On a node that has no run cache (a Ray worker's node, say), the first
process of the job that imports a planned module asks for its patched text:
:func:`patchkit.hook.runcache.rebuild` runs ``python -m patchkit.hook.rebuild``
with a JSON request on stdin (the run spec, the module, its source bytes as
base64, the entry's path and the planned sha256) and reads the patched text
from stdout.  The entry is stored only when its sha256 is the planned one.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any, Dict, Optional

from patchkit.core.model import Applied
from patchkit.engine.codemod import transform
from patchkit.engine.marks import decode
from patchkit.hook.runcache import NOTE, text_sha256, write
from patchkit.recipe.load import parse_recipe
from patchkit.recipe.yamlpos import load


def build(spec: Dict[str, Any], name: str, source: bytes, path: str, expected: Optional[str] = None) -> str:
    """The patched text of module ``name`` from its ``source``, made with the engine and stored at ``path``.

    With ``expected`` (the sha256 the planning process recorded), a text that is not that one is returned
    but not stored: the caller refuses it, and no later process reads it from the cache.  A text that cannot
    be stored (a state folder another user owns or reaches, a full disk) is returned all the same, with one
    line on stderr for the job to say: it is the planned text, only every process rebuilds it.
    """
    data, marks = load(spec["recipe"], spec["path"])
    settings = parse_recipe(data, marks, spec["path"], spec["overrides"])
    points = settings.active_points()
    text, _encoding = decode(source, Path(path))
    result = transform(text, settings, [points[i] for i in spec["modules"][name]["points"]], path)
    if not isinstance(result, Applied):
        raise RuntimeError(f"the recipe does not apply to {name} here: {getattr(result, 'reason', 'already applied')}")
    if expected is None or text_sha256(result.text) == expected:
        try:
            write(path, result.text)
        except Exception as exc:  # noqa: BLE001 - the text is good; only the cache is out of reach
            from patchkit.runtime.process import reason

            sys.stderr.write(f"{NOTE}its patched text is used but not stored in the run cache ({reason(exc)}); "
                             "each process of this node rebuilds it\n")
    return result.text


def main() -> int:
    try:
        ask = json.loads(sys.stdin.buffer.read())
        text = build(ask["spec"], ask["name"], base64.b64decode(ask["source"]), ask["path"], ask.get("expected"))
    except Exception as exc:  # the asking process says it in one line and runs the module unpatched
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1
    sys.stdout.buffer.write(text.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
