//! TPC-C in SQL, what is the same for every peer: the schema of clause 1.3 per dialect, the
//! rows of the initial database as SQL values, and the parallel loader. The transactions are
//! in `tpcc_transactions`.
//!
//! Loading:
//! 1. `create_table_statements` creates the nine tables (with or without their keys).
//! 2. `load_in_parallel` runs the jobs (ITEM, then one per warehouse) on a few threads, each
//!    peer loading a job its own fastest way (COPY, multi-row INSERT, prepared INSERT) from
//!    `row_values`.
//! 3. Peers loading without keys add them with `key_statements`.
//!
//! Exact values: the lab keeps money in cents, rates in ten-thousandths and timestamps in
//! microseconds. PostgreSQL and MariaDB store `numeric`/`decimal` and `timestamp`/`datetime(6)`
//! as the specification asks; values go in as integers divided in SQL (`$1::int8 / 100.0`,
//! `? / 100`: exact decimal division) or as decimal text, and come out multiplied and cast to
//! a 64-bit integer, so no value ever passes through floating point. SQLite has no exact
//! decimal type: it stores integer cents, ten-thousandths and microseconds.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use crate::driver::{DriverError, DriverResult};
use crate::tpcc::rows::{Address, Row};
use crate::tpcc::spec::Scale;

/// The isolation PostgreSQL and MariaDB run TPC-C at, recorded in their settings.
pub(crate) const ISOLATION: &str = "READ COMMITTED with SELECT ... FOR UPDATE on rows read then \
     written (district, stock, customer, new_order); REPEATABLE READ snapshot for the check";
/// Loading jobs run at once, each on its own connection.
const LOAD_THREADS_MAX: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Postgres,
    Mariadb,
    Sqlite,
}

/// A column's type, spelled per dialect by `Dialect::column_type`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// `integer`: ids, counts, quantities (the specification's numeric(N) with N <= 8).
    Int,
    /// An integer that is null until set (O_CARRIER_ID).
    NullableInt,
    /// numeric(precision, 2): money, in cents in the lab.
    Money(u32),
    /// numeric(4,4): tax and discount rates, in ten-thousandths in the lab.
    Rate,
    Timestamp,
    /// A timestamp that is null until set (OL_DELIVERY_D).
    NullableTimestamp,
    Varchar(u32),
    Char(u32),
}

pub(crate) struct TableSpec {
    pub name: &'static str,
    pub columns: &'static [(&'static str, Kind)],
    /// Empty for HISTORY, which has no primary key (clause 1.3).
    primary_key: &'static [&'static str],
}

impl TableSpec {
    pub fn column_list(&self) -> String {
        let names: Vec<&str> = self.columns.iter().map(|(name, _)| *name).collect();
        names.join(", ")
    }
}

use Kind::*;

const ADDRESS_WIDTHS: [Kind; 5] = [Varchar(20), Varchar(20), Varchar(20), Char(2), Char(9)];

pub(crate) const WAREHOUSE: TableSpec = TableSpec {
    name: "warehouse",
    columns: &[
        ("w_id", Int),
        ("w_name", Varchar(10)),
        ("w_street_1", ADDRESS_WIDTHS[0]),
        ("w_street_2", ADDRESS_WIDTHS[1]),
        ("w_city", ADDRESS_WIDTHS[2]),
        ("w_state", ADDRESS_WIDTHS[3]),
        ("w_zip", ADDRESS_WIDTHS[4]),
        ("w_tax", Rate),
        ("w_ytd", Money(12)),
    ],
    primary_key: &["w_id"],
};

pub(crate) const DISTRICT: TableSpec = TableSpec {
    name: "district",
    columns: &[
        ("d_id", Int),
        ("d_w_id", Int),
        ("d_name", Varchar(10)),
        ("d_street_1", ADDRESS_WIDTHS[0]),
        ("d_street_2", ADDRESS_WIDTHS[1]),
        ("d_city", ADDRESS_WIDTHS[2]),
        ("d_state", ADDRESS_WIDTHS[3]),
        ("d_zip", ADDRESS_WIDTHS[4]),
        ("d_tax", Rate),
        ("d_ytd", Money(12)),
        ("d_next_o_id", Int),
    ],
    primary_key: &["d_w_id", "d_id"],
};

pub(crate) const CUSTOMER: TableSpec = TableSpec {
    name: "customer",
    columns: &[
        ("c_id", Int),
        ("c_d_id", Int),
        ("c_w_id", Int),
        ("c_first", Varchar(16)),
        ("c_middle", Char(2)),
        ("c_last", Varchar(16)),
        ("c_street_1", ADDRESS_WIDTHS[0]),
        ("c_street_2", ADDRESS_WIDTHS[1]),
        ("c_city", ADDRESS_WIDTHS[2]),
        ("c_state", ADDRESS_WIDTHS[3]),
        ("c_zip", ADDRESS_WIDTHS[4]),
        ("c_phone", Char(16)),
        ("c_since", Timestamp),
        ("c_credit", Char(2)),
        ("c_credit_lim", Money(12)),
        ("c_discount", Rate),
        ("c_balance", Money(12)),
        ("c_ytd_payment", Money(12)),
        ("c_payment_cnt", Int),
        ("c_delivery_cnt", Int),
        ("c_data", Varchar(500)),
    ],
    primary_key: &["c_w_id", "c_d_id", "c_id"],
};

pub(crate) const HISTORY: TableSpec = TableSpec {
    name: "history",
    columns: &[
        ("h_c_id", Int),
        ("h_c_d_id", Int),
        ("h_c_w_id", Int),
        ("h_d_id", Int),
        ("h_w_id", Int),
        ("h_date", Timestamp),
        ("h_amount", Money(6)),
        ("h_data", Varchar(24)),
    ],
    primary_key: &[],
};

pub(crate) const NEW_ORDER: TableSpec = TableSpec {
    name: "new_order",
    columns: &[("no_o_id", Int), ("no_d_id", Int), ("no_w_id", Int)],
    primary_key: &["no_w_id", "no_d_id", "no_o_id"],
};

pub(crate) const ORDERS: TableSpec = TableSpec {
    name: "orders",
    columns: &[
        ("o_id", Int),
        ("o_d_id", Int),
        ("o_w_id", Int),
        ("o_c_id", Int),
        ("o_entry_d", Timestamp),
        ("o_carrier_id", NullableInt),
        ("o_ol_cnt", Int),
        ("o_all_local", Int),
    ],
    primary_key: &["o_w_id", "o_d_id", "o_id"],
};

pub(crate) const ORDER_LINE: TableSpec = TableSpec {
    name: "order_line",
    columns: &[
        ("ol_o_id", Int),
        ("ol_d_id", Int),
        ("ol_w_id", Int),
        ("ol_number", Int),
        ("ol_i_id", Int),
        ("ol_supply_w_id", Int),
        ("ol_delivery_d", NullableTimestamp),
        ("ol_quantity", Int),
        ("ol_amount", Money(6)),
        ("ol_dist_info", Char(24)),
    ],
    primary_key: &["ol_w_id", "ol_d_id", "ol_o_id", "ol_number"],
};

pub(crate) const ITEM: TableSpec = TableSpec {
    name: "item",
    columns: &[
        ("i_id", Int),
        ("i_im_id", Int),
        ("i_name", Varchar(24)),
        ("i_price", Money(5)),
        ("i_data", Varchar(50)),
    ],
    primary_key: &["i_id"],
};

pub(crate) const STOCK: TableSpec = TableSpec {
    name: "stock",
    columns: &[
        ("s_i_id", Int),
        ("s_w_id", Int),
        ("s_quantity", Int),
        ("s_dist_01", Char(24)),
        ("s_dist_02", Char(24)),
        ("s_dist_03", Char(24)),
        ("s_dist_04", Char(24)),
        ("s_dist_05", Char(24)),
        ("s_dist_06", Char(24)),
        ("s_dist_07", Char(24)),
        ("s_dist_08", Char(24)),
        ("s_dist_09", Char(24)),
        ("s_dist_10", Char(24)),
        ("s_ytd", Int),
        ("s_order_cnt", Int),
        ("s_remote_cnt", Int),
        ("s_data", Varchar(50)),
    ],
    primary_key: &["s_w_id", "s_i_id"],
};

pub(crate) const TABLES: [&TableSpec; 9] = [
    &WAREHOUSE,
    &DISTRICT,
    &CUSTOMER,
    &HISTORY,
    &NEW_ORDER,
    &ORDERS,
    &ORDER_LINE,
    &ITEM,
    &STOCK,
];

/// The secondary indexes the transactions need: customers by last name (Payment and
/// Order-Status), a customer's last order (Order-Status).
const SECONDARY_INDEXES: [(&str, &str, &str); 2] = [
    (
        "customer_name",
        "customer",
        "c_w_id, c_d_id, c_last, c_first",
    ),
    ("orders_customer", "orders", "o_w_id, o_d_id, o_c_id, o_id"),
];

impl Dialect {
    fn column_type(self, kind: Kind) -> String {
        let (money, rate, timestamp) = match self {
            Dialect::Postgres => ("numeric", "numeric(4,4)", "timestamp"),
            Dialect::Mariadb => ("decimal", "decimal(4,4)", "datetime(6)"),
            // Integer cents, ten-thousandths and microseconds: SQLite has no exact decimal.
            Dialect::Sqlite => ("", "integer", "integer"),
        };
        match kind {
            Int => "integer NOT NULL".into(),
            NullableInt => "integer".into(),
            Money(_) if self == Dialect::Sqlite => "integer NOT NULL".into(),
            Money(precision) => format!("{money}({precision},2) NOT NULL"),
            Rate => format!("{rate} NOT NULL"),
            Timestamp => format!("{timestamp} NOT NULL"),
            NullableTimestamp => timestamp.into(),
            Varchar(length) => format!("varchar({length}) NOT NULL"),
            Char(length) => format!("char({length}) NOT NULL"),
        }
    }

    /// A money parameter (cents) as the column's value.
    pub fn money_in(self) -> &'static str {
        match self {
            Dialect::Postgres => "(?::int8 / 100.0)",
            Dialect::Mariadb => "(? / 100)",
            Dialect::Sqlite => "?",
        }
    }

    /// Money as exact integer cents.
    pub fn money_out(self, expression: &str) -> String {
        self.scaled_out(expression, 100)
    }

    /// A rate as exact integer ten-thousandths.
    pub fn rate_out(self, expression: &str) -> String {
        self.scaled_out(expression, 10_000)
    }

    fn scaled_out(self, expression: &str, factor: u32) -> String {
        match self {
            Dialect::Postgres => format!("(({expression}) * {factor})::int8"),
            Dialect::Mariadb => format!("CAST(({expression}) * {factor} AS SIGNED)"),
            Dialect::Sqlite => expression.to_string(),
        }
    }

    /// A timestamp parameter (`timestamp_value`) as the column's value.
    pub fn timestamp_in(self) -> &'static str {
        match self {
            Dialect::Postgres => "?::text::timestamp",
            Dialect::Mariadb | Dialect::Sqlite => "?",
        }
    }

    pub fn timestamp_value(self, micros: i64) -> Value {
        match self {
            Dialect::Postgres | Dialect::Mariadb => Value::Text(timestamp_text(micros)),
            Dialect::Sqlite => Value::Int(micros),
        }
    }

    /// A value of a money column for loading.
    fn money_value(self, cents: i64) -> Value {
        match self {
            Dialect::Postgres | Dialect::Mariadb => Value::Text(scaled_text(cents, 100)),
            Dialect::Sqlite => Value::Int(cents),
        }
    }

    fn rate_value(self, ten_thousandths: i64) -> Value {
        match self {
            Dialect::Postgres | Dialect::Mariadb => {
                Value::Text(scaled_text(ten_thousandths, 10_000))
            }
            Dialect::Sqlite => Value::Int(ten_thousandths),
        }
    }

    pub fn for_update(self) -> &'static str {
        match self {
            Dialect::Postgres | Dialect::Mariadb => " FOR UPDATE",
            // SQLite locks the whole database: writers begin with BEGIN IMMEDIATE.
            Dialect::Sqlite => "",
        }
    }

    /// `?` placeholders as the dialect numbers them (`$1`, `$2`... in PostgreSQL).
    pub fn placeholders(self, text: &str) -> String {
        if self != Dialect::Postgres {
            return text.to_string();
        }
        let mut numbered = String::with_capacity(text.len() + 16);
        let mut number = 0;
        for character in text.chars() {
            if character == '?' {
                number += 1;
                numbered.push_str(&format!("${number}"));
            } else {
                numbered.push(character);
            }
        }
        numbered
    }
}

/// `value / scale` as exact decimal text: 12345 cents -> "123.45", -5 -> "-0.05".
pub(crate) fn scaled_text(value: i64, scale: u64) -> String {
    let sign = if value < 0 { "-" } else { "" };
    let digits = scale.ilog10() as usize;
    let magnitude = value.unsigned_abs();
    format!("{sign}{}.{:0digits$}", magnitude / scale, magnitude % scale)
}

/// Microseconds since the epoch as "YYYY-MM-DD HH:MM:SS.ffffff" (UTC, no zone), the literal
/// both `timestamp` and `datetime(6)` read exactly.
pub(crate) fn timestamp_text(micros: i64) -> String {
    let seconds = micros.div_euclid(1_000_000);
    let fraction = micros.rem_euclid(1_000_000);
    let (year, month, day) = civil_from_days(seconds.div_euclid(86_400));
    let second_of_day = seconds.rem_euclid(86_400);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}.{fraction:06}",
        second_of_day / 3600,
        second_of_day / 60 % 60,
        second_of_day % 60
    )
}

/// The proleptic Gregorian date of a day number since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The statements creating the nine tables (dropping old ones first). With `keys` the
/// primary keys and secondary indexes are part of it; without, `key_statements` adds them
/// after loading (faster for PostgreSQL's COPY).
pub(crate) fn create_table_statements(dialect: Dialect, keys: bool) -> Vec<String> {
    let mut statements = Vec::new();
    for table in TABLES {
        statements.push(format!("DROP TABLE IF EXISTS {}", table.name));
        let mut columns: Vec<String> = table
            .columns
            .iter()
            .map(|(name, kind)| format!("{name} {}", dialect.column_type(*kind)))
            .collect();
        if keys && !table.primary_key.is_empty() {
            columns.push(format!("PRIMARY KEY ({})", table.primary_key.join(", ")));
        }
        let suffix = match dialect {
            Dialect::Mariadb => " ENGINE=InnoDB",
            // Tables clustered on their key, like InnoDB's (HISTORY keeps its rowid).
            Dialect::Sqlite if !table.primary_key.is_empty() && keys => " WITHOUT ROWID",
            _ => "",
        };
        statements.push(format!(
            "CREATE TABLE {} ({}){suffix}",
            table.name,
            columns.join(", ")
        ));
    }
    if keys {
        statements.extend(secondary_index_statements());
    }
    statements
}

/// Primary keys and secondary indexes, for tables created without them.
pub(crate) fn key_statements() -> Vec<String> {
    let mut statements: Vec<String> = TABLES
        .iter()
        .filter(|table| !table.primary_key.is_empty())
        .map(|table| {
            format!(
                "ALTER TABLE {} ADD PRIMARY KEY ({})",
                table.name,
                table.primary_key.join(", ")
            )
        })
        .collect();
    statements.extend(secondary_index_statements());
    statements
}

fn secondary_index_statements() -> impl Iterator<Item = String> {
    SECONDARY_INDEXES
        .iter()
        .map(|(name, table, columns)| format!("CREATE INDEX {name} ON {table} ({columns})"))
}

/// A value going to or coming from a peer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Int(i64),
    Text(String),
    /// A value of a type the transactions read but do not use (a peer's date type).
    Other,
}

impl Value {
    pub fn id(id: u32) -> Value {
        Value::Int(id as i64)
    }
}

/// Values of the columns of `table` for one row of the initial database, in column order.
pub(crate) fn row_values(row: Row, dialect: Dialect) -> (&'static TableSpec, Vec<Value>) {
    let money = |cents| dialect.money_value(cents);
    let rate = |value| dialect.rate_value(value);
    let timestamp = |micros| dialect.timestamp_value(micros);
    let address = |address: Address| {
        [
            address.street_1,
            address.street_2,
            address.city,
            address.state,
            address.zip,
        ]
        .map(Value::Text)
    };
    match row {
        Row::Item(item) => (
            &ITEM,
            vec![
                Value::id(item.i_id),
                Value::id(item.im_id),
                Value::Text(item.name),
                money(item.price),
                Value::Text(item.data),
            ],
        ),
        Row::Warehouse(warehouse) => {
            let mut values = vec![Value::id(warehouse.w_id), Value::Text(warehouse.name)];
            values.extend(address(warehouse.address));
            values.extend([rate(warehouse.tax), money(warehouse.ytd)]);
            (&WAREHOUSE, values)
        }
        Row::District(district) => {
            let mut values = vec![
                Value::id(district.d_id),
                Value::id(district.w_id),
                Value::Text(district.name),
            ];
            values.extend(address(district.address));
            values.extend([
                rate(district.tax),
                money(district.ytd),
                Value::id(district.next_o_id),
            ]);
            (&DISTRICT, values)
        }
        Row::Customer(customer) => {
            let mut values = vec![
                Value::id(customer.c_id),
                Value::id(customer.d_id),
                Value::id(customer.w_id),
                Value::Text(customer.first),
                Value::Text(customer.middle),
                Value::Text(customer.last),
            ];
            values.extend(address(customer.address));
            values.extend([
                Value::Text(customer.phone),
                timestamp(customer.since),
                Value::Text(customer.credit),
                money(customer.credit_lim),
                rate(customer.discount),
                money(customer.balance),
                money(customer.ytd_payment),
                Value::id(customer.payment_cnt),
                Value::id(customer.delivery_cnt),
                Value::Text(customer.data),
            ]);
            (&CUSTOMER, values)
        }
        Row::History(history) => (
            &HISTORY,
            vec![
                Value::id(history.c_id),
                Value::id(history.c_d_id),
                Value::id(history.c_w_id),
                Value::id(history.d_id),
                Value::id(history.w_id),
                timestamp(history.date),
                money(history.amount),
                Value::Text(history.data),
            ],
        ),
        Row::Order(order) => (
            &ORDERS,
            vec![
                Value::id(order.o_id),
                Value::id(order.d_id),
                Value::id(order.w_id),
                Value::id(order.c_id),
                timestamp(order.entry_d),
                order.carrier_id.map_or(Value::Null, Value::id),
                Value::id(order.ol_cnt),
                Value::Int(order.all_local as i64),
            ],
        ),
        Row::NewOrder(new_order) => (
            &NEW_ORDER,
            vec![
                Value::id(new_order.o_id),
                Value::id(new_order.d_id),
                Value::id(new_order.w_id),
            ],
        ),
        Row::OrderLine(line) => (
            &ORDER_LINE,
            vec![
                Value::id(line.o_id),
                Value::id(line.d_id),
                Value::id(line.w_id),
                Value::id(line.number),
                Value::id(line.i_id),
                Value::id(line.supply_w_id),
                line.delivery_d.map_or(Value::Null, timestamp),
                Value::id(line.quantity),
                money(line.amount),
                Value::Text(line.dist_info),
            ],
        ),
        Row::Stock(stock) => {
            let mut values = vec![
                Value::id(stock.i_id),
                Value::id(stock.w_id),
                Value::Int(stock.quantity as i64),
            ];
            values.extend(stock.dist.map(Value::Text));
            values.extend([
                Value::Int(stock.ytd),
                Value::id(stock.order_cnt),
                Value::id(stock.remote_cnt),
                Value::Text(stock.data),
            ]);
            (&STOCK, values)
        }
    }
}

/// One job of the initial load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LoadJob {
    Items,
    Warehouse(u32),
}

/// Runs ITEM and every warehouse as jobs on up to `LOAD_THREADS_MAX` threads (each job on its
/// own connection, made by `load`), reporting the rows `load` adds to its counter from the
/// calling thread. The first error stops the other threads after their current job.
pub(crate) fn load_in_parallel(
    scale: &Scale,
    progress: &(dyn Fn(u64) + Sync),
    load: &(dyn Fn(LoadJob, &AtomicU64) -> DriverResult<()> + Sync),
) -> DriverResult<()> {
    let jobs: Vec<LoadJob> = std::iter::once(LoadJob::Items)
        .chain((1..=scale.warehouses).map(LoadJob::Warehouse))
        .collect();
    let cores = thread::available_parallelism().map_or(1, |cores| cores.get());
    let threads = (cores + 1).min(LOAD_THREADS_MAX).min(jobs.len());
    let next_job = AtomicU32::new(0);
    let loaded = AtomicU64::new(0);
    thread::scope(|scope| {
        let loaders: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| loop {
                    let index = next_job.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(&job) = jobs.get(index) else {
                        return Ok(());
                    };
                    if let Err(error) = load(job, &loaded) {
                        next_job.store(jobs.len() as u32, Ordering::Relaxed);
                        return Err(error);
                    }
                })
            })
            .collect();
        while !loaders.iter().all(|loader| loader.is_finished()) {
            progress(loaded.load(Ordering::Relaxed));
            thread::sleep(Duration::from_millis(100));
        }
        progress(loaded.load(Ordering::Relaxed));
        for loader in loaders {
            loader
                .join()
                .unwrap_or_else(|_| Err(DriverError::fatal("a TPC-C loader thread panicked")))?;
        }
        Ok(())
    })
}

/// Rows of a job, in the generator's order.
pub(crate) fn generate_job(
    job: LoadJob,
    scale: &Scale,
    seed: u64,
    now: i64,
    sink: &mut crate::tpcc::rows::RowSink<'_>,
) -> DriverResult<()> {
    match job {
        LoadJob::Items => crate::tpcc::rows::generate_items(scale, seed, sink),
        LoadJob::Warehouse(w_id) => {
            crate::tpcc::rows::generate_warehouse(scale, w_id, seed, now, sink)
        }
    }
}
