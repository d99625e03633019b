"""``SPECTERM_PUBLISH`` is obeyed by ``specterm vllm-serve`` as by the publisher and ``attach`` (issue 42
item 2): before, vllm-serve always wrote its own address into the server's environment, so
``SPECTERM_PUBLISH=off`` still published prompts and outputs, and a path set only in the environment
made the server and the viewer miss each other. No server runs here: ``--dry-run`` prints the exact
environment and command the server would get, and attach's one-line error names the address it tried."""

from __future__ import annotations

import shlex

import pytest

from specterm.cli import main
from specterm.engine import wire


def dry_run(capsys, *argv: str) -> dict[str, str]:
    assert main(["vllm-serve", "m", *argv, "--dry-run"]) == 0
    out = capsys.readouterr().out
    words = shlex.split(out)
    return dict(w.split("=", 1) for w in words if "=" in w and w.split("=", 1)[0].startswith("SPECTERM_"))


@pytest.mark.parametrize("value", ["off", "OFF", "0", "none"])
def test_an_explicit_off_in_the_environment_is_obeyed(monkeypatch, capsys, value):
    monkeypatch.setenv(wire.ENV_ADDR, value)
    env = dry_run(capsys)
    assert env == {wire.ENV_ADDR: "off"}  # no address, no token: the publisher stays off


def test_off_on_the_flag_too(monkeypatch, capsys):
    monkeypatch.delenv(wire.ENV_ADDR, raising=False)
    assert dry_run(capsys, "--publish", "off") == {wire.ENV_ADDR: "off"}


def test_a_path_from_the_environment_is_where_both_meet(monkeypatch, capsys, tmp_path):
    sock = tmp_path / "mine.sock"
    monkeypatch.setenv(wire.ENV_ADDR, str(sock))
    assert dry_run(capsys) == {wire.ENV_ADDR: f"ipc://{sock}"}
    # attach, with no address either, looks at the same path (nothing listens there: its error says where)
    assert main(["attach", "--headless"]) != 0
    err = capsys.readouterr().err
    assert str(sock) in err and err.count("\n") == 1


def test_the_flag_wins_over_the_environment(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv(wire.ENV_ADDR, "off")
    assert dry_run(capsys, "--publish", str(tmp_path / "x.sock")) == {wire.ENV_ADDR: f"ipc://{tmp_path / 'x.sock'}"}


def test_a_tcp_address_and_token_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv(wire.ENV_ADDR, "tcp://127.0.0.1:7999")
    monkeypatch.setenv(wire.ENV_TOKEN, "sekrit")
    assert dry_run(capsys) == {wire.ENV_ADDR: "tcp://127.0.0.1:7999", wire.ENV_TOKEN: "sekrit"}


def test_a_bad_address_in_the_environment_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv(wire.ENV_ADDR, "udp://x")
    assert main(["vllm-serve", "m", "--dry-run"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("specterm: error: ") and "udp://x" in err and err.count("\n") == 1


def test_attach_says_publishing_is_off(monkeypatch, capsys):
    monkeypatch.setenv(wire.ENV_ADDR, "off")
    assert main(["attach", "--headless"]) != 0
    err = capsys.readouterr().err
    assert "publishing is off" in err and err.count("\n") == 1
