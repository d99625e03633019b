"""``bench`` has one flag per thing it sweeps: ``--methods`` and ``--k`` (the engine's single-value
spellings are their aliases, shown once), with help that states the true defaults, and the k bound
from ``EngineConfig`` alone."""

from __future__ import annotations

import argparse

import pytest

from specterm.cli import build_parser
from specterm.cli.bench import DEFAULT_KS, DEFAULT_METHODS, _specs
from specterm.errors import ConfigError


def _bench_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["bench"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--methods", "ngram", "--k", "3"],
        ["--method", "ngram", "-k", "3"],
        ["--num-speculative-tokens", "3", "--method", "ngram"],
    ],
)
def test_the_old_spellings_are_aliases_of_the_list_flags(argv):
    args = _bench_parser().parse_args(argv)
    assert (args.methods, args.ks) == ("ngram", "3")
    assert not hasattr(args, "method") and not hasattr(args, "num_speculative_tokens")


def test_help_shows_each_flag_once_with_its_true_default():
    text = " ".join(_bench_parser().format_help().split())
    assert text.count("--method LIST") == 1 and text.count("--k LIST, -k LIST, --num-speculative-tokens LIST") == 1
    assert f"(default {','.join(DEFAULT_METHODS)})" in text
    assert f"each 1..16 (default {','.join(map(str, DEFAULT_KS))})" in text
    assert "default 4" not in text


def test_a_k_out_of_engine_configs_bound_is_one_line():
    args = _bench_parser().parse_args(["--methods", "ngram", "--k", "4,17"])
    with pytest.raises(ConfigError, match=r"^bad --k: 17 \(each must be 1\.\.16\)$"):
        _specs(args, None)
