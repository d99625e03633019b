"""``specterm agents``: scaffold an agent folder (``new NAME``) and list what is installed (``list``).

``new NAME [--dir DIR]`` writes ``DIR/NAME`` (default: the current directory) with ``agent.toml``,
``tools.py`` (one example tool) and a README; ``specterm run --agent ./NAME`` runs it as it is.
``list`` shows the agents specterm finds (``$SPECTERM_AGENTS_DIR`` first, then the shipped ones; a
broken one with its one-line error) and the tools installed packages provide (entry point group
``specterm.tools``).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "agents",
        help="scaffold an agent folder with its own tools; list installed agents and tools",
        description=__doc__,
    )
    verbs = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    new = verbs.add_parser("new", help="write a working agent folder NAME (agent.toml + tools.py)")
    new.add_argument("name", help="the agent's name (lowercase letters, digits, _)")
    new.add_argument("--dir", default=".", help="where to create the folder (default: the current directory)")
    new.set_defaults(func=handle_new)
    ls = verbs.add_parser("list", help="agents specterm finds and tools installed packages provide")
    ls.set_defaults(func=handle_list)


def handle_new(args: argparse.Namespace) -> int:
    from specterm.agent.scaffold import scaffold

    folder = scaffold(args.name, Path(args.dir))
    # "./NAME", not "NAME": --agent takes a path only when it has a separator (else it is a name)
    shown = folder if folder.is_absolute() else f".{os.sep}{folder}"
    print(f"created {folder}/ (agent.toml, tools.py, README.md)")
    from specterm.models.defaults import GENERAL_MODEL_HINT, TRAINED_FOR

    # The default pair learned the shipped agents' tools only: say so, and name one that can do this.
    print(
        f"the local pairs know only the shipped agents ({', '.join(TRAINED_FOR)}); for new tools use "
        f"{GENERAL_MODEL_HINT}"
    )
    print(
        f"try: specterm run --agent {shown} --target DIR --draft DIR \"How many words are in 'the quick brown fox'?\""
    )
    return 0


def handle_list(args: argparse.Namespace) -> int:
    from specterm.agent.loader import load_agent_file
    from specterm.agent.plugins import ENTRY_POINT_GROUP, entry_point_tools, entry_source
    from specterm.errors import SpectermError
    from specterm.paths import agent_dirs, shipped_agents_dir

    shipped = shipped_agents_dir().resolve()
    seen: set[str] = set()
    print("agents (first found wins; $SPECTERM_AGENTS_DIR is searched before the shipped ones):")
    for root in agent_dirs():
        if not root.is_dir():
            continue
        kind = "shipped" if root.resolve() == shipped else "folder"
        for folder in sorted(p for p in root.iterdir() if (p / "agent.toml").is_file()):
            shadowed = " (shadowed)" if folder.name in seen else ""
            seen.add(folder.name)
            try:
                agent = load_agent_file(folder / "agent.toml")
            except SpectermError as err:
                print(f"  {folder.name:<18} {kind:<8} {folder}{shadowed}\n    error: {err}")
                continue
            tools = ", ".join(f"{t.name} ({t.handler})" for t in agent.tools)
            print(f"  {folder.name:<18} {kind:<8} {folder}{shadowed}\n    tools: {tools}")
    eps = entry_point_tools()
    print(f'tools from installed packages (entry points {ENTRY_POINT_GROUP}; handler = "entry:NAME"):')
    if not eps:
        print("  none")
    for ep in eps:
        print(f"  {ep.name:<18} {entry_source(ep):<24} {ep.value}")
    return 0
