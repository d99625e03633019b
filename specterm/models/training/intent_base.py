"""The parts every intent list is written with: the ``Intent`` record, call builders (``sql``, ``look_first``)
and the shop's entities (countries, statuses, methods, months). Below ``intents_sql``, ``intents_ops`` and
``intents_broad`` so that each can use them without importing another, and below ``intents``, which samples them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

COUNTRIES = {
    "US": (["the US", "the United States", "the USA"], ["American", "US"]),
    "DE": (["Germany"], ["German"]),
    "FR": (["France"], ["French"]),
    "JP": (["Japan"], ["Japanese"]),
    "GB": (["the UK", "Britain", "the United Kingdom"], ["British", "UK"]),
    "BR": (["Brazil"], ["Brazilian"]),
    "NG": (["Nigeria"], ["Nigerian"]),
    "IN": (["India"], ["Indian"]),
}
ORDER_STATUS = {
    "placed": ["placed"],
    "shipped": ["shipped"],
    "delivered": ["delivered"],
    "cancelled": ["cancelled", "canceled"],
    "refunded": ["refunded"],
}
PAY_STATUS = ["captured", "failed", "refunded"]
METHODS = {"card": ["card", "credit card"], "paypal": ["paypal", "PayPal"], "bank_transfer": ["bank transfer"]}
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]


@dataclass(frozen=True)
class Intent:
    name: str
    train: tuple[str, ...]
    heldout: tuple[str, ...]
    calls: Callable[[dict], list[tuple[str, dict]]]
    """The tool calls that answer it (a later call may use ``{r1}``: the first call's first value)."""
    answer: str
    """The final answer; ``{v}`` is the last result's first value, ``{all}`` all its first-column values."""
    slot: str = ""
    weight: float = 1.0


def sql(q: str) -> Callable[[dict], list[tuple[str, dict]]]:
    return lambda s: [("query_sql", {"sql": q.format(**s)})]


def look_first(*tables: str) -> Callable[[Callable], Callable]:
    """Look before querying: list_tables ("*") and describe_table calls before the query."""

    def wrap(inner):
        def calls(s):
            steps = [("list_tables", {})] if "*" in tables else []
            steps += [("describe_table", {"table": t}) for t in tables if t != "*"]
            return steps + inner(s)

        return calls

    return wrap


def orders_of_product(order: str) -> Callable[[dict], list[tuple[str, dict]]]:
    """Two dependent queries: the product first by price (``order``: DESC the most expensive, ASC the
    cheapest), then its orders, the first result copied in as ``{r1}``."""
    return lambda s: [
        ("query_sql", {"sql": f"SELECT name FROM products ORDER BY price {order} LIMIT 1"}),
        (
            "query_sql",
            {
                "sql": "SELECT count(*) FROM orders JOIN products ON orders.product_id = "
                "products.id WHERE products.name = '{r1}'"
            },
        ),
    ]


NONE = lambda s: []  # noqa: E731 - answered without a tool
SHOP = "the shop's customers, orders, products and payments"
