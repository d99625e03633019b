"""The ops_assistant's intents (SLO error budgets, capacity, its runbooks and policies, and what it
answers without a tool), and the questions of its docs intent (``intents`` says what an intent is)."""

from __future__ import annotations

from specterm.models.training.intent_base import NONE, Intent


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
