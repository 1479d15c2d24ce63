"""Release trains of torch_npu and the profiler features each one has.

Source: docs/reference TORCH_NPU_API.md section 1 (train table), 6.2 (config
signatures), 9.2 (mstx history) and the feature matrix.  torch_npu ships
profiler features per *release train* (all branches uploaded on one day share
the same profiler code), so a feature is gated on the train number, never on
the version number.
"""

from __future__ import annotations

# train number -> (upload date, versions on PyPI in that train)
TRAIN_TABLE = {
    0: ("2023-12-26", ("2.1.0",)),
    1: ("2024-04-19", ("2.1.0.post3", "2.2.0")),
    2: ("2024-07-22", ("2.1.0.post6", "2.2.0.post2", "2.3.1")),
    3: ("2024-10-29", ("2.1.0.post8", "2.3.1.post2", "2.4.0")),
    4: ("2025-01-09", ("2.1.0.post10", "2.3.1.post4", "2.4.0.post2")),
    5: ("2025-04-25", ("2.1.0.post12", "2.3.1.post6", "2.4.0.post4", "2.5.1", "2.6.0rc1")),
    6: ("2025-07-29", ("2.1.0.post13", "2.5.1.post1", "2.6.0")),
    7: ("2025-10-30", ("2.1.0.post17", "2.6.0.post3", "2.7.1", "2.8.0")),
    8: ("2026-01-19", ("2.6.0.post5", "2.7.1.post2", "2.8.0.post2", "2.9.0")),
    9: ("2026-05-06", ("2.7.1.post4", "2.8.0.post4", "2.9.0.post2", "2.9.1", "2.10.0")),
    10: ("2026-07-02", ("2.7.1.post6", "2.8.0.post5", "2.9.0.post4", "2.10.0.post2")),
    11: ("2026-07-27", ("2.7.1.post8", "2.9.0.post6", "2.10.0.post4", "2.11.0", "2.12.0")),
    12: ("2026-09-02", ("2.7.1.post10", "2.9.0.post8", "2.10.0.post6", "2.11.0.post2", "2.12.0.post2")),
    13: ("2026-10-15", ("2.7.1.post11", "2.9.0.post9", "2.10.0.post7", "2.11.0.post3",
                        "2.12.0.post3", "2.13.0", "2.14.0")),
}

# The version used when a train is chosen by number (config(train=...)).
REPRESENTATIVE = {
    1: "2.2.0", 2: "2.3.1", 3: "2.4.0", 4: "2.4.0.post2", 5: "2.5.1", 6: "2.6.0",
    7: "2.7.1", 8: "2.9.0", 9: "2.10.0", 10: "2.10.0.post2", 11: "2.12.0",
    12: "2.12.0.post2", 13: "2.14.0",
}

# Wheels whose profiler sources were actually read for the reference.  Other
# versions are assumed to match their train (T12 was not downloaded at all).
VERIFIED_VERSIONS = frozenset("""
2.1.0 2.1.0.post3 2.1.0.post6 2.1.0.post8 2.1.0.post10 2.1.0.post12 2.1.0.post13 2.1.0.post17
2.2.0 2.3.1 2.3.1.post2 2.3.1.post4 2.3.1.post6 2.4.0 2.4.0.post2 2.4.0.post4 2.5.1 2.5.1.post1
2.6.0 2.6.0.post3 2.6.0.post5 2.7.1 2.7.1.post2 2.7.1.post4 2.7.1.post6 2.7.1.post8 2.7.1.post11
2.8.0 2.8.0.post2 2.8.0.post5 2.9.0 2.9.0.post2 2.9.0.post6 2.9.1 2.10.0 2.10.0.post4
2.10.0.post7 2.11.0 2.12.0 2.13.0 2.14.0
""".split())

# profile(..., execution_trace_observer=None) exists only in these versions
# (not in the other T13 branches such as 2.7.1.post11 or 2.10.0.post7).
EXECUTION_TRACE_OBSERVER_VERSIONS = frozenset({"2.13.0", "2.14.0"})
# The non-intrusive dynamic profiler hooks register_optimizer_step_post_hook here.
OPTIMIZER_POST_HOOK_VERSIONS = frozenset({"2.13.0", "2.14.0"})

DEFAULT_VERSION = "2.14.0"

_VERSION_TO_TRAIN = {v: n for n, (_, vs) in TRAIN_TABLE.items() for v in vs}


class UnsupportedTrainError(ImportError):
    """Raised when the selected torch_npu release has the legacy (T0) API."""


def train_of(version: str) -> int:
    """Map a version string to its train number; unknown versions raise ValueError."""
    if not isinstance(version, str) or version not in _VERSION_TO_TRAIN:
        known = ", ".join(sorted(_VERSION_TO_TRAIN))
        raise ValueError(f"torch_npu double: unknown torch_npu version {version!r}; known: {known}")
    return _VERSION_TO_TRAIN[version]


def known_versions():
    return sorted(_VERSION_TO_TRAIN, key=lambda v: (_VERSION_TO_TRAIN[v], v))


class Train:
    """Feature flags of one torch_npu release, derived from its train number."""

    def __init__(self, version: str):
        self.version = version
        self.n = train_of(version)
        self.date = TRAIN_TABLE[self.n][0]
        self.verified = version in VERIFIED_VERSIONS

    def __repr__(self):
        return f"<torch_npu double train T{self.n} ({self.version}, {self.date})>"

    @property
    def name(self):
        return f"T{self.n}"

    # T2
    has_msprof_tx = property(lambda s: s.n >= 2)
    has_op_attr = property(lambda s: s.n >= 2)
    has_level_none = property(lambda s: s.n >= 2)
    has_aicore_none = property(lambda s: s.n >= 2)
    has_analyse_flag = property(lambda s: s.n >= 2)
    has_mstx_module = property(lambda s: s.n >= 2)
    mstx_mark_instance_bug = property(lambda s: s.n == 2)
    has_dynamic_profile = property(lambda s: s.n >= 2)
    # T3
    no_exception_wrapping = property(lambda s: s.n >= 3)
    has_gc_detect = property(lambda s: s.n >= 3)
    mstx_static_ranges = property(lambda s: s.n >= 3)
    has_dp_start = property(lambda s: s.n >= 3)
    non_intrusive = property(lambda s: s.n >= 3)
    # T4
    trace_ready_gets_profile = property(lambda s: s.n >= 4)
    has_export_memory_timeline = property(lambda s: s.n >= 4)
    # T5
    export_type_list = property(lambda s: s.n >= 5)
    has_memory_access = property(lambda s: s.n >= 5)
    has_async_mode = property(lambda s: s.n >= 5)
    mstx_swallows = property(lambda s: s.n >= 5)
    # T6
    has_host_sys = property(lambda s: s.n >= 6)
    has_mstx_domain = property(lambda s: s.n >= 6)
    analyse_has_export_type = property(lambda s: s.n >= 6)
    # T7
    has_mstx_param = property(lambda s: s.n >= 7)
    has_child_thread = property(lambda s: s.n >= 7)
    local_time_folder = property(lambda s: s.n >= 7)
    # T8
    level_none_forces_mstx = property(lambda s: s.n >= 8)
    # T9
    new_defaults = property(lambda s: s.n >= 9)
    # T11
    has_skip_first_wait = property(lambda s: s.n >= 11)
    has_custom_trace_id = property(lambda s: s.n >= 11)
    has_mstx_push_pop = property(lambda s: s.n >= 11)
    has_annotate = property(lambda s: s.n >= 11)
    has_numa = property(lambda s: s.n >= 11)
    has_dp_set_state = property(lambda s: s.n >= 11)
    path_checks_warn = property(lambda s: s.n >= 11)
    has_tx_enabled = property(lambda s: s.n >= 11)
    step_mstx_range = property(lambda s: s.n >= 11)
    # T13
    op_attr_text_when_cann_db = property(lambda s: s.n >= 13)

    @property
    def has_execution_trace_observer(self):
        return self.version in EXECUTION_TRACE_OBSERVER_VERSIONS

    @property
    def optimizer_post_hook(self):
        return self.version in OPTIMIZER_POST_HOOK_VERSIONS

    def features(self) -> dict:
        """All boolean feature flags, for reports and tests."""
        out = {}
        for name in dir(type(self)):
            if name.startswith("_") or name in ("features", "name"):
                continue
            val = getattr(self, name)
            if isinstance(val, bool) and name != "verified":
                out[name] = val
        return out
