"""specterm's progress bars, built here only: one look (what, a bar, done of total, time elapsed).

``build_progress``: the one-time model builds (the smollm2-agent pair: download, GGUF import, LoRA
merge, draft), fed by the builders' ``log`` callbacks: each message starts the next stage. Nothing
shows when nothing is built (the usual case: the pair is cached). On a terminal the stages are a rich
progress bar on stderr; elsewhere (CI logs, pipes) one plain line per stage.

``run_progress``: ``specterm bench``'s measured runs, fed ``(description, advance)`` by its runners.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

BUILD_STAGES = 4
"""What a full smollm2-agent build logs: download, import, merge, draft (fewer when the base is cached)."""


@contextmanager
def build_progress(
    title: str = "building the model pair", stages: int = BUILD_STAGES
) -> Iterator[Callable[[str], None]]:
    if not sys.stderr.isatty():
        yield lambda message: print(f"specterm: {message}", file=sys.stderr, flush=True)
        return
    from rich.console import Console
    from rich.progress import Progress, TextColumn

    progress: Progress | None = None
    task = None

    def log(message: str) -> None:
        nonlocal progress, task
        if progress is None:
            progress = _progress(
                TextColumn(f"[bold]{title}[/]"), TextColumn("{task.description}"), console=Console(stderr=True)
            )
            progress.start()
            task = progress.add_task(message, total=stages)
        else:
            progress.update(task, advance=1, description=message)

    try:
        yield log
        if progress is not None:
            progress.update(task, completed=stages, description="done")
    finally:
        if progress is not None:
            progress.stop()


@contextmanager
def run_progress(console: Any, total: int) -> Iterator[Callable[[str, int], None]]:
    """A bar over ``total`` measured runs on ``console``, gone when they are (the results follow it);
    yields ``progress(description, advance)`` for the bench runners."""
    from rich.progress import TextColumn

    progress = _progress(TextColumn("{task.description}"), console=console, transient=True)
    with progress:
        task = progress.add_task("starting", total=total)
        yield lambda description, advance: progress.update(task, description=description, advance=advance)


def _progress(lead: Any, *tail: Any, console: Any, transient: bool = False) -> Any:
    """A rich ``Progress``: ``lead``, the bar, done of total, time elapsed, then ``tail``."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress(
        lead, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), *tail, console=console, transient=transient
    )
