"""Generate ``shop.sql``: a small, deterministic shop database (customers, products, orders, payments).

Run ``python agents/sql_analyst/data/make_shop_sql.py`` to rewrite ``shop.sql`` next to this file; the
output is committed, and the same seed always gives byte-identical SQL. specterm builds the SQLite
file from ``shop.sql`` into its cache directory at first use (``specterm.agent.sqltool``).

Business rules the data follows (the agent's docs describe them too):
* an order's ``total`` = quantity × the product's price at order time (prices are fixed here);
* a payment belongs to one order; ``captured`` payments are revenue, ``failed`` ones are retried
  (a failed payment is followed by a captured one for the same order), ``refunded`` ones reverse
  revenue and go with ``refunded`` orders;
* ``cancelled`` orders have no payment.
"""

from __future__ import annotations

import random
from datetime import date, timedelta
from pathlib import Path

SEED = 20261202
N_CUSTOMERS = 400
N_ORDERS = 1800

SCHEMA = """\
CREATE TABLE customers (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  country TEXT NOT NULL,
  signup_date TEXT NOT NULL
);
CREATE TABLE products (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  category TEXT NOT NULL,
  price REAL NOT NULL
);
CREATE TABLE orders (
  id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL REFERENCES customers(id),
  product_id INTEGER NOT NULL REFERENCES products(id),
  quantity INTEGER NOT NULL,
  order_date TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('placed', 'shipped', 'delivered', 'cancelled', 'refunded')),
  total REAL NOT NULL
);
CREATE TABLE payments (
  id INTEGER PRIMARY KEY,
  order_id INTEGER NOT NULL REFERENCES orders(id),
  amount REAL NOT NULL,
  method TEXT NOT NULL CHECK (method IN ('card', 'paypal', 'bank_transfer')),
  status TEXT NOT NULL CHECK (status IN ('captured', 'failed', 'refunded')),
  paid_at TEXT NOT NULL
);
"""

FIRST = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory",
         "niaj", "olivia", "peggy", "rupert", "sybil", "trent", "victor", "walter", "yolanda"]
LAST = ["smith", "jones", "garcia", "muller", "rossi", "tanaka", "silva", "novak", "kowalski", "dubois",
        "larsen", "okafor", "patel", "kim", "nguyen"]
COUNTRIES = ["US", "US", "US", "DE", "DE", "FR", "GB", "GB", "JP", "BR", "IN", "NG"]
PRODUCTS = {
    "books": ["sql pocket guide", "systems design", "linear algebra", "sci-fi anthology", "cookbook"],
    "electronics": ["usb-c cable", "mechanical keyboard", "wireless mouse", "27in monitor", "webcam",
                    "noise cancelling headphones", "ssd 1tb", "laptop stand"],
    "home": ["desk lamp", "coffee grinder", "french press", "office chair", "plant pot", "wall clock"],
    "sports": ["yoga mat", "running shoes", "water bottle", "resistance bands", "bike light"],
    "toys": ["puzzle 1000", "building blocks", "chess set", "kite"],
}
STATUS_WEIGHTS = [("delivered", 55), ("shipped", 15), ("placed", 10), ("cancelled", 12), ("refunded", 8)]
START = date(2025, 1, 1)


def _q(value: object) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _insert(table: str, rows: list[tuple]) -> list[str]:
    return [f"INSERT INTO {table} VALUES ({', '.join(_q(v) for v in row)});" for row in rows]


def generate(seed: int = SEED) -> str:
    rng = random.Random(seed)
    customers = []
    for cid in range(1, N_CUSTOMERS + 1):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        signup = START + timedelta(days=rng.randint(0, 364))
        customers.append((cid, f"{first.title()} {last.title()}", f"{first}.{last}.{cid}@example.com",
                          rng.choice(COUNTRIES), signup.isoformat()))
    products = []
    for category, names in PRODUCTS.items():
        for name in names:
            cents = rng.randint(5, 400) * 100 - rng.choice([1, 5, 51])
            products.append((len(products) + 1, name, category, round(cents / 100, 2)))
    price = {p[0]: p[3] for p in products}
    statuses, weights = zip(*STATUS_WEIGHTS)
    orders, payments = [], []
    for oid in range(1, N_ORDERS + 1):
        customer = rng.choice(customers)
        pid = rng.randint(1, len(products))
        qty = rng.choices([1, 2, 3, 4, 5], weights=[60, 20, 10, 6, 4])[0]
        day = date.fromisoformat(customer[4]) + timedelta(days=rng.randint(0, 300))
        status = rng.choices(statuses, weights=weights)[0]
        total = round(price[pid] * qty, 2)
        orders.append((oid, customer[0], pid, qty, day.isoformat(), status, total))
        if status == "cancelled":
            continue
        method = rng.choices(["card", "paypal", "bank_transfer"], weights=[70, 20, 10])[0]
        paid = day + timedelta(days=rng.randint(0, 2))
        if rng.random() < 0.07:  # a failed attempt, retried successfully the next day
            payments.append((len(payments) + 1, oid, total, method, "failed", paid.isoformat()))
            paid += timedelta(days=1)
        payments.append((len(payments) + 1, oid, total, method,
                         "refunded" if status == "refunded" else "captured", paid.isoformat()))
    lines = ["-- Generated by make_shop_sql.py (seed %d). Do not edit by hand." % seed, "BEGIN;", SCHEMA]
    for table, rows in (("customers", customers), ("products", products), ("orders", orders),
                        ("payments", payments)):
        lines += _insert(table, rows)
    lines += ["CREATE INDEX orders_customer ON orders(customer_id);",
              "CREATE INDEX payments_order ON payments(order_id);", "COMMIT;", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    out = Path(__file__).with_name("shop.sql")
    out.write_text(generate(), encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size} bytes)")
