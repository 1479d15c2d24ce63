"""Import a file patched by a recipe of `patchkit new`, call its function, and print what patchkit's runtime recorded.

    python tests/drive_applied.py ROOT CASE

ROOT holds the patched package (a copy of a release's target files, or of
tests/own_code/installed); it goes first on sys.path.  A real release's
root holds only the target files: its packages' ``__init__`` files are not
run, and every module the target imports that is
not there (the rest of verl or vLLM, their dependencies) is a stand-in made
here (:class:`Stub`; only for the packages the file imports that are not installed), so the patched module imports and its function runs
for real on small stand-in arguments, with torch and patchkit's runtime
real.  Each CASE builds the object and the arguments of one function and
calls it a few times.  The last line printed is ``patchkit.runtime.report()``
as JSON.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import sys
import types


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _stub_class(name)

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Stub):
            return args[0]  # used as a decorator: the function as it is
        return super().__call__()

    def __getitem__(cls, item):
        return cls


class Stub(metaclass=_Meta):
    """Anything: an attribute, a call, a decorator (it gives the function back), an empty iterable, a false value."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub()

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], Stub):
            return args[0]
        return Stub()

    def __iter__(self):
        return iter(())

    def __bool__(self):
        return False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __getitem__(self, key):
        return Stub()


def _stub_class(name):
    return _Meta(name, (Stub,), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _stub_class(name)
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: a module nothing else finds, of a package the target file imports, is a stand-in."""

    def __init__(self, tops):
        self.tops = tops

    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] not in self.tops:
            return None  # others' optional imports (sympy's, torch's) stay missing, as their code expects
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def tinytrain():
    from tinytrain.loop import Trainer, evaluate

    trainer = Trainer()
    trainer.fit([[1, 2], [], [3, 4], [5, 6]], epochs=2)
    evaluate(trainer, [[1, 2], [3, 4]])


def verl_logprob():
    import torch
    from verl.workers.actor.dp_actor import DataParallelPPOActor

    class Micro:
        batch, non_tensor_batch = {}, {}

        def to(self, device):
            return self

    class Data:
        meta_info = {"micro_batch_size": 2, "temperature": 1.0, "use_dynamic_bsz": False}
        batch, non_tensor_batch = {}, {}

        def select(self, **keys):
            return self

        def split(self, size):
            return [Micro() for _ in range(4)]

    actor = DataParallelPPOActor.__new__(DataParallelPPOActor)
    actor.config, actor.use_prefix_grouper = {}, False
    actor.actor_module = types.SimpleNamespace(eval=lambda: None)
    actor._forward_micro_batch = lambda inputs, temperature, calculate_entropy: {"log_probs": torch.zeros(2, 3)}
    for _ in range(2):
        assert actor.compute_log_prob(Data())["log_probs"].shape == (8, 3)


def vllm_execute():
    from vllm.v1.worker.gpu_worker import Worker

    worker = Worker.__new__(Worker)
    worker._pp_send_work = []
    worker.annotate_profile = lambda output: Stub()
    worker.use_v2_model_runner = False
    worker.model_runner = types.SimpleNamespace(execute_model=lambda output, tensors: None)
    for _ in range(5):
        assert worker.execute_model(types.SimpleNamespace(total_num_scheduled_tokens=0)) is None


# case -> (the patched module, the call; with stand-ins: the module's own packages are not run, only searched)
CASES = {"tinytrain": ("tinytrain.loop", tinytrain, False), "verl-logprob": ("verl.workers.actor.dp_actor", verl_logprob, True),
         "vllm-execute": ("vllm.v1.worker.gpu_worker", vllm_execute, True)}


def _imported(root, module):
    """The top-level names the module's file imports that are not installed here, and its own package."""
    import ast
    import importlib.util
    import os

    path = os.path.join(root, *module.split(".")) + ".py"
    tops = {module.split(".")[0]}
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            tops.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops.add(node.module.split(".")[0])
    return {t for t in tops if t == module.split(".")[0] or importlib.util.find_spec(t) is None}


def _packages(root, module):
    """The packages above ``module`` as stand-ins that search ROOT's folders: their ``__init__`` is not run (verl's
    reads a data file a release's target files do not include)."""
    import os

    parts = module.split(".")[:-1]
    for i in range(1, len(parts) + 1):
        name = ".".join(parts[:i])
        package = _StubModule(name)
        package.__path__ = [os.path.join(root, *parts[:i])]
        sys.modules[name] = package


if __name__ == "__main__":
    root, case = sys.argv[1], sys.argv[2]
    sys.path.insert(0, root)
    import patchkit.runtime as runtime
    import torch  # noqa: F401  (real, with its own optional imports settled before any stand-in exists)

    runtime.set_strict(True)
    module, call, stand_ins = CASES[case]
    if stand_ins:
        sys.meta_path.append(_Finder(_imported(root, module)))
        _packages(root, module)
    call()
    runtime._at_exit()
    print(json.dumps(runtime.report()))
