"""A progress bar for the one-time model builds (the smollm2-agent pair: download, GGUF import,
LoRA merge, draft), fed by the builders' ``log`` callbacks: each message starts the next stage.

Nothing shows when nothing is built (the usual case: the pair is cached). On a terminal the stages
are a rich progress bar with elapsed time on stderr; elsewhere (CI logs, pipes) one plain line per stage.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

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
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress: Progress | None = None
    task = None

    def log(message: str) -> None:
        nonlocal progress, task
        if progress is None:
            progress = Progress(
                TextColumn(f"[bold]{title}[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.description}"),
                console=Console(stderr=True),
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
