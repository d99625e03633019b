"""The sql_analyst's intents: questions about the shop's customers, orders, products and payments,
and the requests it answers without a tool (``intents`` says what an intent is)."""

from __future__ import annotations

from specterm.models.training.intent_base import NONE, SHOP, Intent, look_first, orders_of_product, sql

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
