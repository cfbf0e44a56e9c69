//! TPC-C on the peers against the real databases (feature `peers`, not run in CI): load a
//! small scale, compare what the peer holds with the generator's rows, check the consistency
//! conditions, run each transaction explicitly and a few hundred from terminals on several
//! sessions at once, and check again. A peer whose package is not installed is skipped with a
//! message.
//!
//! `cargo test --release -p hayate --features peers tpcc`; the sanity numbers (1 warehouse):
//! `cargo test --release -p hayate --features peers tpcc_sanity -- --ignored --nocapture`.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use super::mariadb::MariadbDriver;
use super::postgres::PostgresDriver;
use super::sql::tpcc_schema::{scaled_text, timestamp_text};
use super::sqlite::SqliteDriver;
use super::tests::{installed, test_base_dir};
use crate::driver::Driver;
use crate::tpcc::check::{check, CheckData, Conditions};
use crate::tpcc::driver::TpccDriver;
use crate::tpcc::metrics::TpccJob;
use crate::tpcc::rows::{generate_all, Row};
use crate::tpcc::run::run_terminal;
use crate::tpcc::spec::{now_micros, Scale};
use crate::tpcc::txn::{
    CustomerSelector, DeliveryInput, NewOrderInput, NewOrderOutcome, OrderItem, OrderStatusInput,
    PaymentInput, StockLevelInput, Terminal, TpccSession, TxnInput, TxnOutput, TxnType,
};

const MIB: u64 = 1024 * 1024;
const SCALE: Scale = Scale {
    warehouses: 2,
    items: 1000,
    customers_per_district: 30,
    orders_per_district: 30,
};
const SEED: u64 = 42;
const TERMINALS: u32 = 4;
const TRANSACTIONS_PER_TERMINAL: u32 = 100;

#[test]
fn decimal_and_timestamp_text_are_exact() {
    assert_eq!(scaled_text(12_345, 100), "123.45");
    assert_eq!(scaled_text(-5, 100), "-0.05");
    assert_eq!(scaled_text(-1_000, 100), "-10.00");
    assert_eq!(scaled_text(0, 100), "0.00");
    assert_eq!(scaled_text(1_234, 10_000), "0.1234");
    assert_eq!(scaled_text(5, 10_000), "0.0005");
    assert_eq!(timestamp_text(0), "1970-01-01 00:00:00.000000");
    assert_eq!(
        timestamp_text(1_700_000_000_123_456),
        "2023-11-14 22:13:20.123456"
    );
    assert_eq!(
        timestamp_text(951_782_400_000_001),
        "2000-02-29 00:00:00.000001"
    );
    assert_eq!(timestamp_text(-1), "1969-12-31 23:59:59.999999");
}

/// The check data sorted, so that two databases holding the same rows compare equal.
fn sorted(mut data: CheckData) -> CheckData {
    data.warehouses.sort_unstable();
    data.districts.sort_by_key(|row| (row.w_id, row.d_id));
    data.customers
        .sort_by_key(|row| (row.w_id, row.d_id, row.c_id));
    data.history.sort_by_key(|row| {
        (
            row.c_w_id, row.c_d_id, row.c_id, row.w_id, row.d_id, row.amount,
        )
    });
    data.orders
        .sort_by_key(|row| (row.w_id, row.d_id, row.o_id));
    data.new_orders
        .sort_by_key(|row| (row.w_id, row.d_id, row.o_id));
    data.order_lines
        .sort_by_key(|row| (row.w_id, row.d_id, row.o_id, row.number));
    data
}

fn assert_conditions_pass(data: &CheckData, which: Conditions) {
    let results = check(data, &SCALE, which);
    assert!(results.len() >= 11, "{results:?}");
    for result in &results {
        assert!(result.passed(), "condition {result:?}");
        assert!(
            result.checked > 0,
            "condition {} checked nothing",
            result.number
        );
    }
}

/// Loads `SCALE` and checks that the peer holds exactly the generator's rows.
fn load_and_compare(driver: &dyn TpccDriver) -> Vec<Row> {
    let reported = AtomicU64::new(0);
    driver
        .load_tpcc(&SCALE, SEED, &|rows| {
            reported.fetch_max(rows, Ordering::Relaxed);
        })
        .expect("load");
    let rows = generate_all(&SCALE, SEED, now_micros());
    assert_eq!(
        reported.load(Ordering::Relaxed),
        rows.len() as u64,
        "progress must reach every row"
    );
    let data = driver.tpcc_check_data().expect("check data");
    assert_conditions_pass(&data, Conditions::All { just_loaded: true });
    let expected = sorted(CheckData::from_rows(&rows));
    let data = sorted(data);
    assert_eq!(data.warehouses, expected.warehouses);
    assert_eq!(data.districts, expected.districts);
    assert_eq!(data.customers, expected.customers);
    assert_eq!(data.history, expected.history);
    assert_eq!(data.orders, expected.orders);
    assert_eq!(data.new_orders, expected.new_orders);
    assert_eq!(data.order_lines, expected.order_lines);
    rows
}

/// The c_id Payment must pick by last name: position ceil(n/2) by C_FIRST.
fn middle_customer(rows: &[Row], w_id: u32, d_id: u32, last: &str) -> u32 {
    let mut named: Vec<(String, u32)> = rows
        .iter()
        .filter_map(|row| match row {
            Row::Customer(customer)
                if customer.w_id == w_id && customer.d_id == d_id && customer.last == last =>
            {
                Some((customer.first.clone(), customer.c_id))
            }
            _ => None,
        })
        .collect();
    named.sort();
    assert!(!named.is_empty(), "no customer named {last}");
    named[(named.len() - 1) / 2].1
}

/// Each transaction once or twice with inputs whose outcome is known.
fn explicit_transactions(driver: &dyn TpccDriver, rows: &[Row]) -> BTreeSet<(u32, u32, u32)> {
    let mut session = driver.connect_tpcc().expect("connect");
    let mut committed = BTreeSet::new();
    let line = |i_id, supply_w_id| OrderItem {
        i_id,
        supply_w_id,
        quantity: 3,
    };
    let mut order = NewOrderInput {
        w_id: 1,
        d_id: 3,
        c_id: 7,
        items: vec![
            line(5, 1),
            line(900, 2),
            line(5, 1),
            line(17, 1),
            line(1, 1),
        ],
        entry_d: now_micros(),
    };
    // An unused item on the last line rolls everything back.
    let mut rolled_back = order.clone();
    rolled_back.items.push(line(SCALE.items + 1, 1));
    let outcome = session.new_order(&rolled_back).expect("new-order");
    assert_eq!(outcome, NewOrderOutcome::RolledBack);
    let next_o_id = SCALE.orders_per_district + 1;
    let outcome = session.new_order(&order).expect("new-order");
    assert_eq!(outcome, NewOrderOutcome::Committed { o_id: next_o_id });
    committed.insert((1, 3, next_o_id));
    order.items.truncate(4);
    let outcome = session.new_order(&order).expect("new-order");
    assert_eq!(
        outcome,
        NewOrderOutcome::Committed {
            o_id: next_o_id + 1
        }
    );
    committed.insert((1, 3, next_o_id + 1));
    // The customer's last order is the one with four lines.
    let status = OrderStatusInput {
        w_id: 1,
        d_id: 3,
        customer: CustomerSelector::ById(7),
    };
    assert_eq!(session.order_status(&status).expect("order-status"), 4);

    let mut payment = PaymentInput {
        w_id: 1,
        d_id: 3,
        c_w_id: 2,
        c_d_id: 5,
        customer: CustomerSelector::ById(11),
        amount: 123_456,
        date: now_micros(),
    };
    assert_eq!(session.payment(&payment).expect("payment"), 11);
    let last = crate::tpcc::spec::last_name(4);
    payment.customer = CustomerSelector::ByLastName(last.clone());
    let expected = middle_customer(rows, 2, 5, &last);
    assert_eq!(session.payment(&payment).expect("payment"), expected);
    let status = OrderStatusInput {
        w_id: 2,
        d_id: 5,
        customer: CustomerSelector::ByLastName(last),
    };
    let lines = session.order_status(&status).expect("order-status");
    assert!((5..=15).contains(&lines), "{lines} lines");

    let delivery = DeliveryInput {
        w_id: 2,
        carrier_id: 4,
        date: now_micros(),
        d_id: None,
    };
    assert_eq!(session.delivery(&delivery).expect("delivery"), 10);
    let stock_level = StockLevelInput {
        w_id: 1,
        d_id: 3,
        threshold: 101,
    };
    // Every stock quantity is below 101: every distinct item of the last 20 orders counts.
    let low = session.stock_level(&stock_level).expect("stock-level");
    let mut items = BTreeSet::new();
    for row in rows {
        if let Row::OrderLine(line) = row {
            let recent = line.o_id + 20 > next_o_id + 1;
            if line.w_id == 1 && line.d_id == 3 && recent {
                items.insert(line.i_id);
            }
        }
    }
    // The two new orders' items (item 900 too: Stock-Level joins the home warehouse's stock).
    items.extend([5, 900, 17, 1]);
    assert_eq!(low as usize, items.len());
    committed
}

/// Runs `TRANSACTIONS_PER_TERMINAL` inputs of each terminal on its own session, at once,
/// retrying retryable failures; returns the committed New-Orders.
fn run_terminals(driver: &dyn TpccDriver) -> BTreeSet<(u32, u32, u32)> {
    let committed = Mutex::new(BTreeSet::new());
    thread::scope(|scope| {
        for index in 0..TERMINALS {
            let committed = &committed;
            scope.spawn(move || {
                let mut session = driver.connect_tpcc().expect("connect");
                let mut terminal = Terminal::new(&SCALE, index, SEED);
                for _ in 0..TRANSACTIONS_PER_TERMINAL {
                    let input = terminal.next();
                    let output = run_with_retries(&mut *session, &input);
                    if let (TxnInput::NewOrder(order), TxnOutput::NewOrder(outcome)) =
                        (&input, output)
                    {
                        match outcome {
                            NewOrderOutcome::Committed { o_id } => {
                                let mut committed = committed.lock().unwrap();
                                assert!(committed.insert((order.w_id, order.d_id, o_id)));
                            }
                            NewOrderOutcome::RolledBack => {
                                assert!(order.items.last().unwrap().i_id > SCALE.items);
                            }
                        }
                    }
                }
            });
        }
    });
    committed.into_inner().unwrap()
}

/// New-Orders and Deliveries on warehouse 1 from several sessions at once: every NEW-ORDER
/// row is delivered at most once, so the queue shrinks by exactly what the Deliveries
/// reported. Returns the committed New-Orders.
fn concurrent_deliveries(driver: &dyn TpccDriver) -> BTreeSet<(u32, u32, u32)> {
    let queued = |data: &CheckData| data.new_orders.iter().filter(|row| row.w_id == 1).count();
    let before = queued(&driver.tpcc_check_data().expect("check data"));
    let committed = Mutex::new(BTreeSet::new());
    let delivered = AtomicU64::new(0);
    thread::scope(|scope| {
        for index in 0..TERMINALS {
            let (committed, delivered) = (&committed, &delivered);
            scope.spawn(move || {
                let mut session = driver.connect_tpcc().expect("connect");
                // Terminals 0, 2, 4... have warehouse 1 as their home.
                let mut terminal = Terminal::new(&SCALE, index * SCALE.warehouses, SEED + 2);
                assert_eq!(terminal.w_id, 1);
                for _ in 0..10 {
                    for kind in [TxnType::NewOrder, TxnType::Delivery, TxnType::NewOrder] {
                        let input = terminal.input(kind);
                        match (&input, run_with_retries(&mut *session, &input)) {
                            (
                                TxnInput::NewOrder(order),
                                TxnOutput::NewOrder(NewOrderOutcome::Committed { o_id }),
                            ) => {
                                let mut committed = committed.lock().unwrap();
                                assert!(committed.insert((order.w_id, order.d_id, o_id)));
                            }
                            (_, TxnOutput::Delivery { delivered: count }) => {
                                delivered.fetch_add(count as u64, Ordering::Relaxed);
                            }
                            _ => {}
                        }
                    }
                }
            });
        }
    });
    let committed = committed.into_inner().unwrap();
    let after = queued(&driver.tpcc_check_data().expect("check data"));
    let delivered = delivered.load(Ordering::Relaxed) as usize;
    assert!(delivered > 0);
    assert_eq!(after, before + committed.len() - delivered);
    committed
}

fn run_with_retries(session: &mut dyn TpccSession, input: &TxnInput) -> TxnOutput {
    for _ in 0..100 {
        match session.run(input) {
            Ok(output) => return output,
            Err(error) if error.retryable => continue,
            Err(error) => panic!("{input:?}: {error}"),
        }
    }
    panic!("{input:?} kept failing with retryable errors")
}

/// Everything a peer must do for TPC-C.
fn run_tpcc(driver: &dyn TpccDriver) {
    let rows = load_and_compare(driver);
    let mut committed = explicit_transactions(driver, &rows);
    committed.extend(run_terminals(driver));
    committed.extend(concurrent_deliveries(driver));
    let job = TpccJob {
        scale: SCALE,
        terminals: 1,
        duration: Duration::from_millis(300),
        seed: SEED + 1,
        acknowledged: None,
        deferred_delivery: true,
    };
    // Deferred Deliveries too: their executor's session delivers district by district.
    let outcome = crate::tpcc::run::run_job(driver, &job).expect("run");
    assert!(outcome.committed() > 0);

    let data = driver.tpcc_check_data().expect("check data");
    assert_conditions_pass(&data, Conditions::All { just_loaded: false });
    let orders = data.order_ids();
    let missing: Vec<_> = committed.iter().filter(|id| !orders.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "committed New-Orders missing: {missing:?}"
    );
    assert!(
        committed.len() > 100,
        "{} New-Orders committed",
        committed.len()
    );
    // No order was left behind by the rolled-back New-Orders: the orders are exactly the
    // loaded ones and the committed ones (the timed run's own included).
    let loaded = SCALE.districts() as usize * SCALE.orders_per_district as usize;
    let timed = outcome.per_type[0].committed as usize;
    assert_eq!(orders.len(), loaded + committed.len() + timed);
}

#[test]
fn postgresql_runs_tpcc_consistently() {
    if !installed("postgresql") {
        return;
    }
    let base = test_base_dir();
    let driver = PostgresDriver::open(base.path(), 16 * MIB).expect("open");
    assert!(driver.settings()["tpcc_isolation"].starts_with("READ COMMITTED"));
    run_tpcc(&driver);
    driver.shutdown().expect("shutdown");
}

#[test]
fn mariadb_runs_tpcc_consistently() {
    if !installed("mariadb") {
        return;
    }
    let base = test_base_dir();
    let driver = MariadbDriver::open(base.path(), 16 * MIB).expect("open");
    assert!(driver.settings()["tpcc_isolation"].starts_with("READ COMMITTED"));
    run_tpcc(&driver);
    driver.shutdown().expect("shutdown");
}

#[test]
fn sqlite_runs_tpcc_consistently() {
    let base = test_base_dir();
    let driver = SqliteDriver::open(base.path(), 16 * MIB).expect("open");
    assert!(driver.settings()["tpcc_isolation"].starts_with("serializable"));
    run_tpcc(&driver);
    driver.shutdown().expect("shutdown");
}

/// Load time and transactions per second of one standard warehouse per peer, 4 terminals for
/// 10 s (printed, not asserted).
#[test]
#[ignore]
fn tpcc_sanity_numbers() {
    let scale = Scale::standard(1);
    for peer in super::PEERS {
        if !installed(peer) {
            continue;
        }
        let base = test_base_dir();
        let driver = super::open_peer(peer, base.path(), 256 * MIB).expect("open");
        let started = Instant::now();
        driver.load_tpcc(&scale, SEED, &|_| {}).expect("load");
        let load_seconds = started.elapsed().as_secs_f64();
        let job = TpccJob {
            scale,
            terminals: 4,
            duration: Duration::from_secs(10),
            seed: SEED,
            acknowledged: None,
            deferred_delivery: false,
        };
        let deadline = Instant::now() + job.duration;
        let outcomes: Vec<_> = thread::scope(|scope| {
            let workers: Vec<_> = (0..job.terminals)
                .map(|index| {
                    let (driver, job) = (&driver, &job);
                    scope.spawn(move || {
                        let mut session = driver.connect_tpcc().expect("connect");
                        let mut terminal = Terminal::new(&scale, index, SEED);
                        run_terminal(&mut *session, &mut terminal, job, deadline, None)
                            .expect("run")
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|worker| worker.join().unwrap())
                .collect()
        });
        let mut total = outcomes[0].clone();
        for outcome in &outcomes[1..] {
            total.merge(outcome);
        }
        let seconds = job.duration.as_secs_f64();
        let data = driver.tpcc_check_data().expect("check data");
        let failed: Vec<_> = check(&data, &scale, Conditions::All { just_loaded: false })
            .into_iter()
            .filter(|result| !result.passed())
            .collect();
        let latency_ms: Vec<String> = TxnType::ALL
            .iter()
            .zip(&total.per_type)
            .map(|(kind, outcome)| {
                let mean = outcome.latency_sum_ns as f64 / outcome.committed.max(1) as f64;
                format!("{} {:.1}", kind.as_str(), mean / 1e6)
            })
            .collect();
        println!(
            "{peer}: load {load_seconds:.1} s, {:.0} transactions/s, NOPM {:.0}, retries {:?}, \
             mean latency ms {latency_ms:?}, failed conditions {failed:?}",
            total.committed() as f64 / seconds,
            total.per_type[0].committed as f64 * 60.0 / seconds,
            total.retries
        );
        driver.shutdown().expect("shutdown");
    }
}
