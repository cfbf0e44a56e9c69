//! SQL against a model: random INSERT/UPDATE/DELETE and point, range and aggregate queries
//! through a session, compared with a `BTreeMap`, with transactions that commit or roll back.
//! Reproducible from the printed seed (`HAYATE_TEST_SEED=S`).

use std::collections::BTreeMap;

use hayate_engine::{Database, DatabaseConfig};
use hayate_sql::{Catalog, Outcome, Session, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn run(session: &mut Session, sql: &str) -> Outcome {
    let mut outcomes = session.execute_sql(sql);
    assert_eq!(outcomes.len(), 1, "{sql}");
    outcomes
        .pop()
        .unwrap()
        .unwrap_or_else(|error| panic!("{sql}: {error}"))
}

fn rows(outcome: Outcome) -> Vec<Vec<Value>> {
    match outcome {
        Outcome::Rows { rows, .. } => rows,
        other => panic!("expected rows, got {other:?}"),
    }
}

fn value(v: Option<i64>) -> Value {
    v.map_or(Value::Null, Value::Int)
}

fn check_seed(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DatabaseConfig::default()).unwrap();
    let catalog = Catalog::open(db).unwrap();
    let mut session = Session::new(catalog, "tester");
    run(&mut session, "CREATE TABLE m (k int4 PRIMARY KEY, v int8)");
    let mut committed: BTreeMap<i64, Option<i64>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = committed.clone();
    let mut in_block = false;
    for step in 0..400 {
        let k: i64 = rng.gen_range(-20..20);
        let context = format!("seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=24 => {
                let v: Option<i64> = (rng.gen_range(0..5) > 0).then(|| rng.gen_range(-1000..1000));
                let sql = format!(
                    "INSERT INTO m VALUES ({k}, {})",
                    v.map_or("NULL".into(), |v| v.to_string())
                );
                let result = session.execute_sql(&sql).pop().unwrap();
                let exists = model.contains_key(&k);
                if exists {
                    assert_eq!(result.unwrap_err().code, "23505", "{context}");
                    if in_block {
                        run(&mut session, "ROLLBACK");
                        model = committed.clone();
                        in_block = false;
                    }
                } else {
                    result.unwrap();
                    model.entry(k).or_insert(v);
                }
            }
            25..=39 => {
                let delta: i64 = rng.gen_range(1..10);
                let high = k + rng.gen_range(0..6);
                let outcome = run(
                    &mut session,
                    &format!("UPDATE m SET v = v + {delta} WHERE k BETWEEN {k} AND {high}"),
                );
                let mut count = 0;
                for (_, v) in model.range_mut(k..=high) {
                    *v = v.map(|v| v + delta);
                    count += 1;
                }
                assert_eq!(
                    outcome,
                    Outcome::Command {
                        tag: format!("UPDATE {count}")
                    },
                    "{context}"
                );
            }
            40..=49 => {
                let outcome = run(&mut session, &format!("DELETE FROM m WHERE k = {k}"));
                let count = model.remove(&k).is_some() as usize;
                assert_eq!(
                    outcome,
                    Outcome::Command {
                        tag: format!("DELETE {count}")
                    },
                    "{context}"
                );
            }
            50..=64 => {
                let got = rows(run(&mut session, &format!("SELECT v FROM m WHERE k = {k}")));
                let expected: Vec<Vec<Value>> = model
                    .get(&k)
                    .map(|v| vec![vec![value(*v)]])
                    .unwrap_or_default();
                assert_eq!(got, expected, "{context}");
            }
            65..=79 => {
                let got = rows(run(
                    &mut session,
                    &format!("SELECT k, v FROM m WHERE k >= {k} ORDER BY k DESC LIMIT 4"),
                ));
                let expected: Vec<Vec<Value>> = model
                    .range(k..)
                    .rev()
                    .take(4)
                    .map(|(k, v)| vec![Value::Int(*k), value(*v)])
                    .collect();
                assert_eq!(got, expected, "{context}");
            }
            80..=87 => {
                let got = rows(run(
                    &mut session,
                    "SELECT count(*), count(v), sum(v), min(v), max(v) FROM m",
                ));
                let values: Vec<i64> = model.values().flatten().copied().collect();
                let expected = vec![vec![
                    Value::Int(model.len() as i64),
                    Value::Int(values.len() as i64),
                    // sum(int8) is numeric, as in PostgreSQL.
                    match values.is_empty() {
                        true => Value::Null,
                        false => Value::Numeric(values.iter().sum::<i64>().into()),
                    },
                    value(values.iter().min().copied()),
                    value(values.iter().max().copied()),
                ]];
                assert_eq!(got, expected, "{context}");
            }
            88..=93 => {
                if in_block {
                    run(&mut session, "COMMIT");
                    committed = model.clone();
                } else {
                    run(&mut session, "BEGIN");
                }
                in_block = !in_block;
            }
            _ => {
                if in_block {
                    run(&mut session, "ROLLBACK");
                    model = committed.clone();
                    in_block = false;
                }
            }
        }
        if !in_block {
            committed = model.clone();
        }
    }
}

#[test]
fn sql_matches_a_model() {
    if let Some(seed) = std::env::var("HAYATE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        check_seed(seed);
        return;
    }
    for seed in 0..6 {
        eprintln!("sql model: seed {seed}");
        check_seed(seed);
    }
}
