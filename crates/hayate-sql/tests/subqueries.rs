//! Subqueries: in FROM (derived tables), IN / NOT IN, EXISTS / NOT EXISTS and scalar
//! subqueries, correlated or not, compared with results computed here over the same data.

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};

fn session(dir: &std::path::Path) -> Session {
    let db = Database::open(dir, DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    Session::new(catalog, "tester")
}

fn query(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    let outcome = session.execute_sql(sql).pop().unwrap();
    match outcome.unwrap_or_else(|error| panic!("{sql}: {error}")) {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

fn error_code(session: &mut Session, sql: &str) -> &'static str {
    match session.execute_sql(sql).pop().unwrap() {
        Ok(outcome) => panic!("{sql}: expected an error, got {outcome:?}"),
        Err(error) => error.code,
    }
}

fn ints(values: impl IntoIterator<Item = i64>) -> Vec<Vec<Value>> {
    values.into_iter().map(|v| vec![Value::Int(v)]).collect()
}

/// orders(id pk, customer, amount); customers(id pk, region); customer may be NULL.
/// (id, customer, amount) and (id, region).
type Orders = Vec<(i64, Option<i64>, i64)>;
type Customers = Vec<(i64, i64)>;

fn load(session: &mut Session) -> (Orders, Customers) {
    let orders: Orders = (1..=40)
        .map(|id| {
            let customer = (id % 7 != 0).then_some(id * 5 % 13);
            (id, customer, id * 37 % 101)
        })
        .collect();
    let customers: Customers = (0..10).map(|id| (id, id % 3)).collect();
    for outcome in session.execute_sql(
        "CREATE TABLE orders (id int4 PRIMARY KEY, customer int4, amount int8); \
         CREATE TABLE customers (id int4 PRIMARY KEY, region int4)",
    ) {
        outcome.unwrap();
    }
    for (id, customer, amount) in &orders {
        let customer = customer.map_or("NULL".into(), |c| c.to_string());
        query(
            session,
            &format!("INSERT INTO orders VALUES ({id}, {customer}, {amount}) RETURNING id"),
        );
    }
    for (id, region) in &customers {
        query(
            session,
            &format!("INSERT INTO customers VALUES ({id}, {region}) RETURNING id"),
        );
    }
    (orders, customers)
}

#[test]
fn subqueries_match_results_computed_here() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    let (orders, customers) = load(&mut s);
    let in_region = |region: i64| {
        customers
            .iter()
            .filter(move |(_, r)| *r == region)
            .map(|(id, _)| *id)
            .collect::<Vec<_>>()
    };

    // IN / NOT IN (uncorrelated).
    let region0 = in_region(0);
    let expected = orders
        .iter()
        .filter(|(_, c, _)| c.is_some_and(|c| region0.contains(&c)))
        .map(|(id, _, _)| *id);
    assert_eq!(
        query(&mut s, "SELECT id FROM orders WHERE customer IN (SELECT id FROM customers WHERE region = 0) ORDER BY id"),
        ints(expected)
    );
    // NOT IN: rows with a NULL customer are unknown, so left out; customers 10..12 exist
    // only in orders.
    let known: Vec<i64> = customers.iter().map(|(id, _)| *id).collect();
    let expected = orders
        .iter()
        .filter(|(_, c, _)| c.is_some_and(|c| !known.contains(&c)))
        .map(|(id, _, _)| *id);
    assert_eq!(
        query(
            &mut s,
            "SELECT id FROM orders WHERE customer NOT IN (SELECT id FROM customers) ORDER BY id"
        ),
        ints(expected)
    );
    // NOT IN over a set holding NULL is never true.
    assert_eq!(
        query(
            &mut s,
            "SELECT id FROM customers WHERE id NOT IN (SELECT customer FROM orders)"
        ),
        ints([])
    );

    // EXISTS / NOT EXISTS, correlated.
    let with_orders = |id: i64| orders.iter().any(|(_, c, _)| *c == Some(id));
    assert_eq!(
        query(&mut s, "SELECT c.id FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer = c.id) ORDER BY c.id"),
        ints(customers.iter().map(|(id, _)| *id).filter(|id| with_orders(*id)))
    );
    assert_eq!(
        query(&mut s, "SELECT id FROM customers WHERE NOT EXISTS (SELECT 1 FROM orders WHERE customer = customers.id) ORDER BY id"),
        ints(customers.iter().map(|(id, _)| *id).filter(|id| !with_orders(*id)))
    );

    // Scalar subqueries: correlated in the select list, uncorrelated against the key.
    let expected: Vec<Vec<Value>> = customers
        .iter()
        .map(|(id, _)| {
            let total: Vec<i64> = orders
                .iter()
                .filter(|(_, c, _)| *c == Some(*id))
                .map(|(_, _, amount)| *amount)
                .collect();
            let sum = if total.is_empty() {
                Value::Null
            } else {
                Value::Int(total.iter().sum())
            };
            vec![Value::Int(*id), sum]
        })
        .collect();
    assert_eq!(
        query(&mut s, "SELECT id, (SELECT sum(amount)::int8 FROM orders WHERE orders.customer = customers.id) FROM customers ORDER BY id"),
        expected
    );
    let max = orders.iter().map(|(_, _, amount)| *amount).max().unwrap();
    let expected = orders
        .iter()
        .filter(|(_, _, a)| *a == max)
        .map(|(id, _, _)| *id);
    assert_eq!(
        query(
            &mut s,
            "SELECT id FROM orders WHERE amount = (SELECT max(amount) FROM orders)"
        ),
        ints(expected)
    );
    let plan = query(
        &mut s,
        "EXPLAIN SELECT amount FROM orders WHERE id = (SELECT max(id) FROM customers)",
    );
    assert!(
        format!("{plan:?}").contains("Point Lookup on orders"),
        "{plan:?}"
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT amount FROM orders WHERE id = (SELECT max(id) FROM customers)"
        ),
        vec![vec![Value::Int(orders[8].2)]]
    );
    assert_eq!(
        query(&mut s, "SELECT (SELECT id FROM customers WHERE id = 99)"),
        vec![vec![Value::Null]]
    );
    assert_eq!(
        error_code(&mut s, "SELECT (SELECT id FROM customers)"),
        "21000"
    );
    assert_eq!(
        error_code(&mut s, "SELECT (SELECT id, region FROM customers)"),
        "42601"
    );

    // Two levels of correlation: the innermost reads the outermost row.
    let expected = customers
        .iter()
        .filter(|(id, region)| {
            orders.iter().any(|(_, c, amount)| {
                *c == Some(*id)
                    && customers
                        .iter()
                        .any(|(other, r)| other == id && *r == *region && *amount > 50)
            })
        })
        .map(|(id, _)| *id);
    assert_eq!(
        query(&mut s, "SELECT c.id FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer = c.id AND EXISTS (SELECT 1 FROM customers d WHERE d.id = o.customer AND d.region = c.region AND o.amount > 50)) ORDER BY 1"),
        ints(expected)
    );

    // Derived tables.
    let mut counts: std::collections::BTreeMap<i64, i64> = Default::default();
    for (_, customer, _) in &orders {
        if let Some(c) = customer {
            *counts.entry(*c).or_default() += 1;
        }
    }
    let expected: Vec<Vec<Value>> = counts
        .iter()
        .filter(|(_, n)| **n > 3)
        .map(|(c, n)| vec![Value::Int(*c), Value::Int(*n)])
        .collect();
    assert_eq!(
        query(&mut s, "SELECT t.k, t.n FROM (SELECT customer AS k, count(*) AS n FROM orders WHERE customer IS NOT NULL GROUP BY customer) AS t WHERE t.n > 3 ORDER BY t.k"),
        expected
    );
    let expected: Vec<Vec<Value>> = counts
        .iter()
        .filter_map(|(c, n)| {
            let region = customers.iter().find(|(id, _)| id == c)?.1;
            Some(vec![Value::Int(*c), Value::Int(*n), Value::Int(region)])
        })
        .collect();
    assert_eq!(
        query(&mut s, "SELECT t.k, t.n, customers.region FROM (SELECT customer, count(*) FROM orders GROUP BY customer) t(k, n) JOIN customers ON customers.id = t.k ORDER BY 1"),
        expected
    );
    assert_eq!(error_code(&mut s, "SELECT * FROM (SELECT 1)"), "42601");
    // UPDATE and DELETE take subqueries too, correlated ones as well.
    query(&mut s, "UPDATE customers SET region = (SELECT count(*) FROM orders WHERE orders.customer = customers.id) WHERE id < 3 RETURNING id");
    let expected = (0..3).map(|id| {
        let n = orders.iter().filter(|(_, c, _)| *c == Some(id)).count() as i64;
        vec![Value::Int(id), Value::Int(n)]
    });
    assert_eq!(
        query(
            &mut s,
            "SELECT id, region FROM customers WHERE id < 3 ORDER BY id"
        ),
        expected.collect::<Vec<_>>()
    );
    for (id, region) in customers.iter().take(3) {
        query(
            &mut s,
            &format!("UPDATE customers SET region = {region} WHERE id = {id} RETURNING id"),
        );
    }
    query(&mut s, "UPDATE orders SET amount = 0 WHERE customer IN (SELECT id FROM customers WHERE region = 2) RETURNING id");
    let region2 = in_region(2);
    let zeroed = orders
        .iter()
        .filter(|(_, c, _)| c.is_some_and(|c| region2.contains(&c)))
        .count();
    assert_eq!(
        query(&mut s, "SELECT count(*) FROM orders WHERE amount = 0"),
        vec![vec![Value::Int(zeroed as i64)]]
    );
}

/// A correlated subquery whose correlation column is indexed reads through the index with
/// the enclosing row's value (it failed with 0A000 when the lookup value was evaluated
/// without the enclosing row: every Django Subquery/Exists over a foreign key).
#[test]
fn correlated_subqueries_through_an_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = session(dir.path());
    for sql in [
        "CREATE TABLE product (id int PRIMARY KEY, name text)",
        "CREATE TABLE review (id int PRIMARY KEY, product_id int, score int, posted int)",
        "CREATE INDEX review_product ON review (product_id)",
        "CREATE INDEX review_posted ON review (posted)",
        "INSERT INTO product VALUES (1, 'a'), (2, 'b'), (3, 'c')",
        "INSERT INTO review VALUES (1, 1, 5, 10), (2, 1, 3, 20), (3, 2, 4, 5)",
    ] {
        query_or_command(&mut s, sql);
    }
    let optional = |values: &[Option<i64>]| -> Vec<Vec<Value>> {
        values
            .iter()
            .map(|v| vec![v.map_or(Value::Null, Value::Int)])
            .collect()
    };
    assert_eq!(
        query(
            &mut s,
            "SELECT (SELECT r.score FROM review r WHERE r.product_id = p.id \
             ORDER BY r.posted DESC LIMIT 1) FROM product p ORDER BY p.id"
        ),
        optional(&[Some(3), Some(4), None])
    );
    assert_eq!(
        query(
            &mut s,
            "SELECT p.id FROM product p WHERE EXISTS (SELECT 1 FROM review r \
             WHERE r.product_id = p.id LIMIT 1) ORDER BY 1"
        ),
        ints([1, 2])
    );
    // A range through the other index, bounded by the enclosing row.
    assert_eq!(
        query(
            &mut s,
            "SELECT (SELECT count(*) FROM review r WHERE r.posted > p.id * 6) \
             FROM product p ORDER BY p.id"
        ),
        ints([2, 1, 1])
    );
    query_or_command(
        &mut s,
        "UPDATE product SET name = (SELECT max(r.score) FROM review r \
         WHERE r.product_id = product.id)::text WHERE id < 3",
    );
    assert_eq!(
        query(&mut s, "SELECT name FROM product ORDER BY id"),
        vec![
            vec![Value::Text("5".into())],
            vec![Value::Text("4".into())],
            vec![Value::Text("c".into())],
        ]
    );
}

fn query_or_command(session: &mut Session, sql: &str) {
    if let Err(error) = session.execute_sql(sql).pop().unwrap() {
        panic!("{sql}: {error}");
    }
}
