"""The sampler's thread: start() does not block, stop() releases NVML, the real pynvml's no-driver path,
and the peak-bandwidth formula. Waits use events with generous timeouts; nothing asserts timing."""

from __future__ import annotations

import threading

import pynvml
import pytest
from fake_nvml import FakeGpu, FakeNvml, without_nvml_library

from specterm.events import GpuSample, GpuStatus
from specterm.telemetry import GpuSampler, classify, peak_bandwidth_gbps, probe

WAIT = 30.0  # generous: the 2 shared cores here can be very busy


class BlockingInitNvml(FakeNvml):
    """nvmlInit waits until the test lets it go: proves start() never runs NVML on the caller."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.entered = threading.Event()
        self.release = threading.Event()

    def nvmlInit(self):
        self.entered.set()
        assert self.release.wait(WAIT)
        super().nvmlInit()


def test_start_returns_while_nvml_init_is_still_running_in_the_thread():
    fake = BlockingInitNvml([FakeGpu()])
    got_sample = threading.Event()
    events = []

    def sink(event):
        events.append(event)
        if isinstance(event, GpuSample):
            got_sample.set()

    sampler = GpuSampler(sink, nvml=fake, period_s=0.1)
    sampler.start()  # returns although nvmlInit cannot finish yet
    assert fake.entered.wait(WAIT)
    assert fake.inits == 0 and events == []
    fake.release.set()
    assert got_sample.wait(WAIT)
    sampler.stop()
    assert sampler.join(WAIT)
    assert events[0] == GpuStatus(t=events[0].t, state="ok", message=events[0].message)
    assert fake.live_samples == 0 and fake.initialised == 0  # thread cleaned up on the way out
    with pytest.raises(RuntimeError):
        sampler.start()


def test_thread_ends_by_itself_on_a_terminal_state():
    events = []
    sampler = GpuSampler(events.append, nvml=FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))
    sampler.start()
    assert sampler.join(WAIT)
    assert [(e.type, e.state) for e in events] == [("gpu_status", "no_driver")]


@pytest.fixture
def no_driver(monkeypatch):
    """The real pynvml on a machine without NVIDIA's library, on every machine (a GPU one too)."""
    without_nvml_library(monkeypatch)


def test_real_pynvml_without_a_driver_reports_instead_of_raising(no_driver):
    """Without NVIDIA's library the real module fails in nvmlInit."""
    with pytest.raises(pynvml.NVMLError_LibraryNotFound):
        pynvml.nvmlInit()
    events = []
    sampler = GpuSampler(events.append)  # default: the real pynvml, imported in the thread
    sampler.start()
    assert sampler.join(WAIT)
    assert len(events) == 1 and isinstance(events[0], GpuStatus)
    assert events[0].state == "no_driver"
    assert "\n" not in events[0].message and events[0].message


def test_real_probe_without_a_driver_says_no_gpu(no_driver):
    result = probe()
    assert result["state"] == "no_driver"
    assert result["panel"] == "nothing: no NVIDIA GPU" and result["devices"] == []


def test_probe_with_fake_gpus_names_the_panel_per_device():
    result = probe(FakeNvml([FakeGpu(), FakeGpu(name="Tesla T4", gpm=False)]))
    assert result["state"] == "ok" and result["driver_version"] == "590.00.00"
    assert [(d["name"], d["source"]) for d in result["devices"]] == [
        ("NVIDIA H200", "gpm_dram_bw"),
        ("Tesla T4", "mem_duty_cycle"),
    ]
    assert "not bandwidth" in result["devices"][1]["panel"]
    assert result["devices"][0]["peak_gbps"] == pytest.approx(4916.7, abs=0.1)


@pytest.mark.parametrize(
    ("clock_mhz", "bus_bits", "gbps"),
    [
        (2619, 5120, 3352.3),  # H100 SXM, datasheet 3.35 TB/s
        (3201, 6144, 4916.7),  # H200, datasheet 4.8 TB/s
        (10501, 384, 1008.1),  # RTX 4090, datasheet 1008 GB/s
        (1215, 5120, 1555.2),  # A100 40GB, datasheet 1555 GB/s
    ],
)
def test_peak_bandwidth_matches_datasheets(clock_mhz, bus_bits, gbps):
    assert peak_bandwidth_gbps(clock_mhz, bus_bits) == pytest.approx(gbps, abs=0.1)


def test_peak_bandwidth_unknown_inputs():
    assert peak_bandwidth_gbps(None, 5120) is None
    assert peak_bandwidth_gbps(2619, 0) is None


@pytest.mark.parametrize(
    ("code", "state"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "no_driver"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "no_driver"),
        (pynvml.NVML_ERROR_GPU_IS_LOST, "device_lost"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "permission"),
        (pynvml.NVML_ERROR_TIMEOUT, "error"),
    ],
)
def test_classify_real_nvml_errors(code, state):
    got_state, message = classify(pynvml.NVMLError(code), pynvml)
    assert got_state == state and message and "\n" not in message


def test_classify_non_nvml_failures():
    assert classify(ImportError("no module named pynvml"))[0] == "no_driver"
    state, message = classify(ValueError("bad\nthing"))
    assert state == "error" and message == "GPU telemetry failed: ValueError: bad thing"
