"""Read-only SQL over an agent's SQLite database.

The database is built once from the agent's SQL script (``data/shop.sql``) into the cache directory
(``$SPECTERM_CACHE_DIR/agents/<agent>/<script-stem>-<sha12>.sqlite``; a changed script gets a new
file). Model-written SQL is then run with three independent guards, so no single mistake lets a
write through:

1. the file is opened read-only (``file:...?mode=ro`` URI): SQLite itself refuses every write;
2. an authorizer (``set_authorizer``) allows only ``SELECT``, column ``READ`` and ``FUNCTION``
   actions and denies everything else (INSERT/UPDATE/DELETE, DDL, ATTACH, PRAGMA, transactions,
   recursive CTEs) at prepare time, before anything runs;
3. exactly one statement: ``sqlite3`` refuses a second statement in one ``execute``.

A progress handler interrupts a query that runs past its deadline, and no string or blob a query
builds may exceed 1 MB (``SQLITE_LIMIT_LENGTH``). Results are bounded: at most
``max_rows`` rows and ``max_bytes`` bytes of text; the result says how many rows it shows and
whether it was cut. Every refusal is a ``ToolError`` whose message the model sees as the result.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import time
import urllib.request
from pathlib import Path

from specterm.agent.errors import ToolError
from specterm.paths import agent_cache_dir

ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION})
# Authorizer action codes by name (sqlite3 also exports error and limit codes with clashing values).
_ACTIONS = (
    "CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER "
    "CREATE_TEMP_VIEW CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX "
    "DROP_TEMP_TABLE DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ "
    "SELECT TRANSACTION UPDATE ATTACH DETACH ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE "
    "DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE"
).split()
_ACTION_NAMES = {getattr(sqlite3, "SQLITE_" + n): n for n in _ACTIONS if hasattr(sqlite3, "SQLITE_" + n)}
_build_lock = threading.Lock()
MAX_VALUE_BYTES = 1_000_000


def database_path(agent_name: str, script: Path) -> Path:
    """The SQLite file built from ``script`` (built now if missing; atomic, so safe under races)."""
    data = script.read_bytes()
    digest = hashlib.sha256(data).hexdigest()[:12]
    out = agent_cache_dir(agent_name) / f"{script.stem}-{digest}.sqlite"
    with _build_lock:
        if out.is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        try:
            conn.executescript(data.decode("utf-8"))
            conn.commit()
        finally:
            conn.close()
        os.replace(tmp, out)
    return out


def _authorizer(denied: list[str]):
    def check(action, arg1, arg2, dbname, source):  # sqlite3 callback signature
        if action in ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK
        denied.append(_ACTION_NAMES.get(action, str(action)) + (f" {arg1}" if arg1 else ""))
        return sqlite3.SQLITE_DENY

    return check


class ReadOnlyDB:
    """One agent database, opened read-only per call (connections are cheap; calls may come from
    the tool worker thread)."""

    def __init__(self, path: Path, *, max_rows: int = 50, max_bytes: int = 4000) -> None:
        self.path = Path(path)
        self.max_rows, self.max_bytes = max_rows, max_bytes

    def _connect(self) -> sqlite3.Connection:
        uri = "file:" + urllib.request.pathname2url(str(self.path.resolve())) + "?mode=ro"
        return sqlite3.connect(uri, uri=True, check_same_thread=False)

    def tables(self) -> list[str]:
        with self._connect() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]

    def describe(self, table: str) -> str:
        if table not in self.tables():
            raise ToolError(f"no table named {table!r}; tables: {', '.join(self.tables())}")
        with self._connect() as conn:
            cols = conn.execute("SELECT name, type, pk FROM pragma_table_info(?)", (table,)).fetchall()
            count = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        parts = [f"{n} {t}{' primary key' if pk else ''}" for n, t, pk in cols]
        return f"{table}({', '.join(parts)}); {count} rows"

    def query(self, sql: str, *, timeout_s: float = 5.0) -> tuple[str, bool]:
        """Run one read-only statement; returns (result text, truncated)."""
        sql = sql.strip()
        if not sql:
            raise ToolError("empty SQL")
        denied: list[str] = []
        deadline = time.monotonic() + timeout_s
        conn = self._connect()
        try:
            conn.set_authorizer(_authorizer(denied))
            # Bound every string/blob a query can build (randomblob(1e9) would allocate 1 GB).
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
            # Called every N virtual-machine instructions; a non-zero return interrupts the query.
            conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
            try:
                cur = conn.execute(sql)
                rows = cur.fetchmany(self.max_rows + 1)
            except sqlite3.ProgrammingError as err:
                if "one statement" in str(err):
                    raise ToolError("refused: only one SQL statement per call") from None
                raise ToolError(f"SQL error: {err}") from None
            except sqlite3.DatabaseError as err:
                if denied:
                    raise ToolError(
                        f"refused: only read-only SELECT queries are allowed (denied: {denied[0]})"
                    ) from None
                if "interrupted" in str(err):
                    raise ToolError(f"refused: query ran longer than {timeout_s:g}s") from None
                raise ToolError(f"SQL error: {err}") from None
            if cur.description is None:
                raise ToolError("refused: not a query (no result columns)")
            header = [d[0] for d in cur.description]
        finally:
            conn.close()
        return self._format(header, rows)

    def _format(self, header: list[str], rows: list[tuple]) -> tuple[str, bool]:
        more = len(rows) > self.max_rows
        rows = rows[: self.max_rows]
        lines = ["\t".join(header)]
        size = len(lines[0].encode())
        shown = 0
        for row in rows:
            line = "\t".join("NULL" if v is None else str(v) for v in row)
            if size + len(line.encode()) + 1 > self.max_bytes:
                more = True
                break
            lines.append(line)
            size += len(line.encode()) + 1
            shown += 1
        note = f"({shown} rows{'; truncated: more rows exist' if more else ''}; limits {self.max_rows} rows, {self.max_bytes} bytes)"
        return "\n".join(lines + [note]), more
