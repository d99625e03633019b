"""Agent transcripts for training the embedded pair, made by running the real tools.

For templated questions (the shapes of ``agents/*/eval.toml``, with varied entities: customers,
products, countries, statuses, SLOs, loads, runbook topics) a scripted "oracle" agent walks the real
loop: retrieval (the agent's own vector store), ``{"tool":...,"arguments":{...}}`` calls in compact
JSON (as structured output emits it with ``disable_any_whitespace``), the real tool result
(``ToolBox.call`` → ``for_prompt``), and a final ``{"answer":...}`` built from the result.
Multi-step where the data needs it (list_tables → describe_table → query_sql → answer).

Each transcript is the text of ``render_prompt`` after the final answer (without the trailing
``<|call|>`` line) plus the character spans of the calls, which are the only trained positions.
Deterministic for a seed.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

from specterm.agent.definition import load_agent
from specterm.agent.prompt import render_prompt
from specterm.agent.tools import ToolBox

COUNTRIES = {"US": ["the US", "the United States"], "DE": ["Germany"], "FR": ["France"],
             "JP": ["Japan"], "GB": ["the UK", "Britain"], "BR": ["Brazil"], "NG": ["Nigeria"],
             "IN": ["India"]}
ORDER_STATUS = {"placed": ["placed"], "shipped": ["shipped"], "delivered": ["delivered"],
                "cancelled": ["cancelled", "canceled"], "refunded": ["refunded"]}
PAY_STATUS = ["captured", "failed", "refunded"]
METHODS = {"card": "card", "paypal": "paypal", "bank_transfer": "bank transfer"}
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
STOP = set("a an the of do does we our is are was were what how when who which can must to for in on "
           "i should my me be it at by with there any".split())


@dataclass
class Transcript:
    agent: str
    text: str
    calls: list[tuple[int, int]]  # character spans of the generated calls


def compact(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _first(result: str) -> str:
    lines = result.split("\n")
    return lines[1].split("\t")[0] if len(lines) > 2 else ""


def _sql_cases(rng: random.Random, db, n: int):
    names = [r.split("\t")[0] for r in db.query("SELECT name FROM customers")[0].split("\n")[1:-1]]
    names = [x for x in names if "'" not in x]
    products = [r for r in db.query("SELECT name FROM products")[0].split("\n")[1:-1]]
    cats = [r for r in db.query("SELECT DISTINCT category FROM products")[0].split("\n")[1:-1]]
    for _ in range(n):
        k = rng.randrange(21)
        if k == 0:
            q = rng.choice(["How many customers are there?", "How many customers do we have?",
                            "What is the number of customers?", "Count the customers."])
            yield q, "SELECT count(*) FROM customers", ["customers"], "There are {v} customers."
        elif k == 1:
            c = rng.choice(list(COUNTRIES))
            w = rng.choice(COUNTRIES[c])
            q = rng.choice([f"How many customers are from {w}?", f"How many customers live in {w}?",
                            f"Number of customers in {w}?"])
            yield q, f"SELECT count(*) FROM customers WHERE country = '{c}'", [], f"{{v}} customers are from {w}."
        elif k == 2:
            s = rng.choice(list(ORDER_STATUS))
            w = rng.choice(ORDER_STATUS[s])
            q = rng.choice([f"How many orders were {w}?", f"How many {w} orders are there?",
                            f"Count the orders that were {w}."])
            yield q, f"SELECT count(*) FROM orders WHERE status = '{s}'", [], f"{{v}} orders were {w}."
        elif k == 3:
            s = rng.choice(PAY_STATUS)
            q = rng.choice([f"What is the total revenue from {s} payments?",
                            f"What is the sum of {s} payments?", f"Total amount of {s} payments?"])
            yield (q, f"SELECT round(sum(amount), 2) FROM payments WHERE status = '{s}'",
                   ["*", "payments"], f"The total of {s} payments is {{v}}.")
        elif k == 4:
            m = rng.choice(list(METHODS))
            q = rng.choice([f"How many payments were made by {METHODS[m]}?",
                            f"How many payments were made with {METHODS[m]}?", f"How many payments used {METHODS[m]}?"])
            yield q, f"SELECT count(*) FROM payments WHERE method = '{m}'", ["payments"], \
                f"{{v}} payments were made by {METHODS[m]}."
        elif k == 5:
            p = rng.choice(products)
            q = rng.choice([f"What is the price of the {p}?", f"How much does the {p} cost?"])
            yield q, f"SELECT price FROM products WHERE name = '{p}'", ["products"], f"The {p} costs {{v}}."
        elif k == 6:
            c = rng.choice(names)
            q = rng.choice([f"How many orders did {c} place?", f"How many orders does {c} have?"])
            yield (q, "SELECT count(*) FROM orders JOIN customers ON orders.customer_id = customers.id "
                   f"WHERE customers.name = '{c}'", ["*", "orders"], f"{c} placed {{v}} orders.")
        elif k == 7:
            c = rng.choice(cats)
            q = rng.choice([f"How many products are in the {c} category?", f"How many {c} products are there?"])
            yield q, f"SELECT count(*) FROM products WHERE category = '{c}'", [], f"There are {{v}} {c} products."
        elif k == 8:
            c = rng.choice(names)
            q = rng.choice([f"Which country is {c} from?", f"Where does {c} live?"])
            yield q, f"SELECT country FROM customers WHERE name = '{c}'", ["customers"], f"{c} is from {{v}}."
        elif k == 9:
            c = rng.choice(cats)
            q = rng.choice([f"What is the most expensive product in {c}?", f"Which {c} product costs the most?"])
            yield (q, f"SELECT name FROM products WHERE category = '{c}' ORDER BY price DESC LIMIT 1",
                   ["products"], f"The most expensive {c} product is the {{v}}.")
        elif k == 10:
            s = rng.choice(list(ORDER_STATUS))
            w = rng.choice(ORDER_STATUS[s])
            q = rng.choice([f"What is the total value of {w} orders?", f"Sum of the totals of {w} orders?"])
            yield (q, f"SELECT round(sum(total), 2) FROM orders WHERE status = '{s}'", ["*", "orders"],
                   f"{w.capitalize()} orders total {{v}}.")
        elif k == 12:
            top = rng.random() < 0.6
            c = rng.choice([None, None, *cats])
            where = f" WHERE category = '{c}'" if c else ""
            w = "most expensive" if top else "cheapest"
            q = f"What is the {w} product{f' in {c}' if c else ''}?"
            yield (q, f"SELECT name FROM products{where} ORDER BY price {'DESC' if top else 'ASC'} LIMIT 1",
                   ["products"], f"The {w} product is the {{v}}.")
        elif k == 13:
            s = rng.choice(PAY_STATUS)
            q = rng.choice([f"How many payments {'failed' if s == 'failed' else 'were ' + s}?",
                            f"How many {s} payments are there?"])
            yield q, f"SELECT count(*) FROM payments WHERE status = '{s}'", [], f"{{v}} payments {s}."
        elif k == 14:
            most = rng.random() < 0.7
            w = "most" if most else "fewest"
            q = rng.choice([f"Which country has the {w} customers?", f"What country do the {w} customers come from?"])
            yield (q, "SELECT country FROM customers GROUP BY country ORDER BY count(*) "
                   f"{'DESC' if most else 'ASC'} LIMIT 1", ["customers"], f"{{v}} has the {w} customers.")
        elif k == 15:
            s = rng.choice(list(ORDER_STATUS))
            neg = rng.random() < 0.5
            q = (f"What is the average order value of orders that were not {s}?" if neg
                 else f"What is the average order value of {s} orders?")
            yield (q, f"SELECT round(avg(total), 2) FROM orders WHERE status {'!=' if neg else '='} '{s}'",
                   ["*", "orders"], f"The average order value is {{v}}.")
        elif k == 16:
            y, m = rng.choice([2025, 2026]), rng.randint(1, 12)
            if y == 2026:
                m = rng.randint(1, 10)
            month = MONTHS[m - 1]
            q = rng.choice([f"How many orders were placed in {month} {y}?", f"How many orders in {month} {y}?"])
            yield (q, f"SELECT count(*) FROM orders WHERE order_date LIKE '{y}-{m:02d}%'", ["orders"],
                   f"{{v}} orders were placed in {month} {y}.")
        elif k == 17:
            s = rng.choice([None, None, *ORDER_STATUS])
            q = ("How many distinct customers placed at least one order?" if s is None
                 else f"How many distinct customers have a {s} order?")
            where = f" WHERE status = '{s}'" if s else ""
            yield (q, f"SELECT count(DISTINCT customer_id) FROM orders{where}", ["orders"],
                   f"{{v}} distinct customers.")
        elif k == 18:
            s = rng.choice(PAY_STATUS)
            top = rng.random() < 0.7
            w = "highest" if top else "lowest"
            q = f"Which product category has the {w} {s} revenue?"
            yield (q, "SELECT p.category FROM payments pay JOIN orders o ON pay.order_id = o.id JOIN products p "
                   f"ON o.product_id = p.id WHERE pay.status = '{s}' GROUP BY p.category ORDER BY "
                   f"sum(pay.amount) {'DESC' if top else 'ASC'} LIMIT 1", ["*", "payments"],
                   f"The {w} {s} revenue is in {{v}}.")
        elif k == 19:
            c = rng.choice(cats)
            q = rng.choice([f"How many units of {c} were sold (shipped or delivered orders)?",
                            f"How many {c} units were sold in shipped or delivered orders?"])
            yield (q, "SELECT sum(o.quantity) FROM orders o JOIN products p ON o.product_id = p.id "
                   f"WHERE p.category = '{c}' AND o.status IN ('shipped', 'delivered')", ["*", "orders"],
                   f"{{v}} units of {c} were sold.")
        else:
            c = rng.choice(names)
            q = rng.choice([f"How much has {c} spent in total?", f"What is the total spent by {c}?"])
            yield (q, "SELECT round(sum(orders.total), 2) FROM orders JOIN customers ON orders.customer_id = "
                   f"customers.id WHERE customers.name = '{c}'", ["*", "orders"], f"{c} spent {{v}} in total.")


def _pct(rng):
    return rng.choice([99, 99.5, 99.9, 99.95, 99.99, 99.8, 99.0, 99.7, 95, 99.25])


def _ops_cases(rng: random.Random, n: int, doc_questions: list[str]):
    for _ in range(n):
        k = rng.randrange(5)
        if k <= 1:
            slo, days = _pct(rng), rng.choice([7, 14, 28, 30, 30, 30, 90, 365, rng.randint(1, 120)])
            args = {"slo_percent": slo, "window_days": days}
            if k == 1:
                args["consumed_minutes"] = rng.choice([5, 10, 12, 20, 30, 45, 60, rng.randint(1, 300)])
                q = rng.choice([f"We have a {slo}% SLO over {days} days and used {args['consumed_minutes']} minutes. How much budget is left?",
                                f"With a {slo}% SLO over {days} days, {args['consumed_minutes']} minutes are used. What remains?"])
            else:
                q = rng.choice([f"How many minutes of downtime does a {slo}% SLO allow over {days} days?",
                                f"What is the error budget for a {slo}% SLO over {days} days?",
                                f"How much downtime does {slo}% availability allow in {days} days?",
                                f"Error budget in minutes for a {slo}% SLO over a {days} day window?"])
            yield q, "sla_budget", args
        elif k == 2:
            peak = rng.choice([90, 200, 500, 1000, 1200, 2500, 5000, rng.randint(10, 20000)])
            per = rng.choice([50, 100, 150, 200, 250, 400, rng.randint(10, 1000)])
            args = {"peak_rps": peak, "rps_per_replica": per}
            h = rng.choice([None, None, 0, 20, 50, 100])
            if h is None:
                q = rng.choice([f"How many replicas do we need for {peak} rps peak at {per} rps per replica?",
                                f"How many replicas does a service with {peak} rps peak need at {per} rps per replica?"])
            else:
                args["headroom_percent"] = h
                q = rng.choice([f"How many replicas for {peak} rps peak at {per} rps each with {h}% headroom?",
                                f"Replicas for {peak} rps peak, {per} rps per replica, with {h}% headroom?"])
                if h == 0 and rng.random() < 0.5:
                    q = f"Replicas for {peak} rps peak, {per} rps per replica, with no headroom?"
            yield q, "capacity", args
        else:
            q = rng.choice(doc_questions)
            yield q, "search_docs", {"query": " ".join(w for w in re.findall(r"[\w%.]+", q.lower())
                                                      if w not in STOP)[:100]}


DOC_QUESTIONS = [
    "The payments queue is backing up. What should I check first?", "What do I do when the payments queue grows?",
    "Payments are stuck in the queue, what now?", "Who has to approve a database failover?",
    "How do we fail over the primary database?", "When should we fail over Postgres?",
    "Can we deploy on a Friday?", "When are deploys allowed?", "How does the canary work for deploys?",
    "How often must we update the status page during a SEV1?", "What is a SEV1 incident?",
    "Who is paged for a SEV2?", "How long are our internal TLS certificates valid?",
    "How do we rotate certificates?", "When do certificates get renewed?",
    "When do feature deploys freeze because of the error budget?", "What happens when the error budget runs out?",
    "How much headroom do we plan for capacity?", "How do we plan capacity for a launch?",
    "Do rollbacks need approval?", "What replication lag is acceptable for a failover?",
]


def _pick_sentence(question: str, passage: str) -> str:
    words = {w for w in re.findall(r"\w+", question.lower()) if w not in STOP}
    sents = [s.strip() for s in re.split(r"(?<=[.!?])\s+", passage.split(": ", 1)[-1]) if s.strip()]
    best = max(sents, key=lambda s: len(words & set(re.findall(r"\w+", s.lower()))), default=passage)
    return best.replace(" …(cut)", "").replace("…", "")[:150]


def _fmt_num(x) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def generate(seed: int = 0, n_sql: int = 2400, n_ops: int = 1600) -> list[Transcript]:
    """The training transcripts (deterministic for ``seed``)."""
    rng = random.Random(seed)
    out: list[Transcript] = []
    sql = load_agent("sql_analyst")
    box = ToolBox(sql)
    for q, query, pre, answer in _sql_cases(rng, box.db(), n_sql):
        steps = []
        if pre and pre[0] == "*":
            steps.append(("list_tables", {}))
            pre = pre[1:]
        steps += [("describe_table", {"table": t}) for t in pre]
        steps.append(("query_sql", {"sql": query}))
        out.append(_run(sql, box, q, steps, lambda res: answer.replace("{v}", _first(res))))
    ops = load_agent("ops_assistant")
    obox = ToolBox(ops)
    for q, tool, args in _ops_cases(rng, n_ops, DOC_QUESTIONS):
        def ans(res, tool=tool, args=args, q=q):
            if tool == "sla_budget":
                m = re.search(r"remaining ([\d.-]+) minutes", res)
                if m:
                    return f"{m.group(1)} minutes of error budget remain."
                m = re.search(r": ([\d.]+) minutes", res)
                return f"The error budget is {m.group(1)} minutes."
            if tool == "capacity":
                m = re.search(r"needed: (\d+)", res)
                return f"You need {m.group(1)} replicas."
            return _pick_sentence(q, res)
        out.append(_run(ops, obox, q, [(tool, args)], ans))
    return out


def _run(agent, box, question, steps, answer_fn) -> Transcript:
    passages = box.store().search(question, agent.retrieval.top_k) if agent.retrieval.top_k else []
    history = [("user", question)]
    res = ""
    for name, args in steps:
        call = compact({"tool": name, "arguments": args})
        res = box.call(name, args).for_prompt(agent.result_chars)
        history += [("call", call), ("result", res)]
    history.append(("call", compact({"answer": answer_fn(res)[: agent.answer_chars]})))
    text = render_prompt(agent, history, passages)
    text = text[: -len("<|call|>\n")]
    spans, pos = [], 0
    for role, t in history:
        if role == "call":
            start = text.index("<|call|>\n" + t + "\n", pos) + len("<|call|>\n")
            spans.append((start, start + len(t)))
            pos = start
    return Transcript(agent.name, text, spans)
