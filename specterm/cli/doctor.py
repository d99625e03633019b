"""``specterm doctor``: print the facts from ``specterm.doctor`` on one screen (or as JSON)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from specterm.telemetry.devices import PANEL_LABELS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check Python, vLLM, CPU, GPUs and models before a run",
        description="Check what a run needs. Exits non-zero, reason first, when the main job cannot run.",
    )
    parser.add_argument("--json", action="store_true", help="print the facts as JSON")
    parser.add_argument(
        "--deep",
        action="store_true",
        help="also run the speculative-decoding sanity check on the tiny pair (about a minute)",
    )
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    from specterm.doctor import gather

    report = gather(deep=args.deep)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        from rich.console import Console

        print_report(report, Console(highlight=False))
    return report.exit_code


def _yes(flag: bool | None) -> str:
    return "yes" if flag else "no"


def rows(report: Any) -> list[tuple[str, str]]:
    """(label, value) lines of the facts table, plain text."""
    f = report.facts
    engine, cpu, gpus, models, so = f["engine"], f["cpu"], f["gpus"], f["models"], f["structured_outputs"]
    out = [
        ("python", f"{f['python']['version']} ({f['python']['executable']})"),
        ("specterm", f["specterm"]["version"]),
    ]
    if engine["vllm_version"]:
        out.append(("vLLM", f"{engine['vllm_version']} — {engine['build'].upper()} build ({engine['distribution']})"))
    else:
        out.append(("vLLM", f"not installed — {engine['install']}"))
    out.append(("torch", f["torch"]["version"] or "not installed"))
    flags = cpu["flags"]
    feature = ", ".join(k for k, v in flags.items() if v) if flags else "unknown"
    cores = f"{cpu['physical_cores']} cores, " if cpu["physical_cores"] else ""
    out.append(("CPU", f"{cpu['model']} — {cores}{cpu['usable_cpus']}/{cpu['logical_cpus']} CPUs usable"))
    out.append(("CPU features", feature or "none of AVX2/AVX-512/AMX"))
    if gpus["devices"]:
        driver = f" (driver {gpus['driver_version']})" if gpus.get("driver_version") else ""
        out.append(("GPUs", f"{len(gpus['devices'])} NVIDIA{driver}"))
        for d in gpus["devices"]:
            where = (
                f"GPU {d['index']}" if d["mig_gpu_instance"] is None else f"GPU {d['index']} GI {d['mig_gpu_instance']}"
            )
            peak = f", peak {d['peak_gbps']:.0f} GB/s" if d["peak_gbps"] and d["source"] == "gpm_dram_bw" else ""
            why = f" ({d['why']})" if d["why"] and d["source"] != "gpm_dram_bw" else ""
            out.append((f"  {where}", f"{d['name']} — panel: {PANEL_LABELS[d['source']]}{peak}{why}"))
    else:
        out.append(("GPUs", f"none — {gpus['message']}"))
        out.append(("bandwidth panel", gpus["panel"]))
    out.extend(_model_rows(models))
    out.append(
        (
            "structured outputs",
            f"xgrammar {so['xgrammar_version']}" if so["available"] else "unavailable (xgrammar not installed)",
        )
    )
    sd = f["suffix_decoding"]
    out.append(
        (
            "suffix decoding",
            f"arctic-inference {sd['arctic_inference_version']} (--method suffix)"
            if sd["available"]
            else f"unavailable — {sd['detail']}",
        )
    )
    if "deep" in f:
        out.append(("deep checks", _deep_line(f["deep"])))
    return out


def _deep_line(deep: dict[str, Any]) -> str:
    if not deep.get("ran"):
        return f"not run — {deep['detail']}"
    temps = ", ".join(f"T={t:g}" for t in deep["temperatures"])
    if deep["violations"]:
        return f"sanity FAILED ({len(deep['violations'])} violation(s), listed above; checked {temps})"
    return f"sanity passed: draft = target accepts ≥98%, greedy output lossless ({temps})"


def _model_rows(models: dict[str, Any]) -> list[tuple[str, str]]:
    if models["state"] in ("not_configured", "error"):
        return [("default models", models["detail"])]
    lines = []
    for role in ("target", "draft"):
        check = models[role]
        status = (
            "loads"
            if check["loads"]
            else ("not built yet" if not check["exists"] and models.get("builds_on_first_run") else "does NOT load")
        )
        lines.append((f"{role} model", f"{status} — {check['path']} ({check['detail']})"))
    return lines


def print_report(report: Any, console: Any) -> None:
    """Reasons a run cannot start first, then the facts, then warnings and known issues."""
    from rich.table import Table
    from rich.text import Text

    # Text objects throughout: model paths and GPU names must never be read as Rich markup.
    for problem in report.problems:
        console.print(Text.assemble(("✗ cannot run: ", "bold red"), problem))
    if not report.problems:
        console.print(Text("✓ ready to run", style="bold green"))
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    for label, value in rows(report):
        table.add_row(Text(label), Text(value))
    console.print(table)
    for warning in report.warnings:
        console.print(Text.assemble(("! ", "bold yellow"), warning))
    for issue in report.known_issues:
        console.print(Text.assemble(("known issue: ", "yellow"), issue))
