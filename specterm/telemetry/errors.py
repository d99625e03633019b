"""How NVML failures map to sampler states and one-line messages.

The states are those of ``specterm.events.GpuStatus``. Errors are matched by their NVML return code
(``err.value``) looked up by *name* on the nvml module in use, so the real ``pynvml`` and the test
fake classify identically.
"""

from __future__ import annotations

from typing import Any

OK = "ok"
NO_GPU = "no_gpu"
NO_DRIVER = "no_driver"
DEVICE_LOST = "device_lost"
PERMISSION = "permission"
ERROR = "error"

# A lost GPU can come back (driver reset, hot-plug) and an unknown error may be transient, so the
# sampler retries these with back-off. The others will not fix themselves during a session.
RETRY_STATES = frozenset({DEVICE_LOST, ERROR})

# (NVML constant name, state, message). Order does not matter; codes are unique.
_TABLE: tuple[tuple[str, str, str], ...] = (
    ("NVML_ERROR_LIBRARY_NOT_FOUND", NO_DRIVER, "no NVIDIA GPU (no driver): libnvidia-ml.so.1 not found"),
    (
        "NVML_ERROR_DRIVER_NOT_LOADED",
        NO_DRIVER,
        "NVIDIA driver not loaded: NVML is installed but the kernel module is not running",
    ),
    (
        "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        NO_DRIVER,
        "NVIDIA driver and NVML library versions differ: reload the driver or reboot",
    ),
    ("NVML_ERROR_GPU_NOT_FOUND", NO_GPU, "no NVIDIA GPU found by NVML"),
    ("NVML_ERROR_NO_PERMISSION", PERMISSION, "no permission to query the GPU (check access to /dev/nvidia*)"),
    ("NVML_ERROR_GPU_IS_LOST", DEVICE_LOST, "GPU lost (fell off the bus): GPU telemetry paused, retrying"),
    ("NVML_ERROR_RESET_REQUIRED", DEVICE_LOST, "GPU needs a reset: GPU telemetry paused, retrying"),
)

# Codes that mean "this one reading is not available here" rather than "the GPU is in trouble".
# An optional reading (power, clocks, a MIG instance's utilisation) that fails with one of these is
# shown as missing; anything else is raised to the sampler, which changes state.
_SOFT_NAMES = (
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_NO_PERMISSION",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_NOT_FOUND",
    "NVML_ERROR_NO_DATA",
    "NVML_ERROR_NOT_READY",
    "NVML_ERROR_INVALID_ARGUMENT",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    "NVML_ERROR_DEPRECATED",
)
# Of those, the ones that will not change while the driver stays loaded: worth remembering so a
# missing reading costs nothing on later ticks.
_PERMANENT_NAMES = (
    "NVML_ERROR_NOT_SUPPORTED",
    "NVML_ERROR_FUNCTION_NOT_FOUND",
    "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    "NVML_ERROR_DEPRECATED",
)


class NoGpu(Exception):
    """NVML initialised but reports no usable device."""


def error_code(err: BaseException) -> int | None:
    value = getattr(err, "value", None)
    return value if isinstance(value, int) else None


def _codes(nvml: Any, names: tuple[str, ...]) -> set[int]:
    return {getattr(nvml, n) for n in names if isinstance(getattr(nvml, n, None), int)}


def _is_library_mismatch(err: BaseException) -> bool:
    # pynvml raises NVMLLibraryMismatchError (not an NVMLError) when an unversioned function is
    # missing from an older driver: for one reading that is "not supported here".
    return type(err).__name__ == "NVMLLibraryMismatchError"


def is_soft(err: BaseException, nvml: Any) -> bool:
    return _is_library_mismatch(err) or error_code(err) in _codes(nvml, _SOFT_NAMES)


def is_permanent(err: BaseException, nvml: Any) -> bool:
    return _is_library_mismatch(err) or error_code(err) in _codes(nvml, _PERMANENT_NAMES)


def is_code(err: BaseException, nvml: Any, *names: str) -> bool:
    code = error_code(err)
    return code is not None and code in _codes(nvml, names)


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def classify(err: BaseException, nvml: Any = None) -> tuple[str, str]:
    """(state, one-line message) for an exception raised while sampling or starting NVML."""
    if isinstance(err, NoGpu):
        return NO_GPU, one_line(str(err) or "no NVIDIA GPU found by NVML")
    if isinstance(err, ImportError):
        return NO_DRIVER, "nvidia-ml-py is not installed, so no GPU telemetry (pip install nvidia-ml-py)"
    code = error_code(err)
    if code is not None and nvml is not None:
        for name, state, message in _TABLE:
            if getattr(nvml, name, None) == code:
                return state, message
        return ERROR, one_line(f"NVML error {code}: {err}")
    return ERROR, one_line(f"GPU telemetry failed: {type(err).__name__}: {err}")
