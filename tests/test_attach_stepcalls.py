"""attach.stepcalls: where no loop or function holds exactly one optimizer step (transformers' update and
micro-batch loops turn at the same lines), the job's own call of the step is the step's place."""

from __future__ import annotations

from types import SimpleNamespace as NS

from patchkit.attach.stepcalls import call_sites, with_call_sites
from patchkit.attach.stepfind import Candidate, Found
from patchkit.attach.watchread import Watch

TRAIN = "def train():\n    while True:\n        for micro in batch:\n            step(micro)\n        opt.step()\n"


def watch(markers=True, forward=False):
    """A long-lived train() whose line 5 calls the optimizer 8 times, 0.1 s apart (or the model, ``forward``)."""
    torch_file = "/site/torch/nn/modules/module.py" if forward else "/site/torch/optim/optimizer.py"
    codes = [("/job/train.py", 1, "train"), (torch_file, 10, "Optimizer.step" if not forward else "Module._call_impl")]
    calls = [(0, 0, -1, 0, 0.0, 1.0)] + [(1, 0, 0, 5, 0.1 * i + 0.05, 0.1 * i + 0.05) for i in range(1, 9)]
    marks = [("optimizer", k, calls[k][4]) for k in range(1, 9)] if markers and not forward else []
    return Watch(1, 0.005, 0.0, 1.0, 200, "repeated", ["MainThread"], codes, calls, [], [], [], marks,
                 "/site/torch/", 0.005)


def read(file):
    return TRAIN if file == "/job/train.py" else None


def test_each_optimizer_step_s_call_site_is_a_candidate_holding_one_each():
    marker, (c,) = call_sites(watch(), read)
    assert marker == "optimizer step"
    assert (c.kind, c.file, c.qualname, c.line, c.code) == ("call", "/job/train.py", "train", 5, "opt.step()")
    assert (c.repeats, c.period, c.regularity, c.role, c.holds) == (7, 0.1, 1.0, "step", "one optimizer step")


def test_the_outermost_model_forward_s_call_site_without_an_optimizer():
    marker, (c,) = call_sites(watch(forward=True), read)
    assert marker == "model forward" and c.line == 5 and c.holds == "one model forward"


def test_no_markers_no_call_site():
    assert call_sites(watch(markers=False), read) == ("", [])


def cand(kind, role, line):
    return Candidate(kind, "/job/train.py", "train", line, "", "MainThread", 5, 0.05, 0.9, 0.8, 0.5, "", role)


def test_chosen_only_when_nothing_else_was_and_ranked_after_the_steps():
    inner = cand("loop", "inner", 3)
    found = with_call_sites(Found((inner,), None, "none", "optimizer step", ()), watch(), read)
    assert [c.kind for c in found.candidates] == ["call", "loop"] and found.chosen == 0
    assert found.why.startswith("no loop or function holds exactly one optimizer step: each optimizer step is "
                                "called at line 5 of train (8 seen, one every 0.1 s)")
    step = cand("loop", "step", 2)
    kept = with_call_sites(Found((inner, step), 1, "loop", "optimizer step", ()), watch(), read)
    assert [c.kind for c in kept.candidates] == ["loop", "call", "loop"] and kept.chosen == 0 and kept.why == "loop"
    assert with_call_sites(Found((), None, "w", "", ()), watch(markers=False), read).candidates == ()


def test_a_caller_no_point_can_name_is_none():
    w = watch()
    w = w._replace(codes=[("<string>", 1, "<module>")] + w.codes[1:])
    assert call_sites(w, read)[1] == []
    assert call_sites(watch(), lambda f: NS())[1][0].code == ""  # a reader that answers nonsense reads nothing


def test_a_step_lasting_less_than_half_of_its_period_gives_way_to_the_call_site():
    """A wrapper of the optimizer's step (its calls seen often enough to be a candidate) holds one step each and
    little else: a span from one call of the optimizer to the next holds the whole step."""
    wrapper = cand("function", "step", 9)._replace(qualname="Trainer.optimizer_step", covers=0.3)
    found = with_call_sites(Found((wrapper,), 0, "wrapper", "optimizer step", ()), watch(), read)
    assert [c.kind for c in found.candidates] == ["call", "function"] and found.chosen == 0
    assert found.why == ("each call of Trainer.optimizer_step holds one too, but lasts only 30% of the time from one "
                         "to the next: each optimizer step is called at line 5 of train (8 seen, one every 0.1 s), "
                         "so a step after that call holds exactly one")
    half = wrapper._replace(covers=0.5)  # the step function of a job that loads its batch half of the time: kept
    kept = with_call_sites(Found((half,), 0, "step", "optimizer step", ()), watch(), read)
    assert [c.kind for c in kept.candidates] == ["function", "call"] and kept.chosen == 0 and kept.why == "step"
