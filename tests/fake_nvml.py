"""FakeNvml: a stand-in for the ``pynvml`` module, for tests and the overhead benchmark only.

The tests hold with and without an NVIDIA GPU, so the sampler is driven through this fake, and the
no-driver path through the *real* pynvml with NVIDIA's library hidden (``without_nvml_library``):
never through whatever the machine happens to have. The fake mimics only the pynvml functions specterm uses, with the same names, signatures and
failure style: errors are raised as the *real* ``pynvml.NVMLError`` (which maps a return code to its
subclass), and the constants and the ``c_nvmlGpmMetricsGet_t`` ctypes struct are the real ones, so the
sampler's struct handling is exercised as it would be against the driver.

Scenarios are scripted per GPU (``FakeGpu``) plus ``fail(function_name, code, times)`` to inject
errors, and ``lose(index)`` / ``restore(index)`` for a GPU falling off the bus.
"""

from __future__ import annotations

import ctypes
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pynvml as _real

NVMLError = _real.NVMLError
_CONSTANT_PREFIXES = ("NVML_ERROR_", "NVML_GPM_", "NVML_CLOCK_", "NVML_DEVICE_MIG_", "NVML_SUCCESS")


@dataclass
class FakeMig:
    """One MIG GPU instance."""

    gi_id: int
    name: str = "NVIDIA H200 MIG 3g.71gb"
    mem_total: int = 71 * 2**30
    mem_used: int = 2**30
    dram_bw: Iterable[float] | float = 10.0


@dataclass
class FakeGpu:
    """One scripted GPU. ``dram_bw`` / ``mem_duty`` are a constant or a sequence consumed one value per
    GPM sample / utilisation call. ``power_mw=None`` makes power NOT_SUPPORTED."""

    name: str = "NVIDIA H200"
    gpm: bool = True
    max_mem_clock_mhz: int = 3201
    bus_width_bits: int = 6144
    sm_clock_mhz: int = 1980
    mem_clock_mhz: int = 3201
    power_mw: int | None = 350_000
    mem_total: int = 143_771_000_000
    mem_used: int = 20_000_000_000
    dram_bw: Iterable[float] | float = 50.0
    mem_duty: Iterable[int] | int = 40
    migs: list[FakeMig] = field(default_factory=list)


@dataclass
class _Handle:
    index: int
    mig: FakeMig | None = None


class _Utilization:
    def __init__(self, gpu: int, memory: int) -> None:
        self.gpu, self.memory = gpu, memory


class _Memory:
    def __init__(self, total: int, used: int) -> None:
        self.total, self.used, self.free = total, used, total - used


class _Support:
    def __init__(self, supported: bool) -> None:
        self.version = _real.NVML_GPM_SUPPORT_VERSION
        self.isSupportedDevice = int(supported)


def _stream(value: Iterable[float] | float) -> Any:
    if isinstance(value, (int, float)):
        return lambda: value
    queue = deque(value)
    last = [queue[0] if queue else 0]

    def next_value() -> Any:
        if queue:
            last[0] = queue.popleft()
        return last[0]

    return next_value


class FakeNvml:
    """Fake of the ``pynvml`` module (see the module docstring). ``calls`` counts calls by name."""

    c_nvmlGpmMetricsGet_t = _real.c_nvmlGpmMetricsGet_t
    NVMLError = _real.NVMLError

    def __init__(self, gpus: list[FakeGpu] | None = None, *, init_error: int | None = None) -> None:
        for name in dir(_real):
            if name.startswith(_CONSTANT_PREFIXES):
                setattr(self, name, getattr(_real, name))
        self.gpus = list(gpus or [])
        self.init_error = init_error
        self.initialised = 0
        self.inits = 0
        self.shutdowns = 0
        self.calls: dict[str, int] = {}
        self.lost: set[int] = set()
        self._failures: dict[str, deque[int]] = {}
        self._bw = {}
        self._duty = [_stream(g.mem_duty) for g in self.gpus]
        for i, gpu in enumerate(self.gpus):
            self._bw[(i, None)] = _stream(gpu.dram_bw)
            for mig in gpu.migs:
                self._bw[(i, mig.gi_id)] = _stream(mig.dram_bw)
        self._buffers: dict[int, Any] = {}  # address → ctypes buffer, alive while allocated
        self._samples: dict[int, tuple[Any, int, float]] = {}  # address → (target, seq, value)
        self._seq = 0
        self.freed = 0

    # -- scripting -----------------------------------------------------------------------------

    def fail(self, function: str, code: int, times: int = 1) -> None:
        """Make the next ``times`` calls of ``function`` raise NVMLError(code) (times=-1: always)."""
        self._failures[function] = deque([code] * (times if times >= 0 else 10**6))

    def lose(self, index: int) -> None:
        self.lost.add(index)

    def restore(self, index: int) -> None:
        self.lost.discard(index)

    @property
    def live_samples(self) -> int:
        """GPM sample buffers allocated and not yet freed."""
        return len(self._buffers)

    def _enter(self, function: str, handle: _Handle | None = None, *, needs_init: bool = True) -> None:
        self.calls[function] = self.calls.get(function, 0) + 1
        queue = self._failures.get(function)
        if queue:
            raise NVMLError(queue.popleft())
        if needs_init and not self.initialised:
            raise NVMLError(_real.NVML_ERROR_UNINITIALIZED)
        if handle is not None and handle.index in self.lost:
            raise NVMLError(_real.NVML_ERROR_GPU_IS_LOST)

    def _gpu(self, handle: _Handle) -> FakeGpu:
        return self.gpus[handle.index]

    # -- library -------------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit", needs_init=False)
        if self.init_error is not None:
            raise NVMLError(self.init_error)
        self.initialised += 1
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.initialised -= 1
        self.shutdowns += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return "590.00.00"

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex", _Handle(index))
        if not 0 <= index < len(self.gpus):
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        self._enter("nvmlDeviceGetName", handle)
        return handle.mig.name if handle.mig else self._gpu(handle).name

    # -- device readings -----------------------------------------------------------------------

    def nvmlDeviceGetMaxClockInfo(self, handle: _Handle, clock_type: int) -> int:
        self._enter("nvmlDeviceGetMaxClockInfo", handle)
        if clock_type != _real.NVML_CLOCK_MEM:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return self._gpu(handle).max_mem_clock_mhz

    def nvmlDeviceGetMemoryBusWidth(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMemoryBusWidth", handle)
        return self._gpu(handle).bus_width_bits

    def nvmlDeviceGetClockInfo(self, handle: _Handle, clock_type: int) -> int:
        self._enter("nvmlDeviceGetClockInfo", handle)
        if handle.mig is not None:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)  # as the driver does for MIG handles
        gpu = self._gpu(handle)
        return {_real.NVML_CLOCK_SM: gpu.sm_clock_mhz, _real.NVML_CLOCK_MEM: gpu.mem_clock_mhz}[clock_type]

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetPowerUsage", handle)
        power = self._gpu(handle).power_mw
        if power is None or handle.mig is not None:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)
        return power

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> _Memory:
        self._enter("nvmlDeviceGetMemoryInfo", handle)
        if handle.mig is not None:
            return _Memory(handle.mig.mem_total, handle.mig.mem_used)
        gpu = self._gpu(handle)
        return _Memory(gpu.mem_total, gpu.mem_used)

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> _Utilization:
        self._enter("nvmlDeviceGetUtilizationRates", handle)
        if handle.mig is not None or self._gpu(handle).migs:
            raise NVMLError(_real.NVML_ERROR_NOT_SUPPORTED)  # no utilisation rates in MIG mode
        return _Utilization(0, self._duty[handle.index]())

    # -- MIG ----------------------------------------------------------------------------------

    def nvmlDeviceGetMigMode(self, handle: _Handle) -> list[int]:
        self._enter("nvmlDeviceGetMigMode", handle)
        mode = _real.NVML_DEVICE_MIG_ENABLE if self._gpu(handle).migs else _real.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetMaxMigDeviceCount", handle)
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: _Handle, index: int) -> _Handle:
        self._enter("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        migs = self._gpu(handle).migs
        if index >= len(migs):
            raise NVMLError(_real.NVML_ERROR_NOT_FOUND)
        return _Handle(handle.index, migs[index])

    def nvmlDeviceGetGpuInstanceId(self, handle: _Handle) -> int:
        self._enter("nvmlDeviceGetGpuInstanceId", handle)
        if handle.mig is None:
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        return handle.mig.gi_id

    # -- GPM ----------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, handle: _Handle) -> _Support:
        self._enter("nvmlGpmQueryDeviceSupport", handle)
        return _Support(self._gpu(handle).gpm)

    def nvmlGpmSampleAlloc(self) -> Any:
        self._enter("nvmlGpmSampleAlloc")
        buffer = ctypes.create_string_buffer(8)
        sample = ctypes.cast(buffer, _real.c_nvmlGpmSample_t)
        self._buffers[ctypes.addressof(buffer)] = buffer
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        self._enter("nvmlGpmSampleFree")
        address = self._address(sample)
        self._buffers.pop(address)
        self._samples.pop(address, None)
        self.freed += 1

    def nvmlGpmSampleGet(self, handle: _Handle, sample: Any) -> Any:
        self._enter("nvmlGpmSampleGet", handle)
        return self._record(sample, (handle.index, None))

    def nvmlGpmMigSampleGet(self, handle: _Handle, gpu_instance_id: int, sample: Any) -> Any:
        self._enter("nvmlGpmMigSampleGet", handle)
        if handle.mig is not None:
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)  # takes the parent GPU's handle
        if (handle.index, gpu_instance_id) not in self._bw:
            raise NVMLError(_real.NVML_ERROR_NOT_FOUND)
        return self._record(sample, (handle.index, gpu_instance_id))

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        self._enter("nvmlGpmMetricsGet")
        if request.version != _real.NVML_GPM_METRICS_GET_VERSION:
            raise NVMLError(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first = self._samples.get(self._address(request.sample1))
        second = self._samples.get(self._address(request.sample2))
        if first is None or second is None or first[0] != second[0] or first[1] >= second[1]:
            # Unfilled, mixed-device or out-of-order samples: the real call fails the same way.
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)
        for i in range(request.numMetrics):
            metric = request.metrics[i]
            if metric.metricId == _real.NVML_GPM_METRIC_DRAM_BW_UTIL:
                metric.value, metric.nvmlReturn = second[2], _real.NVML_SUCCESS
            else:
                metric.value, metric.nvmlReturn = 0.0, _real.NVML_ERROR_NOT_SUPPORTED
        return request

    def _address(self, sample: Any) -> int:
        address = ctypes.cast(sample, ctypes.c_void_p).value or 0
        if address not in self._buffers:
            raise NVMLError(_real.NVML_ERROR_INVALID_ARGUMENT)  # freed or never allocated
        return address

    def _record(self, sample: Any, target: tuple[int, int | None]) -> Any:
        self._seq += 1
        # The value scripted for the interval that ends at this sample.
        self._samples[self._address(sample)] = (target, self._seq, float(self._bw[target]()))
        return sample


def _no_library(name: str, *args: Any, **kwargs: Any) -> Any:
    raise OSError(f"{name}: cannot open shared object file: No such file or directory")


def hide_nvml_library(module: Any = _real) -> None:
    """For a process of its own (a subprocess under test): the real pynvml cannot load NVIDIA's
    library, as on a machine without the driver; its ``nvmlInit`` raises the real
    ``NVMLError_LibraryNotFound`` from pynvml's own loading code."""
    module.nvmlLib = None  # a GPU machine may have loaded it already
    module.CDLL = _no_library


def without_nvml_library(monkeypatch: Any) -> None:
    """``hide_nvml_library`` for one test (``monkeypatch`` puts the library back afterwards)."""
    monkeypatch.setattr(_real, "nvmlLib", None)
    monkeypatch.setattr(_real, "CDLL", _no_library)
