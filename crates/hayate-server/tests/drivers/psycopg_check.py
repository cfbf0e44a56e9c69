"""psycopg 3, unmodified, against Hayate: DDL, parameterized queries in text and binary
formats, explicit transactions (commit and rollback), a unique violation, many executions of
one query and a pipeline. Exits non-zero with a message on the first difference from
PostgreSQL's behaviour.

Two settings differ from psycopg's defaults, for features Hayate lacks (README "Missing"):
DDL runs on an autocommit connection (DDL inside a transaction block is refused with 0A000),
and prepare_threshold=None (psycopg's server-side prepared statements end with DEALLOCATE ALL,
which the server does not support yet)."""

import sys

import psycopg

port = int(sys.argv[1])
params = dict(host="127.0.0.1", port=port, user="tester", dbname="test")


def check(actual, expected, what):
    if actual != expected:
        sys.exit(f"{what}: expected {expected!r}, got {actual!r}")


with psycopg.connect(autocommit=True, **params) as conn:
    conn.execute(
        "CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance int8)"
    )

# psycopg opens a transaction before the first statement.
with psycopg.connect(prepare_threshold=None, **params) as conn:
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO accounts VALUES (%s, %s, %s)",
            [(i, f"owner {i}", 100) for i in range(20)],
        )
    conn.commit()

    for binary in (False, True):
        row = conn.execute(
            "SELECT owner, balance FROM accounts WHERE id = %s", (3,), binary=binary
        ).fetchone()
        check(row, ("owner 3", 100), f"point select (binary={binary})")

    # A transaction rolled back leaves nothing behind.
    conn.execute("UPDATE accounts SET balance = balance - %s WHERE id = %s", (30, 1))
    conn.execute("UPDATE accounts SET balance = balance + %s WHERE id = %s", (30, 2))
    conn.rollback()
    check(int(conn.execute("SELECT sum(balance) FROM accounts").fetchone()[0]), 2000, "sum after rollback")

    # A unique violation carries its SQLSTATE and aborts the transaction.
    try:
        conn.execute("INSERT INTO accounts VALUES (%s, %s, %s)", (1, "dup", 0))
        sys.exit("duplicate key accepted")
    except psycopg.errors.UniqueViolation as error:
        check(error.sqlstate, "23505", "unique violation")
    conn.rollback()

    with conn.transaction():
        conn.execute("UPDATE accounts SET balance = balance - 30 WHERE id = 1")
        conn.execute("UPDATE accounts SET balance = balance + 30 WHERE id = 2")
    rows = conn.execute(
        "SELECT id, balance FROM accounts WHERE id >= %s AND id <= %s ORDER BY id", (1, 2)
    ).fetchall()
    check(rows, [(1, 70), (2, 130)], "committed transfer")

    # One query many times (unnamed statements each time).
    for i in range(10):
        row = conn.execute("SELECT balance FROM accounts WHERE id = %s", (i,)).fetchone()
        check(row, (100 if i not in (1, 2) else {1: 70, 2: 130}[i],), f"prepared select {i}")
    conn.rollback()

    with conn.pipeline():
        cursors = [conn.execute("SELECT %s::int8 + 1", (i,)) for i in range(5)]
    check([c.fetchone()[0] for c in cursors], [1, 2, 3, 4, 5], "pipeline")

print("psycopg ok")
