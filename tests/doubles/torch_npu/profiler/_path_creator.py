"""ProfPathCreator: the process-wide output directory set by tensorboard_trace_handler.

The most recent tensorboard_trace_handler() call wins for every profiler in the
process.  Each cycle gets <dir>/<worker|hostname>_<pid>_<YYYYmmddHHMMSSfff>_ascend_pt
(UTC timestamps up to T6, local time from T7).  Without on_trace_ready the profile
runs in export-only mode under $CWD/export_only_prof_dir (or $ASCEND_WORK_PATH/profiling_data).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
from datetime import datetime, timezone

from torch_npu import _double
from torch_npu._double.log import diag, print_warn_msg, py_warn
from torch_npu._double.recorder import register_reset
from torch_npu.utils._error_code import ErrCode, pta_error

_TRAIN = _double.freeze()

MAX_PATH_LENGTH = 4096
MAX_FILE_NAME_LENGTH = 255
MAX_WORKER_NAME_LENGTH = 226
_PATH_PATTERN = re.compile(r"(\.|/|_|-|\s|[~0-9a-zA-Z]|[\u4e00-\u9fa5])+")
FOLDER_RE = re.compile(r"^(?P<worker>.+)_(?P<pid>\d+)_(?P<ts>\d{17})_ascend_pt$")


def _path_problem(path):
    if len(path) > MAX_PATH_LENGTH:
        return "Length of input path exceeds the limit." + pta_error(ErrCode.PARAM)
    if os.path.islink(path):
        return f"Invalid input path is a soft chain: {path}" + pta_error(ErrCode.UNAVAIL)
    if not _PATH_PATTERN.fullmatch(path):
        return f"Invalid input path: {path}" + pta_error(ErrCode.PARAM)
    if any(len(name) > MAX_FILE_NAME_LENGTH for name in path.split("/")):
        return "Length of input path exceeds the limit." + pta_error(ErrCode.PARAM)
    if os.path.isfile(path):
        return f"Invalid input path which is a file path: {os.path.basename(path)}" + pta_error(ErrCode.PARAM)
    return None


def check_input_directory_path(path):
    """Raises RuntimeError up to T10; only warnings.warn from T11 on."""
    problem = _path_problem(path)
    if problem is None:
        return True
    if _TRAIN.path_checks_warn:
        py_warn(problem, reset=True)
        return True
    raise RuntimeError(problem)


def realpath(path):
    if os.path.islink(path):
        return path  # keep the link visible to the soft-chain check
    return os.path.realpath(os.path.expanduser(path))


class ProfPathCreator:
    def __init__(self):
        self._prof_path = None
        self._worker_name = None
        self._dir_path = None
        self._export_only_mode = False
        self._export_only_prof_dir = "export_only_prof_dir"
        self.is_prof_inited = False

    def init(self, worker_name=None, dir_name=None, export_only_mode=False):
        self._export_only_mode = export_only_mode
        valid_name = isinstance(worker_name, str) and worker_name and len(worker_name) < MAX_WORKER_NAME_LENGTH
        if valid_name or worker_name is None:
            self._worker_name = worker_name
        else:
            print_warn_msg("Invalid parameter worker_name, reset it to default.", reset=True)
            self._worker_name = None
        if dir_name and isinstance(dir_name, str):
            check_input_directory_path(realpath(dir_name))
            self._dir_path = dir_name
        elif dir_name is None:
            self._dir_path = None
        else:
            print_warn_msg("Invalid parameter dir_name, reset it to default.", reset=True)
            self._dir_path = None

    @property
    def export_only_mode(self):
        return self._export_only_mode

    def create_prof_dir(self):
        if not self._dir_path:
            dir_path = os.getenv("ASCEND_WORK_PATH", default=None)
            self._export_only_mode = self._export_only_mode and dir_path is None
            if dir_path:
                dir_path = os.path.join(os.path.abspath(dir_path), "profiling_data")
            elif self._export_only_mode:
                dir_path = os.path.join(os.getcwd(), self._export_only_prof_dir)
            else:
                dir_path = os.getcwd()
        else:
            dir_path = self._dir_path
        worker = self._worker_name or socket.gethostname()
        if _TRAIN.local_time_folder:
            now = datetime.now()
        else:
            now = datetime.now(timezone.utc)
        stamp = now.strftime("%Y%m%d%H%M%S%f")[:-3]
        span_name = f"{worker}_{os.getpid()}_{stamp}_ascend_pt"
        prof_path = os.path.join(dir_path, span_name)
        check_input_directory_path(prof_path)
        if os.path.exists(prof_path):
            diag(f"prof_dir_reused:{prof_path}")
        os.makedirs(prof_path, mode=0o750, exist_ok=True)
        if not os.access(prof_path, os.W_OK):
            raise RuntimeError(f"The path permission check failed: {prof_path}" + pta_error(ErrCode.PERMISSION))
        self._prof_path = prof_path
        self.is_prof_inited = True
        return prof_path

    def get_prof_dir(self):
        return self._prof_path

    def delete_dir(self, path):
        try:
            shutil.rmtree(path)
        except Exception:  # noqa: BLE001
            print_warn_msg("Remove temporary profiling data saving path failed.")


_INSTANCE = ProfPathCreator()


def path_creator():
    return _INSTANCE


@register_reset
def _reset_path_creator():
    _INSTANCE.__init__()
