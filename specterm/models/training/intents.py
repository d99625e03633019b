"""What the embedded pair's agents are asked, as *intents*: one question shape each, with the tool
calls that answer it and the answer built from their result.

Every intent has two disjoint lists of phrasings: ``train`` (the corpus and the worked-example pool
are written only from these) and ``heldout`` (only the held-out evaluation asks these). Keeping the
two apart here, per intent, is what makes the held-out split honest by construction; a test checks
that no held-out phrasing is also a training one. Entities (countries and their adjectives,
statuses, products, customers, categories, months, SLOs, loads) are slots filled from the agents'
real data, so SQL and arguments are always executable and their results real.

A phrasing is a ``str.format`` template over the intent's slots (``{w}`` the entity as written,
``{x}`` its value in the data, ...). Intents with no tool (``calls`` empty) are the requests an agent
must answer directly: greetings, thanks, what is not in the data, what is out of its domain.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from specterm.models.training.intent_base import (
    COUNTRIES,
    METHODS,
    MONTHS,
    NONE,
    ORDER_STATUS,
    PAY_STATUS,
    SHOP,
    Intent,
    look_first,
    orders_of_product,
    sql,
)
from specterm.models.training.intents_broad import BROAD_SQL_INTENTS
from specterm.models.training.intents_broad import SLOTS as BROAD_SLOTS
from specterm.models.training.intents_broad import fill as fill_broad

SQL_INTENTS = [
    Intent(
        "count_customers",
        (
            "How many customers are there?",
            "How many customers do we have?",
            "What is the number of customers?",
            "Count the customers.",
            "total customers?",
        ),
        ("What's our customer count?", "Tell me how many customers the shop has.", "How large is our customer base?"),
        sql("SELECT count(*) FROM customers"),
        "There are {v} customers.",
    ),
    Intent(
        "customers_country",
        (
            "How many customers are from {w}?",
            "How many customers live in {w}?",
            "Number of customers in {w}?",
            "How many {a} customers do we have?",
            "count customers from {w}",
        ),
        (
            "How many of our customers are based in {w}?",
            "What's the customer count for {w}?",
            "How many {a} customers are there?",
            "customers located in {w}: how many?",
        ),
        sql("SELECT count(*) FROM customers WHERE country = '{x}'"),
        "{v} customers are from {w}.",
        "country",
        2,
    ),
    Intent(
        "orders_status",
        (
            "How many orders were {w}?",
            "How many {w} orders are there?",
            "Count the orders that were {w}.",
            "number of {w} orders",
        ),
        (
            "How many orders have the status {w}?",
            "What number of orders ended up {w}?",
            "Tell me the count of {w} orders.",
        ),
        sql("SELECT count(*) FROM orders WHERE status = '{x}'"),
        "{v} orders were {w}.",
        "ostatus",
        2,
    ),
    Intent(
        "sum_payments",
        (
            "What is the total revenue from {w} payments?",
            "What is the sum of {w} payments?",
            "Total amount of {w} payments?",
        ),
        ("How much money was in {w} payments altogether?", "Add up the {w} payments: what is the total?"),
        look_first("*", "payments")(sql("SELECT round(sum(amount), 2) FROM payments WHERE status = '{x}'")),
        "The total of {w} payments is {v}.",
        "pstatus",
    ),
    Intent(
        "revenue",
        ("What is our total revenue?", "How much revenue did we make?", "What is the revenue?"),
        ("How much money has the shop earned in total?", "Tell me the overall revenue."),
        sql("SELECT round(sum(amount), 2) FROM payments WHERE status = 'captured'"),
        "The total revenue is {v}.",
    ),
    Intent(
        "payments_method",
        ("How many payments were made by {w}?", "How many payments were made with {w}?", "How many payments used {w}?"),
        ("How many customers paid by {w}?", "Count of payments via {w}?", "How often was {w} used to pay?"),
        sql("SELECT count(*) FROM payments WHERE method = '{x}'"),
        "{v} payments were made by {w}.",
        "method",
    ),
    Intent(
        "payments_status",
        ("How many payments {w}?", "How many {w} payments are there?", "count the {w} payments"),
        ("What is the number of payments that {w}?", "Tell me how many payments have the status {x}."),
        sql("SELECT count(*) FROM payments WHERE status = '{x}'"),
        "{v} payments {w}.",
        "pstatus_verb",
    ),
    Intent(
        "product_price",
        ("What is the price of the {w}?", "How much does the {w} cost?", "price of the {w}?"),
        ("What does a {w} sell for?", "How expensive is the {w}?", "Tell me the {w}'s price."),
        sql("SELECT price FROM products WHERE name = '{x}'"),
        "The {w} costs {v}.",
        "product",
        2,
    ),
    Intent(
        "customer_orders",
        ("How many orders did {w} place?", "How many orders does {w} have?"),
        ("What is the number of orders placed by {w}?", "How often has {w} ordered?"),
        look_first("*", "orders")(
            sql(
                "SELECT count(*) FROM orders JOIN customers ON orders.customer_id = "
                "customers.id WHERE customers.name = '{x}'"
            )
        ),
        "{w} placed {v} orders.",
        "customer",
        2,
    ),
    Intent(
        "customer_spent",
        ("How much has {w} spent in total?", "What is the total spent by {w}?"),
        ("What is the sum of {w}'s orders?", "How much money did {w} spend with us?"),
        look_first("*", "orders")(
            sql(
                "SELECT round(sum(orders.total), 2) FROM orders JOIN customers ON "
                "orders.customer_id = customers.id WHERE customers.name = '{x}'"
            )
        ),
        "{w} spent {v} in total.",
        "customer",
    ),
    Intent(
        "customer_country",
        ("Which country is {w} from?", "Where does {w} live?"),
        ("What country does {w} come from?", "In which country is {w} based?"),
        sql("SELECT country FROM customers WHERE name = '{x}'"),
        "{w} is from {v}.",
        "customer",
    ),
    Intent(
        "customer_email",
        ("What is the email of {w}?", "What is {w}'s email address?"),
        ("How can I email {w}?", "Give me the email address for {w}."),
        sql("SELECT email FROM customers WHERE name = '{x}'"),
        "{w}'s email is {v}.",
        "customer",
    ),
    Intent(
        "category_count",
        ("How many products are in the {w} category?", "How many {w} products are there?"),
        ("How many items does the {w} category contain?", "Count the products in {w}."),
        sql("SELECT count(*) FROM products WHERE category = '{x}'"),
        "There are {v} {w} products.",
        "category",
    ),
    Intent(
        "count_products",
        ("How many products are there?", "How many products do we sell?"),
        ("How big is the catalogue?", "What is the number of products in the catalogue?"),
        sql("SELECT count(*) FROM products"),
        "There are {v} products.",
    ),
    Intent(
        "categories",
        ("What product categories are there?", "List the product categories.", "Which categories do we have?"),
        ("What kinds of products does the shop sell?", "Name the categories of products."),
        sql("SELECT DISTINCT category FROM products"),
        "The categories are {all}.",
    ),
    Intent(
        "avg_price_category",
        ("What is the average price of {w} products?", "Average price in {w}?"),
        ("How much does a {w} product cost on average?", "What's the mean price of the {w} category?"),
        sql("SELECT round(avg(price), 2) FROM products WHERE category = '{x}'"),
        "The average {w} price is {v}.",
        "category",
    ),
    Intent(
        "max_in_category",
        ("What is the most expensive product in {w}?", "Which {w} product costs the most?"),
        ("What is the priciest {w} product?", "Which item in {w} has the highest price?"),
        sql("SELECT name FROM products WHERE category = '{x}' ORDER BY price DESC LIMIT 1"),
        "The most expensive {w} product is the {v}.",
        "category",
    ),
    Intent(
        "min_in_category",
        ("What is the cheapest product in {w}?", "Which {w} product costs the least?"),
        ("What is the lowest priced {w} product?", "Which item in {w} is the least expensive?"),
        sql("SELECT name FROM products WHERE category = '{x}' ORDER BY price ASC LIMIT 1"),
        "The cheapest {w} product is the {v}.",
        "category",
    ),
    Intent(
        "max_product",
        ("What is the most expensive product?", "Which product costs the most?"),
        ("What is the priciest item in the catalogue?", "Which item has the highest price?"),
        sql("SELECT name FROM products ORDER BY price DESC LIMIT 1"),
        "The most expensive product is the {v}.",
    ),
    Intent(
        "min_product",
        ("What is the cheapest product?", "Which product costs the least?"),
        ("What is the least expensive item we sell?", "Which item has the lowest price?"),
        sql("SELECT name FROM products ORDER BY price ASC LIMIT 1"),
        "The cheapest product is the {v}.",
    ),
    Intent(
        "orders_for_max_product",
        (
            "How many orders are there for the most expensive product?",
            "How many times was the most expensive product ordered?",
        ),
        ("How many orders include our priciest product?",),
        orders_of_product("DESC"),
        "The {r1} was ordered {v} times.",
    ),
    # weight 0: not in the default corpus (``models train`` keeps its pair); a training run turns it on
    # with ``generate(weights=...)`` so the product-then-its-orders plan is not one intent's wording
    Intent(
        "orders_for_min_product",
        (
            "How many orders are there for the cheapest product?",
            "How many times was the least expensive product ordered?",
            "How many orders contain the cheapest item?",
        ),
        ("How many orders were placed for our lowest priced product?",),
        orders_of_product("ASC"),
        "The {r1} was ordered {v} times.",
        weight=0.0,
    ),
    Intent(
        "sum_orders_status",
        ("What is the total value of {w} orders?", "Sum of the totals of {w} orders?"),
        ("How much are the {w} orders worth altogether?", "What do the {w} orders add up to?"),
        look_first("*", "orders")(sql("SELECT round(sum(total), 2) FROM orders WHERE status = '{x}'")),
        "{W} orders total {v}.",
        "ostatus",
    ),
    Intent(
        "country_most",
        ("Which country has the most customers?", "What country do the most customers come from?"),
        ("Where are most of our customers located?", "Which country is home to the largest number of customers?"),
        sql("SELECT country FROM customers GROUP BY country ORDER BY count(*) DESC LIMIT 1"),
        "{v} has the most customers.",
    ),
    Intent(
        "country_fewest",
        ("Which country has the fewest customers?", "What country do the fewest customers come from?"),
        ("Where do the smallest number of our customers live?",),
        sql("SELECT country FROM customers GROUP BY country ORDER BY count(*) ASC LIMIT 1"),
        "{v} has the fewest customers.",
    ),
    Intent(
        "count_countries",
        ("How many countries do our customers come from?", "In how many countries do we have customers?"),
        ("How many different countries are our customers in?",),
        sql("SELECT count(DISTINCT country) FROM customers"),
        "Customers come from {v} countries.",
    ),
    Intent(
        "aov",
        ("What is the average order value?", "What is the AOV?"),
        ("How much is an average order worth?", "What do orders average?"),
        sql("SELECT round(avg(total), 2) FROM orders WHERE status != 'cancelled'"),
        "The average order value is {v}.",
    ),
    Intent(
        "aov_not_status",
        ("What is the average order value of orders that were not {w}?",),
        ("Excluding {w} orders, what is the average order total?",),
        look_first("*", "orders")(sql("SELECT round(avg(total), 2) FROM orders WHERE status != '{x}'")),
        "The average order value is {v}.",
        "ostatus",
    ),
    Intent(
        "aov_status",
        ("What is the average order value of {w} orders?", "Average total of {w} orders?"),
        ("On average, how much is a {w} order worth?",),
        look_first("*", "orders")(sql("SELECT round(avg(total), 2) FROM orders WHERE status = '{x}'")),
        "The average {w} order value is {v}.",
        "ostatus",
    ),
    Intent(
        "orders_month",
        ("How many orders were placed in {w}?", "How many orders in {w}?"),
        ("How many orders did we get during {w}?", "What was the order count for {w}?"),
        sql("SELECT count(*) FROM orders WHERE order_date LIKE '{x}%'"),
        "{v} orders were placed in {w}.",
        "month",
        2,
    ),
    Intent(
        "signups_year",
        ("How many customers signed up in {w}?", "How many new customers joined in {w}?"),
        ("How many customers registered during {w}?", "What number of signups did we have in {w}?"),
        sql("SELECT count(*) FROM customers WHERE signup_date LIKE '{x}%'"),
        "{v} customers signed up in {w}.",
        "year",
    ),
    Intent(
        "count_orders",
        ("How many orders are there?", "How many orders do we have?"),
        ("What is the total number of orders?", "How many orders has the shop received?"),
        sql("SELECT count(*) FROM orders"),
        "There are {v} orders.",
    ),
    Intent(
        "distinct_buyers",
        ("How many distinct customers placed at least one order?", "How many customers have ordered something?"),
        ("How many different customers have bought from us?",),
        sql("SELECT count(DISTINCT customer_id) FROM orders"),
        "{v} distinct customers.",
    ),
    Intent(
        "top_spender",
        ("Which customer has spent the most?", "Who is our biggest customer by spend?"),
        ("Who spent the most money with us?", "Name the customer with the highest total spend."),
        sql(
            "SELECT customers.name FROM orders JOIN customers ON orders.customer_id = customers.id "
            "GROUP BY customers.id ORDER BY sum(orders.total) DESC LIMIT 1"
        ),
        "{v} has spent the most.",
    ),
    Intent(
        "category_top_revenue",
        ("Which product category has the highest {w} revenue?",),
        ("Which category brings in the most {w} payment money?",),
        look_first("*", "payments")(
            sql(
                "SELECT p.category FROM payments pay JOIN orders o ON pay.order_id = o.id "
                "JOIN products p ON o.product_id = p.id WHERE pay.status = '{x}' GROUP BY "
                "p.category ORDER BY sum(pay.amount) DESC LIMIT 1"
            )
        ),
        "The highest {w} revenue is in {v}.",
        "pstatus",
    ),
    Intent(
        "units_sold",
        ("How many units of {w} were sold (shipped or delivered orders)?", "How many {w} units were sold?"),
        ("How many {w} items did we sell?",),
        look_first("*", "orders")(
            sql(
                "SELECT sum(o.quantity) FROM orders o JOIN products p ON o.product_id = p.id "
                "WHERE p.category = '{x}' AND o.status IN ('shipped', 'delivered')"
            )
        ),
        "{v} units of {w} were sold.",
        "category",
    ),
    Intent(
        "not_in_data",
        (
            "How many employees does the shop have?",
            "What is {w}'s phone number?",
            "Which warehouse ships the most orders?",
            "What did we spend on marketing?",
            "What is the profit margin on the {p}?",
        ),
        ("How many people work at the shop?", "What is {w}'s home address?", "Which supplier makes the {p}?"),
        NONE,
        f"That is not in the data: the database only has {SHOP}.",
        "customer_product",
        0.5,
    ),
    Intent(
        "off_topic",
        (
            "What is the weather in Paris?",
            "Write me a poem about spring.",
            "Who won the football world cup in 2018?",
            "Tell me a joke.",
        ),
        ("What is the capital of Italy?", "Can you translate hello into Spanish?"),
        NONE,
        f"I can only answer questions about {SHOP}.",
        weight=0.4,
    ),
    Intent(
        "greeting",
        ("hi", "hello", "Hello!", "hey there", "What can you do?", "help"),
        ("good morning", "Hi, who are you?", "what do you do?"),
        NONE,
        f"Hello! I answer questions about {SHOP} with SQL. Try: How many customers are there?",
        weight=0.4,
    ),
    Intent(
        "thanks",
        ("thanks", "thank you!", "Thanks, that helps."),
        ("cheers, thanks a lot",),
        NONE,
        "You're welcome.",
        weight=0.2,
    ),
]


def _ops(tool: str, **fixed):
    return lambda s: [
        (
            tool,
            {
                **{
                    k: s[k]
                    for k in (
                        "slo_percent",
                        "window_days",
                        "consumed_minutes",
                        "peak_rps",
                        "rps_per_replica",
                        "headroom_percent",
                    )
                    if k in s
                },
                **fixed,
            },
        )
    ]


OPS_DOCS = "runbooks, policies, error budgets and capacity"

OPS_INTENTS = [
    Intent(
        "budget",
        (
            "How many minutes of downtime does a {slo}% SLO allow over {days} days?",
            "What is the error budget for a {slo}% SLO over {days} days?",
            "How much downtime does {slo}% availability allow in {days} days?",
            "Error budget in minutes for a {slo}% SLO over a {days} day window?",
        ),
        (
            "With {slo}% availability, how long can we be down in {days} days?",
            "Allowed downtime at {slo}% for a {days}-day period?",
            "If our SLO is {slo}% over {days} days, what is the budget in minutes?",
        ),
        _ops("sla_budget"),
        "The error budget is {budget} minutes.",
        "slo",
        2,
    ),
    Intent(
        "budget_left",
        (
            "We have a {slo}% SLO over {days} days and used {used} minutes. How much budget is left?",
            "With a {slo}% SLO over {days} days, {used} minutes are used. What remains?",
        ),
        ("Our SLO is {slo}% for {days} days and we burned {used} minutes; how much error budget remains?",),
        _ops("sla_budget"),
        "{left} minutes of error budget remain.",
        "slo_used",
    ),
    Intent(
        "replicas",
        (
            "How many replicas do we need for {peak} rps peak at {per} rps per replica?",
            "How many replicas does a service with {peak} rps peak need at {per} rps per replica?",
        ),
        (
            "We expect a peak of {peak} requests per second and one replica handles {per}. How many replicas?",
            "Replica count for {peak} rps when each replica serves {per} rps?",
        ),
        _ops("capacity"),
        "You need {replicas} replicas.",
        "load",
        1.5,
    ),
    Intent(
        "replicas_headroom",
        (
            "How many replicas for {peak} rps peak at {per} rps each with {h}% headroom?",
            "Replicas for {peak} rps peak, {per} rps per replica, with {h}% headroom?",
        ),
        ("Peak {peak} rps, {per} rps per replica and {h}% headroom: how many replicas?",),
        _ops("capacity"),
        "You need {replicas} replicas.",
        "load_headroom",
    ),
    Intent(
        "replicas_default",
        ("How many replicas for {peak} rps peak at {per} rps per replica with our default headroom?",),
        ("Using the standard headroom, how many replicas for a {peak} rps peak at {per} rps per replica?",),
        lambda s: [
            ("search_docs", {"query": "default headroom capacity planning"}),
            ("capacity", {"peak_rps": s["peak_rps"], "rps_per_replica": s["rps_per_replica"], "headroom_percent": 30}),
        ],
        "With the default 30% headroom you need {replicas} replicas.",
        "load",
    ),
    Intent("docs", (), (), lambda s: [("search_docs", {"query": s["query"]})], "{sentence}", "doc", 3),
    Intent(
        "off_topic",
        (
            "What is the weather in Paris?",
            "Write me a poem about spring.",
            "Tell me a joke.",
            "How many customers does the shop have?",
        ),
        ("What is the capital of Italy?", "Can you recommend a good movie?"),
        NONE,
        f"I can only help with on-call questions: {OPS_DOCS}.",
        weight=0.3,
    ),
    Intent(
        "greeting",
        ("hi", "hello", "Hello!", "hey there", "What can you do?", "help"),
        ("good morning", "Hi, who are you?", "what do you do?"),
        NONE,
        f"Hello! I help on-call engineers with {OPS_DOCS}. Try: Can we deploy on a Friday?",
        weight=0.3,
    ),
    Intent(
        "thanks",
        ("thanks", "thank you!", "Thanks, that helps."),
        ("cheers, thanks a lot",),
        NONE,
        "You're welcome.",
        weight=0.15,
    ),
]

# (question, document, words the answer must contain) for the docs intent.
DOC_TRAIN = [
    ("The payments queue is backing up. What should I check first?", "payments_queue.md", ["crash loops"]),
    ("What do I do when the payments queue grows?", "payments_queue.md", ["crash loops"]),
    ("Can we purge the payments queue?", "payments_queue.md", ["never purge"]),
    ("Who has to approve a database failover?", "database_failover.md", ["database owner"]),
    ("How do we fail over the primary database?", "database_failover.md", ["promote"]),
    ("What replication lag is acceptable for a failover?", "database_failover.md", ["30 seconds"]),
    ("Can we deploy on a Friday?", "deploy_policy.md", ["no deploys on fridays"]),
    ("When are deploys allowed?", "deploy_policy.md", ["monday to thursday"]),
    ("How does the canary work for deploys?", "deploy_policy.md", ["5% of traffic"]),
    ("Do rollbacks need approval?", "deploy_policy.md", ["never need approval"]),
    ("How often must we update the status page during a SEV1?", "incident_severity.md", ["every 30 minutes"]),
    ("What is a SEV1 incident?", "incident_severity.md", ["outage"]),
    ("Who is paged for a SEV2?", "incident_severity.md", ["owning team"]),
    ("How long are our internal TLS certificates valid?", "certificate_rotation.md", ["90 days"]),
    ("How do we rotate certificates?", "certificate_rotation.md", ["certctl renew"]),
    ("When does the certificate expiry alert fire?", "certificate_rotation.md", ["14 days"]),
    ("When do feature deploys freeze because of the error budget?", "error_budget.md", ["75%"]),
    ("What happens when the error budget runs out?", "error_budget.md", ["freeze"]),
    ("How much headroom do we plan for capacity?", "capacity_planning.md", ["30%"]),
    ("What is the minimum number of replicas in production?", "capacity_planning.md", ["2 replicas"]),
]
DOC_HELDOUT = [
    ("Payment messages are piling up, where do I start?", "payments_queue.md", ["crash loops"]),
    ("Is it ok to delete messages from the payments queue?", "payments_queue.md", ["never purge"]),
    ("Whose sign-off do I need to fail over Postgres?", "database_failover.md", ["database owner"]),
    ("How much replica lag is too much to promote it?", "database_failover.md", ["30 seconds"]),
    ("Are Friday releases permitted?", "deploy_policy.md", ["no deploys on fridays"]),
    ("On which days can we ship to production?", "deploy_policy.md", ["monday to thursday"]),
    ("Does rolling back require someone's approval?", "deploy_policy.md", ["never need approval"]),
    ("During a sev1, how frequently do we post status updates?", "incident_severity.md", ["every 30 minutes"]),
    ("What is the lifetime of an internal TLS cert?", "certificate_rotation.md", ["90 days"]),
    ("What command renews a certificate?", "certificate_rotation.md", ["certctl renew"]),
    ("At what point of budget burn do we stop feature releases?", "error_budget.md", ["75%"]),
    ("What headroom should capacity plans include by default?", "capacity_planning.md", ["30%"]),
]


_SQL_ALL = SQL_INTENTS + BROAD_SQL_INTENTS  # once, not per sampled question


def intents_for(agent: str) -> list[Intent]:
    """Every intent of ``agent``; the broad SQL kinds weigh 0 unless a run turns them on by name."""
    return _SQL_ALL if agent == "sql_analyst" else OPS_INTENTS


def _pct(rng: random.Random):
    """An SLO: half the time a common one, else any 90-99.99 with one or two decimals. The spread is
    what makes the model copy the number from the question instead of guessing the common 99.9."""
    if rng.random() < 0.5:
        return rng.choice([99, 99.5, 99.9, 99.95, 99.99, 99.8, 99.0, 99.7, 95, 99.25, 98.5])
    return round(rng.uniform(90, 99.99), rng.choice([1, 2]))


def _num(rng: random.Random, common: list[int], lo: int, hi: int) -> int:
    """Half the time a common value, else uniform in [lo, hi] (copied, not recalled; see ``_pct``)."""
    return rng.choice(common) if rng.random() < 0.5 else rng.randint(lo, hi)


class Slots:
    """Fills an intent's slots from the agents' real data (one instance per corpus build)."""

    def __init__(self, db=None) -> None:
        self.names: list[str] = []
        self.products: list[str] = []
        self.cats: list[str] = []
        if db is not None:
            col = lambda q: [r.split("\t")[0] for r in db.query(q)[0].split("\n")[1:-1]]  # noqa: E731
            self.names = [x for x in col("SELECT name FROM customers") if "'" not in x]
            self.products = [x for x in col("SELECT name FROM products") if "'" not in x]
            self.cats = col("SELECT DISTINCT category FROM products")

    def fill(self, rng: random.Random, slot: str, heldout: bool = False) -> dict:
        if slot in BROAD_SLOTS:
            return fill_broad(rng, slot, self.fill)
        if slot == "country":
            code = rng.choice(list(COUNTRIES))
            names, adjs = COUNTRIES[code]
            return {"x": code, "w": rng.choice(names), "a": rng.choice(adjs)}
        if slot == "ostatus":
            x = rng.choice(list(ORDER_STATUS))
            w = rng.choice(ORDER_STATUS[x])
            return {"x": x, "w": w, "W": w.capitalize()}
        if slot in ("pstatus", "pstatus_verb"):
            x = rng.choice(PAY_STATUS)
            return {"x": x, "w": ("were " + x if x != "failed" else x) if slot == "pstatus_verb" else x}
        if slot == "method":
            x = rng.choice(list(METHODS))
            return {"x": x, "w": rng.choice(METHODS[x])}
        if slot == "product":
            x = rng.choice(self.products)
            return {"x": x, "w": x}
        if slot == "customer":
            x = rng.choice(self.names)
            return {"x": x, "w": x}
        if slot == "customer_product":
            return {"w": rng.choice(self.names), "p": rng.choice(self.products)}
        if slot == "category":
            x = rng.choice(self.cats)
            return {"x": x, "w": x}
        if slot == "month":
            y = rng.choice([2025, 2026])
            m = rng.randint(1, 12 if y == 2025 else 10)
            return {"x": f"{y}-{m:02d}", "w": f"{MONTHS[m - 1]} {y}"}
        if slot == "year":
            y = rng.choice([2024, 2025, 2026])
            return {"x": str(y), "w": str(y)}
        if slot in ("slo", "slo_used"):
            out = {"slo_percent": _pct(rng), "window_days": _num(rng, [7, 14, 28, 30, 30, 90, 365], 1, 366)}
            if slot == "slo_used":
                out["consumed_minutes"] = _num(rng, [5, 10, 12, 20, 30, 45, 60], 1, 500)
            return {**out, "slo": out["slo_percent"], "days": out["window_days"], "used": out.get("consumed_minutes")}
        if slot in ("load", "load_headroom"):
            peak = _num(rng, [90, 200, 500, 900, 1000, 1200, 2500, 5000], 10, 20000)
            per = _num(rng, [50, 100, 150, 200, 250, 400], 5, 1000)
            out = {"peak_rps": peak, "rps_per_replica": per, "peak": peak, "per": per}
            if slot == "load_headroom":
                out["headroom_percent"] = out["h"] = rng.choice([0, 10, 20, 25, 50, 100])
            return out
        if slot == "doc":
            q, doc, words = rng.choice(DOC_HELDOUT if heldout else DOC_TRAIN)
            return {"question": q, "doc": doc, "words": words}
        return {}


@dataclass
class Case:
    """One question, the calls that answer it (arguments still templated by earlier results), the answer."""

    agent: str
    intent: str
    question: str
    calls: list[tuple[str, dict]] = field(default_factory=list)
    answer: str = ""
    slots: dict = field(default_factory=dict)


def sample(
    agent: str,
    rng: random.Random,
    slots: Slots,
    *,
    heldout: bool = False,
    rephrase_rate: float = 0.0,
    weights: dict[str, float] | None = None,
) -> Case:
    """One question of ``agent``: an intent by weight (``weights`` overrides some by name), a phrasing
    from its ``train`` or ``heldout`` list (a training one reworded by ``rephrase`` with probability
    ``rephrase_rate``), slots filled from the data."""
    intents = intents_for(agent)
    weights = weights or {}
    it = rng.choices(intents, weights=[weights.get(i.name, i.weight) for i in intents])[0]
    s = slots.fill(rng, it.slot, heldout)
    if it.name == "docs":
        question = s["question"]
        s["query"] = search_query(question)
    else:
        phrasings = it.heldout if heldout else it.train
        template = rng.choice(phrasings)
        if not heldout and rng.random() < rephrase_rate:
            template = rephrase(rng, template)
        question = template.format(**s)
    return Case(agent, it.name, question, it.calls(s), it.answer, s)


STOP = set(
    "a an the of do does we our is are was were what how when who which can must to for in on "
    "i should my me be it at by with there any".split()
)


def search_query(question: str) -> str:
    """The search_docs query the corpus writes for a question: its content words."""
    import re

    return " ".join(w for w in re.findall(r"[\w%.]+", question.lower()) if w not in STOP)[:100]


# Words people use for the shop's nouns and verbs, swapped into a training template (never into its
# slots, so entities stay exact). General vocabulary, not the held-out templates' wording: the point
# is that a question's words vary, so the model learns to rely on the retrieved example and the
# entity rather than on a memorised sentence.
SYNONYMS = {
    "customers": ["clients", "buyers", "shoppers"],
    "customer": ["client", "buyer"],
    "products": ["items", "goods"],
    "product": ["item"],
    "orders": ["purchases"],
    "payments": ["transactions"],
    "How many": ["how many"],
    "What is": ["What's", "Tell me", "whats"],
    "total": ["overall", "combined"],
    "costs": ["is priced at"],
    "most": ["the most"],
    "downtime": ["outage time"],
    "replicas": ["instances", "pods"],
    "SLO": ["availability target", "SLA"],
}
OPENERS = [
    "Can you tell me: ",
    "Please tell me: ",
    "I'd like to know: ",
    "Quick question: ",
    "Hey, ",
    "Could you check: ",
    "I need to know: ",
    "Question: ",
    "Using the data: ",
]
CLOSERS = [" please", " thanks", " - thanks!", " (quick one)", " asap"]


def rephrase(rng: random.Random, template: str) -> str:
    """Reword a training template as a user might: one word or phrase swapped for a synonym, an
    opener before it, a closer after it (each at random; at least one)."""
    import re

    out = template
    kinds = [k for k in range(3) if rng.random() < 0.5] or [rng.randrange(3)]
    if 0 in kinds:
        words = [w for w in SYNONYMS if re.search(rf"(?<![\w{{]){re.escape(w)}(?![\w}}])", out)]
        if words:
            w = rng.choice(words)
            out = re.sub(rf"(?<![\w{{]){re.escape(w)}(?![\w}}])", rng.choice(SYNONYMS[w]), out, count=1)
    if 1 in kinds:
        first = out.split(" ", 1)[0]
        if first in ("What", "What's", "How", "Which", "Who", "Where", "Tell", "Count", "Give", "List", "Name"):
            out = out[0].lower() + out[1:]
        out = rng.choice(OPENERS) + out
    if 2 in kinds:
        end = len(out.rstrip("?.!"))
        out = out[:end] + rng.choice(CLOSERS) + out[end:]
    return out


def add_typo(rng: random.Random, text: str) -> str:
    """Perturb a training question as people type: a dropped or swapped letter in a longer word,
    lower case, no final question mark. Entity words (with capitals or digits) are left alone so the
    calls stay right."""
    words = text.split(" ")
    kind = rng.randrange(4)
    if kind == 0:
        idx = [i for i, w in enumerate(words) if len(w) > 4 and w.isalpha() and w.islower()]
        if idx:
            i = rng.choice(idx)
            w, j = words[i], rng.randrange(1, len(words[i]) - 2)
            words[i] = w[:j] + w[j + 1] + w[j] + w[j + 2 :] if rng.random() < 0.5 else w[:j] + w[j + 1 :]
        return " ".join(words)
    if kind == 1:
        return text[0].lower() + text[1:]
    if kind == 2:
        return text.rstrip("?.!")
    return text
