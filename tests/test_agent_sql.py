"""The SQL and ops tools on the real shipped database: read-only guards, bounds, failures as results."""

from __future__ import annotations

import hashlib
import sqlite3
import time

import pytest

from specterm.agent.definition import ToolDef
from specterm.agent.loader import load_agent
from specterm.agent.sqltool import database_path
from specterm.agent.tools import ToolBox


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("agent-cache")


@pytest.fixture
def box(cache, monkeypatch):
    monkeypatch.setenv("SPECTERM_CACHE_DIR", str(cache))
    return ToolBox(load_agent("sql_analyst"))


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_database_is_built_once_from_the_script(box):
    path = box.db().path
    assert path.is_file() and path.name.startswith("shop-")
    assert database_path("sql_analyst", box.agent.sql_script) == path
    assert box.call("list_tables", {}).content == "customers, orders, payments, products"
    described = box.call("describe_table", {"table": "orders"})
    assert described.ok and "customer_id INTEGER" in described.content and "1800 rows" in described.content


def test_a_select_returns_rows_and_states_its_limits(box):
    out = box.call(
        "query_sql", {"sql": "SELECT country, count(*) AS n FROM customers GROUP BY country ORDER BY n DESC"}
    )
    assert out.ok and not out.truncated
    lines = out.content.splitlines()
    assert lines[0] == "country\tn" and lines[1].startswith("US\t")
    assert lines[-1].startswith("(8 rows;") and "limits 50 rows, 4000 bytes" in lines[-1]


def test_results_are_bounded_in_rows_and_bytes(box):
    rows = box.call("query_sql", {"sql": "SELECT id FROM orders"})
    assert rows.ok and rows.truncated
    assert len(rows.content.splitlines()) == 1 + 50 + 1 and "truncated: more rows exist" in rows.content
    wide = box.call("query_sql", {"sql": "SELECT email, name, country, signup_date, email FROM customers"})
    assert wide.ok and wide.truncated and len(wide.content.encode()) <= 4000 + 120


HOSTILE = [
    "DROP TABLE customers",
    "DELETE FROM orders",
    "UPDATE products SET price = 0",
    "INSERT INTO customers VALUES (999, 'x', 'x@x', 'US', '2025-01-01')",
    "CREATE TABLE evil (x)",
    "ALTER TABLE orders ADD COLUMN x",
    "CREATE TEMP TABLE t AS SELECT 1",
    "ATTACH DATABASE '{evil}' AS evil",  # {evil}: a path in the test's tmp_path, checked afterwards
    "PRAGMA writable_schema = 1",
    "PRAGMA user_version = 7",
    "PRAGMA journal_mode",
    "SELECT 1; DROP TABLE customers",
    "BEGIN",
    "VACUUM",
    "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r",
    "SELECT load_extension('/tmp/x.so')",
    "SELECT length(randomblob(100000000))",
]


@pytest.mark.parametrize("sql", HOSTILE)
def test_writes_ddl_attach_pragma_and_multiple_statements_are_refused(box, sql, tmp_path):
    evil = tmp_path / "specterm-evil.db"  # where an ATTACH that got through would create a database
    sql = sql.replace("{evil}", str(evil))
    path = box.db().path
    before = sha(path)
    out = box.call("query_sql", {"sql": sql})
    assert not out.ok and out.error and "\n" not in out.error
    assert out.error.startswith(("refused:", "SQL error:")), out.error
    if sql.startswith(("DROP", "ATTACH", "DELETE", "UPDATE", "PRAGMA writable")):
        # The authorizer names the action it denied (DROP TABLE first deletes from sqlite_master).
        assert any(f"denied: {a}" in out.error for a in ("DELETE", "ATTACH", "UPDATE", "PRAGMA")), out.error
    assert sha(path) == before
    assert not evil.exists()


def test_an_attach_that_got_through_would_leave_the_file_the_check_looks_for(tmp_path):
    # What keeps the check above honest: outside the guards, that very statement creates the file.
    evil = tmp_path / "specterm-evil.db"
    conn = sqlite3.connect(":memory:")
    conn.execute(next(sql for sql in HOSTILE if sql.startswith("ATTACH")).replace("{evil}", str(evil)))
    conn.close()
    assert evil.exists()


def test_even_without_the_authorizer_the_file_is_read_only(box):
    # The second guard on its own: the read-only URI refuses a write that would pass an authorizer.
    conn = box.db()._connect()
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        conn.execute("DELETE FROM orders")
    conn.close()


def test_a_slow_query_is_interrupted_and_reported(cache, monkeypatch):
    monkeypatch.setenv("SPECTERM_CACHE_DIR", str(cache))
    agent = load_agent("sql_analyst")
    tools = [t.model_copy(update={"timeout_s": 0.3}) if t.name == "query_sql" else t for t in agent.tools]
    box = ToolBox(agent.model_copy(update={"tools": tools}))
    out = box.call("query_sql", {"sql": "SELECT count(*) FROM orders a, orders b, orders c"})
    assert not out.ok and "longer than 0.3s" in out.error


def test_bad_arguments_never_reach_the_tool(box):
    out = box.call("query_sql", {"sql": "", "extra": 1})
    assert not out.ok and out.error.startswith("bad arguments for query_sql")
    assert not box.call("describe_table", {"table": "sqlite_master"}).ok
    assert box.call("no_such_tool", {}).error == "unknown tool 'no_such_tool'"


def test_a_raising_tool_becomes_an_error_result():
    agent = load_agent("ops_assistant")
    loose = ToolDef(name="capacity", description="d", handler="ops.capacity", parameters={"type": "object"})
    box = ToolBox(agent.model_copy(update={"tools": [loose]}))
    out = box.call("capacity", {})
    assert not out.ok and out.error == "tool failed: KeyError: 'peak_rps'"


class SlowStore:
    """A vector store that never answers in time: the worker-thread timeout must cut it off."""

    def search(self, query, k):
        time.sleep(3)
        return []


def test_a_tool_that_hangs_times_out_as_an_error_result():
    agent = load_agent("ops_assistant")
    tools = [t.model_copy(update={"timeout_s": 0.2}) for t in agent.tools]
    box = ToolBox(agent.model_copy(update={"tools": tools}), store=SlowStore())
    out = box.call("search_docs", {"query": "queue"})
    assert not out.ok and out.error == "tool timed out after 0.2s"


def test_ops_calculators():
    box = ToolBox(load_agent("ops_assistant"))
    assert (
        box.call("sla_budget", {"slo_percent": 99.9, "window_days": 30}).content
        == "error budget for 99.9% over 30 days: 43.2 minutes"
    )
    spent = box.call("sla_budget", {"slo_percent": 99.95, "window_days": 30, "consumed_minutes": 10.8})
    assert "21.6 minutes" in spent.content and "remaining 10.8 minutes (50% spent)" in spent.content
    assert box.call("capacity", {"peak_rps": 1000, "rps_per_replica": 150}).content.startswith("replicas needed: 9 ")
    assert box.call("capacity", {"peak_rps": 10, "rps_per_replica": 150, "headroom_percent": 0}).content.startswith(
        "replicas needed: 2 "
    )
    assert not box.call("sla_budget", {"slo_percent": 100, "window_days": 30}).ok


def test_eval_cases_have_real_ground_truth(box):
    """scripts/agent_eval.py's cases: gold SQL runs read-only and returns rows; calculator cases are
    valid calls; search cases name a shipped document."""
    import tomllib

    sql_cases = tomllib.loads((box.agent.path / "eval.toml").read_text())["case"]
    assert len(sql_cases) >= 15
    for case in sql_cases:
        text, truncated = box.db().query(case["sql"])
        assert not truncated and len(text.splitlines()) == 3, case  # header, one row, limits note
    ops = load_agent("ops_assistant")
    ops_box = ToolBox(ops)
    ops_cases = tomllib.loads((ops.path / "eval.toml").read_text())["case"]
    assert len(ops_cases) >= 15
    for case in ops_cases:
        assert ops.tool(case["tool"]) is not None and case["answer"]
        if "doc" in case:
            assert (ops.docs_dir / case["doc"]).is_file()
        else:
            out = ops_box.call(case["tool"], case["arguments"])
            assert out.ok and any(a in out.content for a in case["answer"]), (case, out)
