"""GpuSampler driven step by step through FakeNvml (no GPU here): sources, GB/s maths, MIG, failures."""

from __future__ import annotations

import pynvml
import pytest
from fake_nvml import FakeGpu, FakeMig, FakeNvml

from specterm.events import GpuSample, GpuStatus
from specterm.telemetry import GpuSampler


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.25
        return self.now


def make(nvml: FakeNvml, **kwargs):
    events: list = []
    sampler = GpuSampler(events.append, nvml=nvml, clock=Clock(), **kwargs)
    return sampler, events


def samples(events) -> list[GpuSample]:
    return [e for e in events if isinstance(e, GpuSample)]


def statuses(events) -> list[GpuStatus]:
    return [e for e in events if isinstance(e, GpuStatus)]


def test_a_reading_past_peak_is_held_at_peak():
    """NVML defines GPM's DRAM_BW_UTIL as 0-100 % of peak: a jittery 103.5 is shown as peak, never as
    "≈5088 of 4917 GB/s" (issue 42 item 8), and the fake UI samples stay in range too."""
    from doubles import fake_gpu_samples

    fake = FakeNvml([FakeGpu(dram_bw=[0.0, 103.5, -0.2])])
    sampler, events = make(fake)
    for _ in range(3):
        sampler.sample_once()
    got = samples(events)
    assert [s.bw_util_pct for s in got] == [100.0, 0.0]
    assert got[0].est_gbps == pytest.approx(got[0].peak_gbps)
    shown = [e for e in fake_gpu_samples(40) if isinstance(e, GpuSample)]
    assert all(0 <= s.bw_util_pct <= 100 and s.est_gbps <= s.peak_gbps for s in shown)


def test_gpm_supported_gives_dram_bandwidth_and_gbps():
    # First scripted value belongs to the priming sample; the next ones to each tick's interval.
    fake = FakeNvml([FakeGpu(dram_bw=[0.0, 25.0, 80.0])])
    sampler, events = make(fake)
    assert sampler.sample_once() == 0.25  # init + prime, no sample yet
    assert [s.state for s in statuses(events)] == ["ok"]
    assert "DRAM bandwidth (GPM)" in statuses(events)[0].message
    sampler.sample_once()
    sampler.sample_once()
    got = samples(events)
    assert [s.source for s in got] == ["gpm_dram_bw", "gpm_dram_bw"]
    assert [s.bw_util_pct for s in got] == [25.0, 80.0]
    peak = 3201e6 * 6144 * 2 / 8 / 1e9  # 4916.7 GB/s for an H200
    assert got[0].peak_gbps == pytest.approx(peak)
    assert got[0].est_gbps == pytest.approx(0.25 * peak)
    assert got[1].est_gbps == pytest.approx(0.80 * peak)
    s = got[1]
    assert (s.mem_used_bytes, s.mem_total_bytes) == (20_000_000_000, 143_771_000_000)
    assert (s.sm_clock_mhz, s.mem_clock_mhz, s.power_w) == (1980, 3201, 350.0)
    assert s.name == "NVIDIA H200" and s.device == 0
    assert [e.t for e in events] == sorted(e.t for e in events)  # stamped by the injected clock
    # One GPM sample per tick (plus the priming one), alternating between two buffers.
    assert fake.calls["nvmlGpmSampleGet"] == 3
    assert fake.calls["nvmlGpmSampleAlloc"] == 2
    assert "nvmlDeviceGetUtilizationRates" not in fake.calls


def test_gpm_unsupported_falls_back_to_duty_cycle_without_gbps():
    fake = FakeNvml(
        [FakeGpu(name="Tesla T4", gpm=False, mem_duty=[12, 34], max_mem_clock_mhz=5001, bus_width_bits=256)]
    )
    sampler, events = make(fake)
    sampler.sample_once()
    assert "memory duty cycle" in statuses(events)[0].message
    sampler.sample_once()
    sampler.sample_once()
    got = samples(events)
    assert [s.source for s in got] == ["mem_duty_cycle", "mem_duty_cycle"]
    assert [s.bw_util_pct for s in got] == [12.0, 34.0]
    # A duty cycle is not a bandwidth: never turned into GB/s, though the peak is still known.
    assert all(s.est_gbps is None for s in got)
    assert got[0].peak_gbps == pytest.approx(5001e6 * 256 * 2 / 8 / 1e9)  # 320 GB/s, the T4 datasheet
    assert "nvmlGpmSampleGet" not in fake.calls


def test_gpm_query_unsupported_by_old_driver_falls_back():
    fake = FakeNvml([FakeGpu()])
    fake.fail("nvmlGpmQueryDeviceSupport", pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
    sampler, events = make(fake)
    sampler.sample_once()
    sampler.sample_once()
    assert samples(events)[0].source == "mem_duty_cycle"


def test_missing_power_is_none_and_not_asked_again():
    fake = FakeNvml([FakeGpu(power_mw=None)])
    sampler, events = make(fake)
    for _ in range(4):
        sampler.sample_once()
    assert [s.power_w for s in samples(events)] == [None, None, None]
    assert fake.calls["nvmlDeviceGetPowerUsage"] == 1  # NOT_SUPPORTED is remembered
    assert sampler.state == "ok"


def test_mig_samples_each_gpu_instance_with_gpm():
    migs = [
        FakeMig(gi_id=1, dram_bw=[0.0, 30.0]),
        FakeMig(gi_id=2, name="NVIDIA H200 MIG 4g.71gb", dram_bw=[0.0, 70.0]),
    ]
    fake = FakeNvml([FakeGpu(migs=migs)])
    sampler, events = make(fake)
    sampler.sample_once()
    assert "GI 1" in statuses(events)[0].message and "GI 2" in statuses(events)[0].message
    sampler.sample_once()
    got = samples(events)
    assert [(s.source, s.bw_util_pct) for s in got] == [("gpm_dram_bw", 30.0), ("gpm_dram_bw", 70.0)]
    assert got[1].name == "NVIDIA H200 MIG 4g.71gb"
    assert got[0].mem_total_bytes == 71 * 2**30  # the instance's memory, not the whole GPU's
    assert all(s.est_gbps is None for s in got)  # no documented peak for a GPU instance
    assert fake.calls["nvmlGpmMigSampleGet"] == 4 and "nvmlGpmSampleGet" not in fake.calls
    assert got[0].sm_clock_mhz == 1980  # clocks come from the parent GPU


def test_mig_without_gpm_shows_nothing_rather_than_a_wrong_number():
    fake = FakeNvml([FakeGpu(name="NVIDIA A100", gpm=False, migs=[FakeMig(gi_id=3)])])
    sampler, events = make(fake)
    sampler.sample_once()
    sampler.sample_once()
    (s,) = samples(events)
    assert s.source == "none" and s.bw_util_pct is None and s.est_gbps is None
    assert "no memory counter" in statuses(events)[0].message


def test_no_driver_emits_one_status_and_stops():
    fake = FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    sampler, events = make(fake)
    assert sampler.sample_once() is None
    assert sampler.sample_once() is None
    assert [(s.state, s.device) for s in statuses(events)] == [("no_driver", None)]
    assert "driver not loaded" in statuses(events)[0].message
    assert sampler.finished and not samples(events)


def test_zero_devices_is_no_gpu_and_nvml_is_shut_down():
    fake = FakeNvml([])
    sampler, events = make(fake)
    assert sampler.sample_once() is None
    assert [s.state for s in statuses(events)] == ["no_gpu"]
    assert fake.inits == fake.shutdowns == 1


def test_device_lost_mid_run_reports_once_and_backs_off_then_recovers():
    fake = FakeNvml([FakeGpu()])
    sampler, events = make(fake, first_backoff_s=1.0, max_backoff_s=8.0)
    sampler.sample_once()
    sampler.sample_once()
    assert len(samples(events)) == 1
    fake.lose(0)
    delays = [sampler.sample_once() for _ in range(6)]  # never raises
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]  # exponential, capped
    lost = [s for s in statuses(events) if s.state == "device_lost"]
    assert len(lost) == 1 and lost[0].device == 0 and lost[0].message.startswith("GPU 0: GPU lost")
    assert fake.live_samples == 0  # GPM buffers freed on the way out
    assert fake.initialised == 0  # every re-init attempt was shut down again
    fake.restore(0)
    assert sampler.sample_once() == 0.25
    assert [s.state for s in statuses(events)] == ["ok", "device_lost", "ok"]
    sampler.sample_once()
    assert len(samples(events)) == 2
    fake.lose(0)
    assert sampler.sample_once() == 1.0  # back-off was reset by the successful sample


def test_one_lost_gpu_of_two_leaves_the_other_sampled():
    fake = FakeNvml([FakeGpu(), FakeGpu(name="NVIDIA H100")])
    fake.lose(0)
    sampler, events = make(fake)
    sampler.sample_once()
    assert statuses(events)[0].state == "ok"
    sampler.sample_once()
    assert [s.name for s in samples(events)] == ["NVIDIA H100"]


def test_permission_error_stops_with_a_clear_status():
    fake = FakeNvml([FakeGpu()])
    fake.fail("nvmlDeviceGetHandleByIndex", pynvml.NVML_ERROR_NO_PERMISSION)
    sampler, events = make(fake)
    assert sampler.sample_once() is None
    (status,) = statuses(events)
    assert status.state == "permission" and "/dev/nvidia" in status.message
    assert fake.initialised == 0


def test_gpm_not_permitted_falls_back_to_duty_cycle_and_says_why():
    fake = FakeNvml([FakeGpu(mem_duty=55)])
    fake.fail("nvmlGpmSampleGet", pynvml.NVML_ERROR_NO_PERMISSION)
    sampler, events = make(fake)
    sampler.sample_once()
    assert "GPM not permitted" in statuses(events)[0].message
    assert fake.live_samples == 0
    sampler.sample_once()
    assert (samples(events)[0].source, samples(events)[0].bw_util_pct) == ("mem_duty_cycle", 55.0)


def test_unknown_nvml_error_mid_run_is_error_state_and_retried():
    fake = FakeNvml([FakeGpu()])
    sampler, events = make(fake)
    sampler.sample_once()
    fake.fail("nvmlGpmMetricsGet", pynvml.NVML_ERROR_UNKNOWN)
    assert sampler.sample_once() == 1.0
    assert statuses(events)[-1].state == "error"
    assert sampler.sample_once() == 0.25  # re-initialised
    assert [s.state for s in statuses(events)] == ["ok", "error", "ok"]


def test_a_raising_sink_does_not_stop_sampling():
    fake = FakeNvml([FakeGpu()])
    seen = []

    def sink(event):
        seen.append(event)
        raise RuntimeError("UI went away")

    sampler = GpuSampler(sink, nvml=fake)
    for _ in range(3):
        assert sampler.sample_once() == 0.25
    assert sampler.state == "ok" and len(seen) == 3  # ok status + 2 samples


def test_close_frees_everything_and_period_is_clamped():
    fake = FakeNvml([FakeGpu()])
    sampler, _ = make(fake, period_s=0.01)
    assert sampler.period_s == 0.1  # GPM cannot sample faster than its 100 ms refresh
    sampler.sample_once()
    sampler.close()
    assert fake.live_samples == 0 and fake.initialised == 0
    assert sampler.sample_once() is None
    with pytest.raises(ValueError):
        GpuSampler(print, period_s=0)


def test_a_sink_may_stop_the_sampler_from_inside_an_event():
    fake = FakeNvml([FakeGpu()])
    sampler = None

    def sink(event):
        if isinstance(event, GpuSample):
            sampler.stop()  # same thread, lock held: must not deadlock

    sampler = GpuSampler(sink, nvml=fake)
    sampler.sample_once()
    assert sampler.sample_once() == 0.25
    assert sampler.finished and fake.initialised == 0
    assert sampler.sample_once() is None
