"""psycopg 3, unmodified and with its defaults, against Hayate: DDL inside psycopg's implicit
transaction (committed and rolled back), parameterized queries in text and binary formats,
explicit transactions (commit and rollback), a unique violation, nested transaction blocks
(savepoints, one rolled back by an error), many executions of one query (psycopg prepares it
server-side after prepare_threshold=5 executions and sends DEALLOCATE ALL after a ROLLBACK) and
a pipeline. Exits non-zero with a message on the first difference from PostgreSQL's
behaviour."""

import sys

import psycopg

port = int(sys.argv[1])
params = dict(host="127.0.0.1", port=port, user="tester", dbname="test")


def check(actual, expected, what):
    if actual != expected:
        sys.exit(f"{what}: expected {expected!r}, got {actual!r}")


# psycopg opens a transaction before the first statement, DDL included.
with psycopg.connect(**params) as conn:
    conn.execute("CREATE TABLE dropped (id int PRIMARY KEY)")
    conn.execute("INSERT INTO dropped VALUES (1)")
    conn.rollback()
    try:
        conn.execute("SELECT * FROM dropped")
        sys.exit("a table created in a rolled back transaction exists")
    except psycopg.errors.UndefinedTable as error:
        check(error.sqlstate, "42P01", "table rolled back")
    conn.rollback()
    conn.execute(
        "CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance int8)"
    )
    conn.commit()

with psycopg.connect(**params) as conn:
    check(conn.prepare_threshold, 5, "psycopg's default prepare_threshold")
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

    conn.commit()

    # Nested blocks are savepoints; an error inside one rolls back only its part.
    with conn.transaction():
        conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = 3")
        try:
            with conn.transaction():
                conn.execute("UPDATE accounts SET balance = balance + 1000 WHERE id = 4")
                conn.execute("INSERT INTO accounts VALUES (%s, %s, %s)", (5, "dup", 0))
        except psycopg.errors.UniqueViolation:
            pass
        with conn.transaction():
            conn.execute("UPDATE accounts SET balance = balance + 2 WHERE id = 5")
    rows = conn.execute("SELECT id, balance FROM accounts WHERE id IN (3, 4, 5) ORDER BY id").fetchall()
    check(rows, [(3, 101), (4, 100), (5, 102)], "savepoints")

    # One query many times: psycopg prepares it server-side after 5 executions; the ROLLBACK
    # makes it send DEALLOCATE ALL, after which it prepares the query again.
    expected = {1: 70, 2: 130, 3: 101, 5: 102}
    for round in range(2):
        for i in range(10):
            row = conn.execute("SELECT balance FROM accounts WHERE id = %s", (i,)).fetchone()
            check(row, (expected.get(i, 100),), f"prepared select {i} (round {round})")
        conn.rollback()
    # A statement prepared under one table definition runs after an ALTER TABLE.
    conn.execute("ALTER TABLE accounts ADD COLUMN note text DEFAULT 'n'")
    conn.commit()
    for i in range(7):
        row = conn.execute("SELECT balance, note FROM accounts WHERE id = %s", (0,)).fetchone()
        check(row, (100, "n"), "prepared select after ALTER TABLE")
    conn.commit()

    with conn.pipeline():
        cursors = [conn.execute("SELECT %s::int8 + 1", (i,)) for i in range(5)]
    check([c.fetchone()[0] for c in cursors], [1, 2, 3, 4, 5], "pipeline")

print("psycopg ok")
