"""Question kinds beyond the shipped pair's training (issue 35): top-N with GROUP BY, "most common",
filters on a joined table, three tables, date ranges, anti-joins and questions whose answer is none.

The fine-tuned 135 M target copies the plan of the worked example it retrieves and substitutes the
question's entities (docs/grounding.md); it does not compose a query shape it has not seen. These
intents give it examples to copy: ``scripts/make_worked_examples.py`` draws a pool of their training
phrasings into ``examples.toml`` beside the first one. They weigh 0 here, so the default corpus (the
embedded pair's recipe) and the held-out evaluation are unchanged; a training run can turn them on by
name (``scripts/finetune_pretrained.py --weight top_n_expensive=1``).

Written after both plain-question sets (``agents/sql_analyst/eval_natural*.toml``) and by the same
hand as the second, so not blind to them: no phrasing here is a question of either
(tests/test_agent_examples.py), and entities that would put a set's question into a phrasing were left
out (Canada, a garden category). Only the first set's results steered a change (the month bounds).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from specterm.models.training.intent_base import MONTHS, PAY_STATUS, Intent, sql

NUMBER_WORDS = {2: "two", 3: "three", 4: "four", 5: "five"}
ORDINALS = ["first", "second", "third", "fourth"]
# Countries and categories the shop has none of: the honest answer is zero.
ABSENT_COUNTRIES = {"ES": ["Spain"], "IT": ["Italy"], "AU": ["Australia"], "SE": ["Sweden"], "CN": ["China"]}
ABSENT_CATEGORIES = ["clothing", "music", "beauty", "automotive", "groceries"]
# The data: orders from 2025-01 to 2026-10, signups in 2025 (agents/sql_analyst/data/make_shop_sql.py).
LAST_MONTH = {2024: 12, 2025: 12, 2026: 10}

PAY_FROM = "FROM payments pay JOIN orders o ON pay.order_id = o.id "
ORDER_CUSTOMER = "FROM orders o JOIN customers c ON o.customer_id = c.id "
ORDER_PRODUCT = "FROM orders o JOIN products p ON o.product_id = p.id "


def date_range(rng: random.Random) -> dict:
    """A span of months as people say it, with its bounds: ``{w}`` the words (with their preposition),
    ``{lo}`` and ``{hi}`` its first and last month (``substr(date, 1, 7) BETWEEN lo AND hi``). Month
    bounds, both inclusive, because the model copies an example's query and changes what differs: the
    months the question names map onto them one to one, where a day bound ("< the first day after")
    made it compute a month it was not told (measured: "the second half of 2025" became July only)."""
    kind = rng.choice(["quarter", "quarter", "half", "span", "span", "month", "year"])
    year = rng.choice([2025, 2025, 2026] + ([2024] if kind == "year" else []))
    last = LAST_MONTH[year]
    if kind == "quarter":
        q = rng.randint(1, last // 3)  # whole quarters of the data
        m1, m2 = 3 * q - 2, 3 * q
        w = rng.choice([f"in the {ORDINALS[q - 1]} quarter of {year}", f"in Q{q} {year}", f"during Q{q} of {year}"])
    elif kind == "half":
        h = rng.randint(1, 2 if last == 12 else 1)
        m1, m2 = 6 * h - 5, 6 * h
        w = rng.choice([f"in the {ORDINALS[h - 1]} half of {year}", f"during H{h} {year}"])
    elif kind == "span":
        m1 = rng.randint(1, last - 1)
        m2 = rng.randint(m1 + 1, min(m1 + 5, last))
        w = rng.choice(
            [
                f"from {MONTHS[m1 - 1]} to {MONTHS[m2 - 1]} {year}",
                f"from {MONTHS[m1 - 1]} through {MONTHS[m2 - 1]} {year}",
            ]
        )
    elif kind == "month":  # one month is a range too: "during April 2026" must not copy a quarter's bounds
        m1 = m2 = rng.randint(1, last)
        w = rng.choice([f"during {MONTHS[m1 - 1]} {year}", f"in the month of {MONTHS[m1 - 1]} {year}"])
    else:
        m1, m2 = 1, 12
        w = rng.choice([f"in {year}", f"during {year}"])
    return {"w": w, "lo": f"{year}-{m1:02d}", "hi": f"{year}-{m2:02d}"}


def fill(rng: random.Random, slot: str, base: Callable[..., dict]) -> dict:
    """The slots of the intents below; ``base`` fills the shared ones (``Slots.fill``: country,
    ostatus, pstatus, method, category) from the data."""
    if slot == "n":
        n = rng.randint(2, 5)
        return {"x": str(n), "n": rng.choice([str(n), NUMBER_WORDS[n]])}
    if slot == "range":
        return date_range(rng)
    if slot == "range_status":
        s = base(rng, "ostatus")
        return {**date_range(rng), "sx": s["x"], "s": s["w"]}
    if slot in ("country_pstatus", "country_method", "category_pstatus", "category_method"):
        first, second = slot.split("_")
        out = dict(base(rng, first))
        if second == "pstatus":
            out["ps"] = rng.choice(PAY_STATUS)
        else:
            m = base(rng, "method")
            out.update(m=m["x"], mw=m["w"])
        return out
    if slot == "absent_country":
        code = rng.choice(list(ABSENT_COUNTRIES))
        return {"x": code, "w": rng.choice(ABSENT_COUNTRIES[code])}
    if slot == "absent_category":
        x = rng.choice(ABSENT_CATEGORIES)
        return {"x": x, "w": x}
    raise KeyError(slot)


SLOTS = frozenset(
    {
        "n",
        "range",
        "range_status",
        "country_pstatus",
        "country_method",
        "category_pstatus",
        "category_method",
        "absent_country",
        "absent_category",
    }
)


def _broad(name, train, heldout, calls, answer, slot="") -> Intent:
    return Intent(name, train, heldout, calls, answer, slot, weight=0.0)


BROAD_SQL_INTENTS = [
    # top N
    _broad(
        "top_n_expensive",
        ("What are the {n} most expensive products?", "List the {n} priciest products.", "top {n} products by price"),
        ("Show me our {n} most costly items.",),
        sql("SELECT name FROM products ORDER BY price DESC LIMIT {x}"),
        "The {n} most expensive products are {all}.",
        "n",
    ),
    _broad(
        "top_n_cheapest",
        (
            "What are the {n} cheapest products?",
            "List the {n} least expensive products.",
            "bottom {n} products by price",
        ),
        ("Which {n} items have the lowest prices?",),
        sql("SELECT name FROM products ORDER BY price ASC LIMIT {x}"),
        "The {n} cheapest products are {all}.",
        "n",
    ),
    _broad(
        "top_n_ordered_products",
        (
            "What are the {n} most ordered products?",
            "top {n} products by number of orders",
            "List the {n} products with the most orders.",
        ),
        ("Name the {n} best-selling products by order count.",),
        sql(f"SELECT p.name {ORDER_PRODUCT}GROUP BY p.id ORDER BY count(*) DESC LIMIT {{x}}"),
        "The {n} most ordered products are {all}.",
        "n",
    ),
    _broad(
        "top_n_spenders",
        (
            "Which {n} customers spent the most?",
            "top {n} customers by total spend",
            "List our {n} biggest customers by spend.",
        ),
        ("Name the {n} customers with the highest spending.",),
        sql(f"SELECT c.name {ORDER_CUSTOMER}GROUP BY c.id ORDER BY sum(o.total) DESC LIMIT {{x}}"),
        "The {n} biggest spenders are {all}.",
        "n",
    ),
    _broad(
        "top_n_buyers",
        ("Which {n} customers ordered the most often?", "top {n} customers by number of orders"),
        ("Who are the {n} most frequent buyers?",),
        sql(f"SELECT c.name {ORDER_CUSTOMER}GROUP BY c.id ORDER BY count(*) DESC LIMIT {{x}}"),
        "The {n} most frequent buyers are {all}.",
        "n",
    ),
    _broad(
        "top_n_countries",
        ("Which {n} countries have the most customers?", "top {n} countries by customer count"),
        ("In which {n} countries do we have the most customers?",),
        sql("SELECT country FROM customers GROUP BY country ORDER BY count(*) DESC LIMIT {x}"),
        "The {n} countries with the most customers are {all}.",
        "n",
    ),
    _broad(
        "top_n_categories",
        ("Which {n} categories bring in the most order value?", "top {n} categories by order total"),
        ("Name the {n} product categories with the largest order totals.",),
        sql(f"SELECT p.category {ORDER_PRODUCT}GROUP BY p.category ORDER BY sum(o.total) DESC LIMIT {{x}}"),
        "The top {n} categories are {all}.",
        "n",
    ),
    # most common
    _broad(
        "common_order_status",
        ("Which order status is the most frequent?", "What status do most orders have?"),
        ("Most orders end up in which status?",),
        sql("SELECT status FROM orders GROUP BY status ORDER BY count(*) DESC LIMIT 1"),
        "Most orders are {v}.",
    ),
    _broad(
        "common_method",
        ("Which payment method is used the most?", "How do most customers pay?", "most frequent payment method"),
        ("What do people pay with most often?",),
        sql("SELECT method FROM payments GROUP BY method ORDER BY count(*) DESC LIMIT 1"),
        "Most payments are made by {v}.",
    ),
    _broad(
        "biggest_category",
        ("Which category has the largest number of products?", "Which category do most products belong to?"),
        ("In what category do we sell the most different products?",),
        sql("SELECT category FROM products GROUP BY category ORDER BY count(*) DESC LIMIT 1"),
        "{v} has the most products.",
    ),
    _broad(
        "most_ordered_category",
        ("Which category gets the most orders?", "What category is ordered most often?"),
        ("Orders for which category are the most numerous?",),
        sql(f"SELECT p.category {ORDER_PRODUCT}GROUP BY p.category ORDER BY count(*) DESC LIMIT 1"),
        "{v} gets the most orders.",
    ),
    _broad(
        "most_orders_customer",
        ("Who ordered the most times?", "Which customer has the highest number of orders?"),
        ("Name the customer with the largest order count.",),
        sql(f"SELECT c.name {ORDER_CUSTOMER}GROUP BY c.id ORDER BY count(*) DESC LIMIT 1"),
        "{v} placed the most orders.",
    ),
    # a filter on a joined table
    _broad(
        "orders_from_country",
        (
            "How many orders did customers from {w} place?",
            "How many orders came from {a} customers?",
            "number of orders by customers in {w}",
        ),
        ("What is the order count for customers living in {w}?",),
        sql(f"SELECT count(*) {ORDER_CUSTOMER}WHERE c.country = '{{x}}'"),
        "Customers from {w} placed {v} orders.",
        "country",
    ),
    _broad(
        "aov_country",
        ("What is the average order value of customers from {w}?", "Average order total for {a} customers?"),
        ("On average, how much do {a} customers spend per order?",),
        sql(f"SELECT round(avg(o.total), 2) {ORDER_CUSTOMER}WHERE c.country = '{{x}}'"),
        "The average order value of customers from {w} is {v}.",
        "country",
    ),
    _broad(
        "spent_country",
        ("How much did {a} customers spend in total?", "What is the total of orders from customers in {w}?"),
        ("What have customers in {w} spent altogether?",),
        sql(f"SELECT round(sum(o.total), 2) {ORDER_CUSTOMER}WHERE c.country = '{{x}}'"),
        "Customers from {w} spent {v}.",
        "country",
    ),
    _broad(
        "orders_in_category",
        ("How many orders were for {w} products?", "How many {w} orders were there?", "count the orders of {w}"),
        ("What is the number of orders for the {w} category?",),
        sql(f"SELECT count(*) {ORDER_PRODUCT}WHERE p.category = '{{x}}'"),
        "{v} orders were for {w}.",
        "category",
    ),
    _broad(
        "value_in_category",
        ("How much were the {w} orders worth in total?", "Total order value for {w} products?"),
        ("What do all {w} orders add up to?",),
        sql(f"SELECT round(sum(o.total), 2) {ORDER_PRODUCT}WHERE p.category = '{{x}}'"),
        "The {w} orders are worth {v}.",
        "category",
    ),
    _broad(
        "quantity_in_category",
        ("How many {w} items were ordered in total?", "Total quantity ordered of {w} products?"),
        ("How many units of {w} products were ordered altogether?",),
        sql(f"SELECT sum(o.quantity) {ORDER_PRODUCT}WHERE p.category = '{{x}}'"),
        "{v} {w} items were ordered.",
        "category",
    ),
    # three tables
    _broad(
        "payments_country_status",
        ("What is the total of {ps} payments from customers in {w}?", "Sum of {ps} payments by {a} customers?"),
        ("How much money in {ps} payments came from {w}?",),
        sql(
            f"SELECT round(sum(pay.amount), 2) {PAY_FROM}JOIN customers c ON o.customer_id = c.id "
            "WHERE c.country = '{x}' AND pay.status = '{ps}'"
        ),
        "{ps} payments from {w} total {v}.",
        "country_pstatus",
    ),
    _broad(
        "payments_country_method",
        ("How many {mw} payments came from customers in {w}?", "How many {a} customers' payments were by {mw}?"),
        ("Count the {mw} payments made by customers from {w}.",),
        sql(
            f"SELECT count(*) {PAY_FROM}JOIN customers c ON o.customer_id = c.id WHERE c.country = '{{x}}' AND pay.method = '{{m}}'"
        ),
        "{v} {mw} payments came from {w}.",
        "country_method",
    ),
    _broad(
        "payments_category_status",
        ("How many {ps} payments were for {w} orders?", "How many payments for {w} products were {ps}?"),
        ("What number of {w} orders had a {ps} payment?",),
        sql(
            f"SELECT count(*) {PAY_FROM}JOIN products p ON o.product_id = p.id WHERE p.category = '{{x}}' AND pay.status = '{{ps}}'"
        ),
        "{v} {ps} payments were for {w}.",
        "category_pstatus",
    ),
    _broad(
        "payments_category_method",
        ("How many {w} orders were paid by {mw}?", "How many {mw} payments were for {w} products?"),
        ("Count the payments by {mw} on {w} orders.",),
        sql(
            f"SELECT count(*) {PAY_FROM}JOIN products p ON o.product_id = p.id WHERE p.category = '{{x}}' AND pay.method = '{{m}}'"
        ),
        "{v} {w} orders were paid by {mw}.",
        "category_method",
    ),
    _broad(
        "category_most_status",
        ("Which category had the largest number of {ps} payments?",),
        ("For which category were the most payments {ps}?",),
        sql(
            f"SELECT p.category {PAY_FROM}JOIN products p ON o.product_id = p.id WHERE pay.status = '{{ps}}' "
            "GROUP BY p.category ORDER BY count(*) DESC LIMIT 1"
        ),
        "{v} had the most {ps} payments.",
        "category_pstatus",
    ),
    # date ranges
    _broad(
        "orders_in_range",
        ("How many orders were placed {w}?", "How many orders did we receive {w}?", "order count {w}"),
        ("What number of orders came {w}?",),
        sql("SELECT count(*) FROM orders WHERE substr(order_date, 1, 7) BETWEEN '{lo}' AND '{hi}'"),
        "{v} orders were placed {w}.",
        "range",
    ),
    _broad(
        "value_in_range",
        ("What were orders {w} worth in total?", "Sum of order totals {w}?"),
        ("How much did orders add up to {w}?",),
        sql("SELECT round(sum(total), 2) FROM orders WHERE substr(order_date, 1, 7) BETWEEN '{lo}' AND '{hi}'"),
        "Orders {w} were worth {v}.",
        "range",
    ),
    _broad(
        "status_in_range",
        ("How many {s} orders were there {w}?", "How many orders placed {w} are {s}?"),
        ("What number of orders from {w} were {s}?",),
        sql("SELECT count(*) FROM orders WHERE status = '{sx}' AND substr(order_date, 1, 7) BETWEEN '{lo}' AND '{hi}'"),
        "{v} orders placed {w} were {s}.",
        "range_status",
    ),
    _broad(
        "signups_in_range",
        ("How many customers joined {w}?", "How many new customers did we get {w}?"),
        ("How many people registered as customers {w}?",),
        sql("SELECT count(*) FROM customers WHERE substr(signup_date, 1, 7) BETWEEN '{lo}' AND '{hi}'"),
        "{v} customers joined {w}.",
        "range",
    ),
    # anti-joins
    _broad(
        "customers_without_orders",
        ("How many customers have not placed any orders?", "Count the customers without orders."),
        ("How many customers never bought anything?",),
        sql("SELECT count(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
        "{v} customers have no orders.",
    ),
    _broad(
        "names_without_orders",
        ("Which customers have no orders?", "List the customers who never ordered."),
        ("Who has never placed an order with us?",),
        sql("SELECT name FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)"),
        "Customers without orders: {all}.",
    ),
    _broad(
        "products_without_orders",
        ("How many products have no orders?", "How many products were never ordered?"),
        ("Are there products nobody has ordered?",),
        sql("SELECT count(*) FROM products WHERE id NOT IN (SELECT product_id FROM orders)"),
        "{v} products have never been ordered.",
    ),
    _broad(
        "orders_without_payment",
        ("How many orders have no payments?", "Count the orders without a payment."),
        ("How many orders were never paid for?",),
        sql("SELECT count(*) FROM orders WHERE id NOT IN (SELECT order_id FROM payments)"),
        "{v} orders have no payment.",
    ),
    # none found
    _broad(
        "customers_absent_country",
        ("How many customers are from {w}?", "Do we have customers in {w}?"),
        ("Are any of our customers based in {w}?",),
        sql("SELECT count(*) FROM customers WHERE country = '{x}'"),
        "There are no customers from {w}.",
        "absent_country",
    ),
    _broad(
        "products_absent_category",
        ("How many {w} products do we sell?", "Do we sell any {w}?"),
        ("Is there a {w} category in the shop?",),
        sql("SELECT count(*) FROM products WHERE category = '{x}'"),
        "We sell no {w} products.",
        "absent_category",
    ),
]
