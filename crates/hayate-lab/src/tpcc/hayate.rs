//! TPC-C on Hayate's embedded API: the nine tables and two secondary indexes as B+trees, row
//! codecs, the loader, the five transactions (run on fibers, `crate::fibers`), and the reader
//! for the checker.
//!
//! Trees (keys are big-endian ids, so key order is id order):
//! - `tpcc_warehouse` (w), `tpcc_district` (w, d), `tpcc_customer` (w, d, c),
//!   `tpcc_item` (i), `tpcc_stock` (w, i), `tpcc_orders` (w, d, o), `tpcc_new_order` (w, d, o),
//!   `tpcc_order_line` (w, d, o, number), `tpcc_history` (w, d, unique number);
//! - indexes the transactions maintain: `tpcc_customer_name` (w, d, last, first, c) for the
//!   lookups by last name, and `tpcc_orders_customer` (w, d, c, o) for a customer's last order.
//!
//! Values hold the whole row (ids included) in a compact binary form (`Encoder`/`Decoder`).
//!
//! Locking: rows read and then written are read with `Transaction::lock_latest` (a
//! locking read of the newest version, as SELECT ... FOR UPDATE), so concurrent Payments of
//! one warehouse queue on its row instead of failing; stock rows are taken in (warehouse,
//! item) order so New-Orders cannot deadlock on them.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use hayate_engine::PhaseReport;
use hayate_engine::{Database, Transaction, TreeId};

use crate::driver::{DriverError, DriverResult};
use crate::tpcc::check::CheckData;
use crate::tpcc::deferred::{defer, executors_for, run_executor, DeliveryQueue};
use crate::tpcc::metrics::{record_output, TpccJob, TpccOutcome};
use crate::tpcc::rows::{
    generate_items, generate_warehouse, Address, Customer, District, History, Item, NewOrder,
    Order, OrderLine, Row, Stock, Warehouse,
};
use crate::tpcc::spec::{now_micros, Scale};
use crate::tpcc::txn::{
    CustomerSelector, DeliveryInput, NewOrderInput, NewOrderOutcome, OrderStatusInput,
    PaymentInput, StockLevelInput, Terminal, TpccSession, TxnInput, TxnOutput,
};

/// Rows per load transaction.
const LOAD_BATCH_ROWS: usize = 1_000;

/// Undelivered orders of a district a Delivery tries, oldest first, before it gives up on it.
const DELIVERY_CANDIDATES: usize = 16;

pub const TREE_NAMES: [&str; 11] = [
    "tpcc_warehouse",
    "tpcc_district",
    "tpcc_customer",
    "tpcc_customer_name",
    "tpcc_history",
    "tpcc_orders",
    "tpcc_orders_customer",
    "tpcc_new_order",
    "tpcc_order_line",
    "tpcc_item",
    "tpcc_stock",
];

/// The trees of a TPC-C database.
#[derive(Debug, Clone, Copy)]
pub struct Trees {
    pub warehouse: TreeId,
    pub district: TreeId,
    pub customer: TreeId,
    pub customer_name: TreeId,
    pub history: TreeId,
    pub orders: TreeId,
    pub orders_customer: TreeId,
    pub new_order: TreeId,
    pub order_line: TreeId,
    pub item: TreeId,
    pub stock: TreeId,
}

impl Trees {
    fn from_ids(ids: &[TreeId]) -> Trees {
        Trees {
            warehouse: ids[0],
            district: ids[1],
            customer: ids[2],
            customer_name: ids[3],
            history: ids[4],
            orders: ids[5],
            orders_customer: ids[6],
            new_order: ids[7],
            order_line: ids[8],
            item: ids[9],
            stock: ids[10],
        }
    }

    /// The trees of `db`, or None when it holds no TPC-C database.
    pub fn find(db: &Database) -> Option<Trees> {
        let ids = TREE_NAMES
            .iter()
            .map(|name| db.table(name).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(Trees::from_ids(&ids))
    }

    fn create(db: &Database) -> DriverResult<Trees> {
        let ids = TREE_NAMES
            .iter()
            .map(|name| db.create_table(name))
            .collect::<hayate_engine::Result<Vec<_>>>()?;
        Ok(Trees::from_ids(&ids))
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and values

/// A key of big-endian ids.
fn key(ids: &[u32]) -> Vec<u8> {
    ids.iter().flat_map(|id| id.to_be_bytes()).collect()
}

/// The customer-name index key: (w, d, last, 0, first, 0, c). Names are alphanumeric, so the
/// zero terminators keep the order of (last, first).
fn customer_name_key(w_id: u32, d_id: u32, last: &str, first: &str, c_id: u32) -> Vec<u8> {
    let mut bytes = customer_name_prefix(w_id, d_id, last);
    bytes.extend_from_slice(first.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(&c_id.to_be_bytes());
    bytes
}

fn customer_name_prefix(w_id: u32, d_id: u32, last: &str) -> Vec<u8> {
    let mut bytes = key(&[w_id, d_id]);
    bytes.extend_from_slice(last.as_bytes());
    bytes.push(0);
    bytes
}

/// The exclusive end of the keys starting with `prefix`.
fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xff; prefix.len() + 1]
}

/// A compact binary row: fixed-width integers little-endian, strings length-prefixed. Each
/// method writes one field kind; `Decoder` has a method of the same name reading it back.
#[derive(Default)]
struct Encoder(Vec<u8>);

impl Encoder {
    fn u32(&mut self, value: &u32) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn i64(&mut self, value: &i64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    /// An `i32` (S_QUANTITY) in 8 bytes.
    fn wide_i32(&mut self, value: &i32) {
        self.i64(&(*value as i64));
    }
    fn flag(&mut self, value: &bool) {
        self.u32(&u32::from(*value));
    }
    /// Null is `u32::MAX`.
    fn opt_u32(&mut self, value: &Option<u32>) {
        self.u32(&value.unwrap_or(u32::MAX));
    }
    /// Null is `i64::MIN`.
    fn opt_i64(&mut self, value: &Option<i64>) {
        self.i64(&value.unwrap_or(i64::MIN));
    }
    fn text(&mut self, value: &str) {
        self.0
            .extend_from_slice(&(value.len() as u16).to_le_bytes());
        self.0.extend_from_slice(value.as_bytes());
    }
    fn address(&mut self, address: &Address) {
        for part in [
            &address.street_1,
            &address.street_2,
            &address.city,
            &address.state,
            &address.zip,
        ] {
            self.text(part);
        }
    }
    fn dist(&mut self, dist: &[String; 10]) {
        dist.iter().for_each(|value| self.text(value));
    }
}

struct Decoder<'a> {
    bytes: &'a [u8],
    table: &'static str,
}

impl<'a> Decoder<'a> {
    fn new(bytes: &'a [u8], table: &'static str) -> Decoder<'a> {
        Decoder { bytes, table }
    }
    fn take(&mut self, length: usize) -> DriverResult<&'a [u8]> {
        if self.bytes.len() < length {
            return Err(DriverError::fatal(format!(
                "a {} row is truncated",
                self.table
            )));
        }
        let (head, rest) = self.bytes.split_at(length);
        self.bytes = rest;
        Ok(head)
    }
    fn u32(&mut self) -> DriverResult<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    fn i64(&mut self) -> DriverResult<i64> {
        Ok(i64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    fn wide_i32(&mut self) -> DriverResult<i32> {
        Ok(self.i64()? as i32)
    }
    fn flag(&mut self) -> DriverResult<bool> {
        Ok(self.u32()? != 0)
    }
    fn opt_u32(&mut self) -> DriverResult<Option<u32>> {
        Ok(Some(self.u32()?).filter(|value| *value != u32::MAX))
    }
    fn opt_i64(&mut self) -> DriverResult<Option<i64>> {
        Ok(Some(self.i64()?).filter(|value| *value != i64::MIN))
    }
    fn text(&mut self) -> DriverResult<String> {
        let length = u16::from_le_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize;
        let bytes = self.take(length)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| DriverError::fatal(format!("a {} row holds invalid text", self.table)))
    }
    fn address(&mut self) -> DriverResult<Address> {
        Ok(Address {
            street_1: self.text()?,
            street_2: self.text()?,
            city: self.text()?,
            state: self.text()?,
            zip: self.text()?,
        })
    }
    fn dist(&mut self) -> DriverResult<[String; 10]> {
        let mut dist: [String; 10] = Default::default();
        for slot in &mut dist {
            *slot = self.text()?;
        }
        Ok(dist)
    }
}

/// The codec of a row type: `encode(row) -> Vec<u8>` and `decode(bytes) -> row`, from its
/// fields in stored order, each with its kind (a method of `Encoder` and of `Decoder`).
macro_rules! row_codec {
    ($encode:ident, $decode:ident, $row:ident, $table:literal,
     { $($field:ident: $kind:ident),* $(,)? }) => {
        fn $encode(row: &$row) -> Vec<u8> {
            let mut encoder = Encoder::default();
            $(encoder.$kind(&row.$field);)*
            encoder.0
        }

        fn $decode(bytes: &[u8]) -> DriverResult<$row> {
            let mut decoder = Decoder::new(bytes, $table);
            Ok($row { $($field: decoder.$kind()?,)* })
        }
    };
}

row_codec!(encode_warehouse, decode_warehouse, Warehouse, "warehouse", {
    w_id: u32, name: text, address: address, tax: i64, ytd: i64,
});
row_codec!(encode_district, decode_district, District, "district", {
    w_id: u32, d_id: u32, name: text, address: address, tax: i64, ytd: i64, next_o_id: u32,
});
row_codec!(encode_customer, decode_customer, Customer, "customer", {
    w_id: u32, d_id: u32, c_id: u32, first: text, middle: text, last: text, address: address,
    phone: text, since: i64, credit: text, credit_lim: i64, discount: i64, balance: i64,
    ytd_payment: i64, payment_cnt: u32, delivery_cnt: u32, data: text,
});
row_codec!(encode_history, decode_history, History, "history", {
    c_id: u32, c_d_id: u32, c_w_id: u32, d_id: u32, w_id: u32, date: i64, amount: i64,
    data: text,
});
row_codec!(encode_order, decode_order, Order, "orders", {
    w_id: u32, d_id: u32, o_id: u32, c_id: u32, entry_d: i64, carrier_id: opt_u32,
    ol_cnt: u32, all_local: flag,
});
row_codec!(encode_order_line, decode_order_line, OrderLine, "order_line", {
    w_id: u32, d_id: u32, o_id: u32, number: u32, i_id: u32, supply_w_id: u32,
    delivery_d: opt_i64, quantity: u32, amount: i64, dist_info: text,
});
row_codec!(encode_item, decode_item, Item, "item", {
    i_id: u32, im_id: u32, name: text, price: i64, data: text,
});
row_codec!(encode_stock, decode_stock, Stock, "stock", {
    w_id: u32, i_id: u32, quantity: wide_i32, dist: dist, ytd: i64, order_cnt: u32,
    remote_cnt: u32, data: text,
});
row_codec!(encode_new_order, decode_new_order, NewOrder, "new_order", {
    w_id: u32, d_id: u32, o_id: u32,
});

/// The key and value of a row, and of the index entries that go with it.
fn row_entries(trees: &Trees, row: &Row, history_number: u64) -> Vec<(TreeId, Vec<u8>, Vec<u8>)> {
    match row {
        Row::Item(row) => vec![(trees.item, key(&[row.i_id]), encode_item(row))],
        Row::Warehouse(row) => vec![(trees.warehouse, key(&[row.w_id]), encode_warehouse(row))],
        Row::Stock(row) => vec![(trees.stock, key(&[row.w_id, row.i_id]), encode_stock(row))],
        Row::District(row) => vec![(
            trees.district,
            key(&[row.w_id, row.d_id]),
            encode_district(row),
        )],
        Row::Customer(row) => vec![
            (
                trees.customer,
                key(&[row.w_id, row.d_id, row.c_id]),
                encode_customer(row),
            ),
            (
                trees.customer_name,
                customer_name_key(row.w_id, row.d_id, &row.last, &row.first, row.c_id),
                row.c_id.to_be_bytes().to_vec(),
            ),
        ],
        Row::History(row) => vec![(
            trees.history,
            history_key(row.w_id, row.d_id, history_number),
            encode_history(row),
        )],
        Row::Order(row) => vec![
            (
                trees.orders,
                key(&[row.w_id, row.d_id, row.o_id]),
                encode_order(row),
            ),
            (
                trees.orders_customer,
                key(&[row.w_id, row.d_id, row.c_id, row.o_id]),
                row.o_id.to_be_bytes().to_vec(),
            ),
        ],
        Row::NewOrder(row) => vec![(
            trees.new_order,
            key(&[row.w_id, row.d_id, row.o_id]),
            encode_new_order(row),
        )],
        Row::OrderLine(row) => vec![(
            trees.order_line,
            key(&[row.w_id, row.d_id, row.o_id, row.number]),
            encode_order_line(row),
        )],
    }
}

/// The number of a run-time HISTORY row: from 2^63 up (never a load's, which are customer
/// ids), increasing (so inserts append at the right edge of each district's range, whose leaf
/// is resident, instead of landing on a random leaf the commit would read synchronously),
/// and unique across restarts (microseconds since the epoch, shifted, when first used).
fn next_history_number() -> u64 {
    static NEXT: std::sync::OnceLock<AtomicU64> = std::sync::OnceLock::new();
    let next = NEXT.get_or_init(|| AtomicU64::new((1u64 << 63) | (now_micros() as u64) << 10));
    next.fetch_add(1, Ordering::Relaxed)
}

fn history_key(w_id: u32, d_id: u32, number: u64) -> Vec<u8> {
    let mut bytes = key(&[w_id, d_id]);
    bytes.extend_from_slice(&number.to_be_bytes());
    bytes
}

// ---------------------------------------------------------------------------------------------
// Loading and reading back

/// Creates the trees and loads the initial database: ITEM on one thread while the others load
/// warehouses, `threads` threads in all.
pub fn load(
    db: &Database,
    scale: &Scale,
    seed: u64,
    threads: u32,
    progress: &(dyn Fn(u64) + Sync),
) -> DriverResult<Trees> {
    if Trees::find(db).is_some() {
        return Err(DriverError::fatal(
            "the database holds a TPC-C database already",
        ));
    }
    let trees = Trees::create(db)?;
    let loaded = AtomicU64::new(0);
    let next_warehouse = AtomicU64::new(0);
    let now = now_micros();
    let threads = threads.max(1);
    let results: Vec<DriverResult<()>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (loaded, next_warehouse, trees) = (&loaded, &next_warehouse, &trees);
                scope.spawn(move || -> DriverResult<()> {
                    let mut batch = LoadBatch::new(db, trees, loaded, progress);
                    if thread == 0 {
                        generate_items(scale, seed, &mut |row| batch.add(&row))?;
                    }
                    loop {
                        let w_id = next_warehouse.fetch_add(1, Ordering::Relaxed) as u32 + 1;
                        if w_id > scale.warehouses {
                            break;
                        }
                        generate_warehouse(scale, w_id, seed, now, &mut |row| batch.add(&row))?;
                    }
                    batch.flush()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(DriverError::fatal("a load thread panicked")))
            })
            .collect()
    });
    results.into_iter().collect::<DriverResult<()>>()?;
    Ok(trees)
}

/// Rows of a load, committed `LOAD_BATCH_ROWS` at a time.
struct LoadBatch<'a> {
    db: &'a Database,
    trees: &'a Trees,
    txn: Option<Transaction>,
    rows: usize,
    loaded: &'a AtomicU64,
    progress: &'a (dyn Fn(u64) + Sync),
}

impl<'a> LoadBatch<'a> {
    fn new(
        db: &'a Database,
        trees: &'a Trees,
        loaded: &'a AtomicU64,
        progress: &'a (dyn Fn(u64) + Sync),
    ) -> LoadBatch<'a> {
        LoadBatch {
            db,
            trees,
            txn: None,
            rows: 0,
            loaded,
            progress,
        }
    }

    fn add(&mut self, row: &Row) -> DriverResult<()> {
        // Initial history rows are numbered by customer: (w, d, c) never repeats.
        let number = match row {
            Row::History(history) => history.c_id as u64,
            _ => 0,
        };
        let txn = self.txn.get_or_insert_with(|| self.db.begin());
        for (tree, key, value) in row_entries(self.trees, row, number) {
            txn.insert(tree, &key, &value)?;
        }
        self.rows += 1;
        if self.rows >= LOAD_BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> DriverResult<()> {
        if let Some(txn) = self.txn.take() {
            txn.commit()?;
        }
        let rows = std::mem::take(&mut self.rows) as u64;
        (self.progress)(self.loaded.fetch_add(rows, Ordering::Relaxed) + rows);
        Ok(())
    }
}

/// Reads the columns of the consistency conditions from one snapshot.
pub fn check_data(db: &Database, trees: &Trees) -> DriverResult<CheckData> {
    let txn = db.begin_read_only();
    let mut data = CheckData::default();
    type Decode = fn(&[u8]) -> DriverResult<Row>;
    let tables: [(TreeId, Decode); 7] = [
        (trees.warehouse, |bytes| {
            decode_warehouse(bytes).map(Row::Warehouse)
        }),
        (trees.district, |bytes| {
            decode_district(bytes).map(Row::District)
        }),
        (trees.customer, |bytes| {
            decode_customer(bytes).map(Row::Customer)
        }),
        (trees.history, |bytes| {
            decode_history(bytes).map(Row::History)
        }),
        (trees.orders, |bytes| decode_order(bytes).map(Row::Order)),
        (trees.new_order, |bytes| {
            decode_new_order(bytes).map(Row::NewOrder)
        }),
        (trees.order_line, |bytes| {
            decode_order_line(bytes).map(Row::OrderLine)
        }),
    ];
    for (tree, decode) in tables {
        let mut scan = txn.scan(tree, Bound::Unbounded, Bound::Unbounded)?;
        while let Some((_, value)) = scan.next_row()? {
            data.add(&decode(&value)?);
        }
    }
    txn.commit()?;
    Ok(data)
}

// ---------------------------------------------------------------------------------------------
// The transactions

fn missing(what: String) -> DriverError {
    DriverError::fatal(format!("{what} is missing"))
}

/// Runs one transaction. On a fiber, page misses, lock waits and the wait for the log suspend
/// it and its commit shares a log flush with the other commits in flight.
pub fn run(db: &Database, trees: &Trees, input: &TxnInput) -> DriverResult<TxnOutput> {
    Ok(match input {
        TxnInput::NewOrder(input) => TxnOutput::NewOrder(new_order(db, trees, input)?),
        TxnInput::Payment(input) => TxnOutput::Payment {
            c_id: payment(db, trees, input)?,
        },
        TxnInput::OrderStatus(input) => TxnOutput::OrderStatus {
            lines: order_status(db, trees, input)?,
        },
        TxnInput::Delivery(input) => TxnOutput::Delivery {
            delivered: delivery(db, trees, input)?,
        },
        TxnInput::StockLevel(input) => TxnOutput::StockLevel {
            low_stock: stock_level(db, trees, input)?,
        },
    })
}

/// Clause 2.4.2.
fn new_order(db: &Database, trees: &Trees, input: &NewOrderInput) -> DriverResult<NewOrderOutcome> {
    let (w_id, d_id) = (input.w_id, input.d_id);
    let mut txn = db.begin();
    let warehouse_key = key(&[w_id]);
    let warehouse = txn.get(trees.warehouse, &warehouse_key)?;
    let warehouse =
        decode_warehouse(&warehouse.ok_or_else(|| missing(format!("warehouse {w_id}")))?)?;
    let customer_key = key(&[w_id, d_id, input.c_id]);
    let customer = txn.get(trees.customer, &customer_key)?;
    let customer = decode_customer(
        &customer.ok_or_else(|| missing(format!("customer {w_id}/{d_id}/{}", input.c_id)))?,
    )?;
    // Every item and stock page the order needs, loaded in one batch (not one per line).
    let wanted: Vec<(TreeId, Vec<u8>)> = (input.items.iter())
        .flat_map(|line| {
            [
                (trees.item, key(&[line.i_id])),
                (trees.stock, key(&[line.supply_w_id, line.i_id])),
            ]
        })
        .collect();
    txn.prefetch(&wanted)?;
    let mut items = Vec::with_capacity(input.items.len());
    for line in &input.items {
        match txn.get(trees.item, &key(&[line.i_id]))? {
            Some(item) => items.push(decode_item(&item)?),
            None => {
                // The unused item: the whole order rolls back (clause 2.4.2.3).
                txn.abort();
                return Ok(NewOrderOutcome::RolledBack);
            }
        }
    }
    // Stock rows in (warehouse, item) order: New-Orders never wait on each other in a cycle.
    let mut order: Vec<usize> = (0..input.items.len()).collect();
    order.sort_by_key(|&index| (input.items[index].supply_w_id, input.items[index].i_id));
    let mut amounts = vec![0i64; input.items.len()];
    let mut dist_infos = vec![String::new(); input.items.len()];
    for index in order {
        let line = &input.items[index];
        let stock_key = key(&[line.supply_w_id, line.i_id]);
        let stock = txn.lock_latest(trees.stock, &stock_key)?;
        let mut stock = decode_stock(
            &stock.ok_or_else(|| missing(format!("stock {}/{}", line.supply_w_id, line.i_id)))?,
        )?;
        let quantity = line.quantity as i32;
        stock.quantity = if stock.quantity >= quantity + 10 {
            stock.quantity - quantity
        } else {
            stock.quantity - quantity + 91
        };
        stock.ytd += line.quantity as i64;
        stock.order_cnt += 1;
        if line.supply_w_id != w_id {
            stock.remote_cnt += 1;
        }
        dist_infos[index] = stock.dist[(d_id - 1) as usize].clone();
        txn.put(trees.stock, &stock_key, &encode_stock(&stock))?;
        amounts[index] = line.quantity as i64 * items[index].price;
    }
    // The district's next order id last: its lock (the hottest of a New-Order) is then held
    // only from here to the commit's append (early lock release), not over the stock updates.
    let district_key = key(&[w_id, d_id]);
    let district = txn.lock_latest(trees.district, &district_key)?;
    let mut district =
        decode_district(&district.ok_or_else(|| missing(format!("district {w_id}/{d_id}")))?)?;
    let o_id = district.next_o_id;
    district.next_o_id += 1;
    txn.put(trees.district, &district_key, &encode_district(&district))?;
    // The total the terminal would display (clause 2.4.2.2): computed as the spec says.
    let subtotal: i64 = amounts.iter().sum();
    let _total = subtotal * (10_000 - customer.discount) / 10_000
        * (10_000 + warehouse.tax + district.tax)
        / 10_000;
    let order = Order {
        w_id,
        d_id,
        o_id,
        c_id: input.c_id,
        entry_d: input.entry_d,
        carrier_id: None,
        ol_cnt: input.items.len() as u32,
        all_local: input.all_local(),
    };
    let mut rows = vec![
        Row::Order(order),
        Row::NewOrder(NewOrder { w_id, d_id, o_id }),
    ];
    for (index, line) in input.items.iter().enumerate() {
        rows.push(Row::OrderLine(OrderLine {
            w_id,
            d_id,
            o_id,
            number: index as u32 + 1,
            i_id: line.i_id,
            supply_w_id: line.supply_w_id,
            delivery_d: None,
            quantity: line.quantity,
            amount: amounts[index],
            dist_info: std::mem::take(&mut dist_infos[index]),
        }));
    }
    for row in &rows {
        for (tree, key, value) in row_entries(trees, row, 0) {
            txn.put(tree, &key, &value)?;
        }
    }
    crate::fibers::commit(db, txn)?;
    Ok(NewOrderOutcome::Committed { o_id })
}

/// The customer a selector names (clause 2.5.2.2): by id, or the one at position ceil(n/2)
/// of those with the last name, by first name.
fn find_customer(
    txn: &Transaction,
    trees: &Trees,
    w_id: u32,
    d_id: u32,
    selector: &CustomerSelector,
) -> DriverResult<u32> {
    let last = match selector {
        CustomerSelector::ById(c_id) => return Ok(*c_id),
        CustomerSelector::ByLastName(last) => last,
    };
    let prefix = customer_name_prefix(w_id, d_id, last);
    let end = prefix_end(&prefix);
    let mut ids = Vec::new();
    let mut scan = txn.scan(
        trees.customer_name,
        Bound::Included(&prefix),
        Bound::Excluded(&end),
    )?;
    while let Some((_, value)) = scan.next_row()? {
        let bytes: [u8; 4] = value
            .as_slice()
            .try_into()
            .map_err(|_| DriverError::fatal("a customer name entry is damaged"))?;
        ids.push(u32::from_be_bytes(bytes));
    }
    if ids.is_empty() {
        return Err(missing(format!("a customer named {last} in {w_id}/{d_id}")));
    }
    Ok(ids[(ids.len() - 1) / 2])
}

/// Clause 2.5.2.
fn payment(db: &Database, trees: &Trees, input: &PaymentInput) -> DriverResult<u32> {
    let mut txn = db.begin();
    // Customer first, warehouse last: the warehouse's row, which every Payment of the
    // warehouse updates, is then locked only from its update to the commit's append.
    let c_id = find_customer(&txn, trees, input.c_w_id, input.c_d_id, &input.customer)?;
    let customer_key = key(&[input.c_w_id, input.c_d_id, c_id]);
    let customer = txn.lock_latest(trees.customer, &customer_key)?;
    let mut customer =
        decode_customer(&customer.ok_or_else(|| {
            missing(format!("customer {}/{}/{c_id}", input.c_w_id, input.c_d_id))
        })?)?;
    customer.balance -= input.amount;
    customer.ytd_payment += input.amount;
    customer.payment_cnt += 1;
    if customer.credit == "BC" {
        let mut data = format!(
            "{} {} {} {} {} {}|{}",
            c_id, input.c_d_id, input.c_w_id, input.d_id, input.w_id, input.amount, customer.data
        );
        data.truncate(500);
        customer.data = data;
    }
    txn.put(trees.customer, &customer_key, &encode_customer(&customer))?;
    let district_key = key(&[input.w_id, input.d_id]);
    let district = txn.lock_latest(trees.district, &district_key)?;
    let mut district = decode_district(
        &district.ok_or_else(|| missing(format!("district {}/{}", input.w_id, input.d_id)))?,
    )?;
    district.ytd += input.amount;
    txn.put(trees.district, &district_key, &encode_district(&district))?;
    let warehouse_key = key(&[input.w_id]);
    let warehouse = txn.lock_latest(trees.warehouse, &warehouse_key)?;
    let mut warehouse =
        decode_warehouse(&warehouse.ok_or_else(|| missing(format!("warehouse {}", input.w_id)))?)?;
    warehouse.ytd += input.amount;
    txn.put(
        trees.warehouse,
        &warehouse_key,
        &encode_warehouse(&warehouse),
    )?;
    let history = History {
        c_id,
        c_d_id: input.c_d_id,
        c_w_id: input.c_w_id,
        d_id: input.d_id,
        w_id: input.w_id,
        date: input.date,
        amount: input.amount,
        data: format!("{}    {}", warehouse.name, district.name),
    };
    let number = next_history_number();
    txn.insert(
        trees.history,
        &history_key(input.w_id, input.d_id, number),
        &encode_history(&history),
    )?;
    crate::fibers::commit(db, txn)?;
    Ok(c_id)
}

/// Clause 2.6.2 (read-only).
fn order_status(db: &Database, trees: &Trees, input: &OrderStatusInput) -> DriverResult<u32> {
    let (w_id, d_id) = (input.w_id, input.d_id);
    let txn = db.begin_read_only();
    let c_id = find_customer(&txn, trees, w_id, d_id, &input.customer)?;
    let customer = txn.get(trees.customer, &key(&[w_id, d_id, c_id]))?;
    decode_customer(&customer.ok_or_else(|| missing(format!("customer {w_id}/{d_id}/{c_id}")))?)?;
    let prefix = key(&[w_id, d_id, c_id]);
    let end = prefix_end(&prefix);
    let mut last_order = None;
    let mut scan = txn.scan(
        trees.orders_customer,
        Bound::Included(&prefix),
        Bound::Excluded(&end),
    )?;
    while let Some((key, _)) = scan.next_row()? {
        last_order = Some(u32::from_be_bytes(key[12..16].try_into().expect("4 bytes")));
    }
    let Some(o_id) = last_order else {
        txn.commit()?;
        return Ok(0);
    };
    let order = txn.get(trees.orders, &key(&[w_id, d_id, o_id]))?;
    decode_order(&order.ok_or_else(|| missing(format!("order {w_id}/{d_id}/{o_id}")))?)?;
    let prefix = key(&[w_id, d_id, o_id]);
    let end = prefix_end(&prefix);
    let mut lines = 0;
    let mut scan = txn.scan(
        trees.order_line,
        Bound::Included(&prefix),
        Bound::Excluded(&end),
    )?;
    while let Some((_, value)) = scan.next_row()? {
        decode_order_line(&value)?;
        lines += 1;
    }
    txn.commit()?;
    Ok(lines)
}

/// Clause 2.7.4: the input's districts (all ten, or one of a deferred Delivery) in one
/// transaction.
fn delivery(db: &Database, trees: &Trees, input: &DeliveryInput) -> DriverResult<u32> {
    let w_id = input.w_id;
    let mut txn = db.begin();
    let mut delivered = 0;
    for d_id in input.districts() {
        let prefix = key(&[w_id, d_id]);
        let end = prefix_end(&prefix);
        // The oldest undelivered order: candidates in order from the snapshot, each taken by
        // a locking read, so that a concurrent Delivery that took it first (and deleted it)
        // sends us to the next one instead of failing. It waits for a Delivery holding it:
        // passing over it (SKIP LOCKED) removes the queue of Deliveries but lets a later
        // order be delivered first, and a crash or rollback of the one holding the older
        // order then leaves a gap (consistency condition 3; the crash test found it).
        let candidates: Vec<Vec<u8>> = txn
            .scan(
                trees.new_order,
                Bound::Included(&prefix),
                Bound::Excluded(&end),
            )?
            .take(DELIVERY_CANDIDATES)
            .map(|row| row.map(|(key, _)| key))
            .collect::<hayate_engine::Result<_>>()?;
        let mut claimed = None;
        for candidate in candidates {
            if let Some(value) = txn.lock_latest(trees.new_order, &candidate)? {
                txn.delete(trees.new_order, &candidate)?;
                claimed = Some(decode_new_order(&value)?.o_id);
                break;
            }
        }
        let Some(o_id) = claimed else {
            continue; // nothing to deliver in this district
        };
        let order_key = key(&[w_id, d_id, o_id]);
        let order = txn.lock_latest(trees.orders, &order_key)?;
        let mut order =
            decode_order(&order.ok_or_else(|| missing(format!("order {w_id}/{d_id}/{o_id}")))?)?;
        order.carrier_id = Some(input.carrier_id);
        txn.put(trees.orders, &order_key, &encode_order(&order))?;
        let lines_end = prefix_end(&order_key);
        let lines: Vec<(Vec<u8>, Vec<u8>)> = txn
            .scan(
                trees.order_line,
                Bound::Included(&order_key),
                Bound::Excluded(&lines_end),
            )?
            .collect::<hayate_engine::Result<_>>()?;
        let mut total = 0;
        for (line_key, value) in lines {
            let mut line = decode_order_line(&value)?;
            line.delivery_d = Some(input.date);
            total += line.amount;
            txn.put(trees.order_line, &line_key, &encode_order_line(&line))?;
        }
        let customer_key = key(&[w_id, d_id, order.c_id]);
        let customer = txn.lock_latest(trees.customer, &customer_key)?;
        let mut customer = decode_customer(
            &customer.ok_or_else(|| missing(format!("customer {w_id}/{d_id}/{}", order.c_id)))?,
        )?;
        customer.balance += total;
        customer.delivery_cnt += 1;
        txn.put(trees.customer, &customer_key, &encode_customer(&customer))?;
        delivered += 1;
    }
    crate::fibers::commit(db, txn)?;
    Ok(delivered)
}

/// Clause 2.8.2 (read-only).
fn stock_level(db: &Database, trees: &Trees, input: &StockLevelInput) -> DriverResult<u32> {
    let (w_id, d_id) = (input.w_id, input.d_id);
    let txn = db.begin_read_only();
    let district = txn.get(trees.district, &key(&[w_id, d_id]))?;
    let district =
        decode_district(&district.ok_or_else(|| missing(format!("district {w_id}/{d_id}")))?)?;
    let next = district.next_o_id;
    let start = key(&[w_id, d_id, next.saturating_sub(20)]);
    let end = key(&[w_id, d_id, next]);
    let mut items = std::collections::BTreeSet::new();
    let mut scan = txn.scan(
        trees.order_line,
        Bound::Included(&start),
        Bound::Excluded(&end),
    )?;
    while let Some((_, value)) = scan.next_row()? {
        items.insert(decode_order_line(&value)?.i_id);
    }
    let wanted: Vec<(TreeId, Vec<u8>)> = (items.iter())
        .map(|i_id| (trees.stock, key(&[w_id, *i_id])))
        .collect();
    txn.prefetch(&wanted)?;
    let mut low = 0;
    for i_id in items {
        let stock = txn.get(trees.stock, &key(&[w_id, i_id]))?;
        let stock = decode_stock(&stock.ok_or_else(|| missing(format!("stock {w_id}/{i_id}")))?)?;
        if stock.quantity < input.threshold {
            low += 1;
        }
    }
    txn.commit()?;
    Ok(low)
}

// ---------------------------------------------------------------------------------------------
// Running

/// What one worker of a native run measured.
pub struct WorkerRun {
    pub outcome: TpccOutcome,
    pub phases: PhaseReport,
    /// Transactions that wrote (for commits per log flush).
    pub writes_committed: u64,
}

/// Runs `job.terminals` terminals as fibers spread over `workers` threads until the job's
/// duration is over (`run_terminal`), and the Delivery executors when Deliveries run deferred
/// (`deferred`, as fibers too). Spans of each worker's phases are recorded until
/// `record_until`.
pub fn run_native(
    db: &Database,
    trees: &Trees,
    job: &TpccJob,
    workers: u32,
    record_until: Option<Instant>,
) -> DriverResult<Vec<WorkerRun>> {
    let workers = workers.clamp(1, job.terminals.max(1));
    let started = Instant::now();
    let deadline = started + job.duration;
    let queue = (job.deferred_delivery)
        .then(|| DeliveryQueue::new(&job.scale, executors_for(&job.scale, job.terminals)));
    let run = Native {
        db,
        trees,
        job,
        deadline,
        deliveries: queue.as_ref(),
    };
    let results: Vec<DriverResult<WorkerRun>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|worker| {
                let run = &run;
                scope.spawn(move || {
                    hayate_engine::start_accounting(record_until);
                    let result = run.worker(worker, workers);
                    let phases = hayate_engine::finish_accounting();
                    result.map(|(outcome, writes_committed)| WorkerRun {
                        outcome,
                        phases,
                        writes_committed,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|_| Err(DriverError::fatal("a TPC-C worker panicked")))
            })
            .collect()
    });
    let mut runs: Vec<WorkerRun> = results.into_iter().collect::<DriverResult<_>>()?;
    if let (Some(queue), Some(first)) = (&queue, runs.first_mut()) {
        first.outcome.deliveries_pending = queue.pending();
    }
    Ok(runs)
}

/// What every worker of a native run shares.
struct Native<'a> {
    db: &'a Database,
    trees: &'a Trees,
    job: &'a TpccJob,
    deadline: Instant,
    deliveries: Option<&'a DeliveryQueue>,
}

impl Native<'_> {
    /// One worker thread: terminals `worker`, `worker + workers`, ... and the Delivery
    /// executors numbered the same way, as fibers of the thread. Returns what it measured and
    /// how many of its transactions wrote.
    fn worker(&self, worker: u32, workers: u32) -> DriverResult<(TpccOutcome, u64)> {
        type Work<'a> = Box<dyn FnOnce() -> DriverResult<(TpccOutcome, u64)> + 'a>;
        let mut works: Vec<Work<'_>> = (worker..self.job.terminals)
            .step_by(workers as usize)
            .map(|index| {
                let terminal = Terminal::new(&self.job.scale, index, self.job.seed);
                Box::new(move || self.terminal(terminal)) as Work<'_>
            })
            .collect();
        if let Some(queue) = self.deliveries {
            for executor in (worker..queue.executors()).step_by(workers as usize) {
                works.push(Box::new(move || {
                    let mut deliver = |input: &DeliveryInput| delivery(self.db, self.trees, input);
                    // Each district that had an order was a commit that wrote.
                    run_executor(queue, executor, self.deadline, &mut deliver)
                }));
            }
        }
        let mut outcome = TpccOutcome::default();
        let mut writes = 0;
        for output in crate::fibers::run(works) {
            let (terminal_outcome, terminal_writes) = output?;
            outcome.merge(&terminal_outcome);
            writes += terminal_writes;
        }
        outcome.worker_threads = 1;
        Ok((outcome, writes))
    }

    /// One terminal until the deadline: runs the next transaction of the mix and retries it
    /// on retryable failures until it commits or the run ends; queues a Delivery when they run
    /// deferred. Returns what it measured and how many of its transactions wrote.
    fn terminal(&self, mut terminal: Terminal) -> DriverResult<(TpccOutcome, u64)> {
        let mut outcome = TpccOutcome::default();
        let mut writes = 0;
        let deadline = self.deadline;
        'terminal: while Instant::now() < deadline {
            let input = terminal.next();
            if defer(&input, self.deliveries, deadline)? {
                continue;
            }
            let started = Instant::now();
            loop {
                match run(self.db, self.trees, &input) {
                    Ok(output) => {
                        let latency = started.elapsed();
                        record_output(&mut outcome, &input, output, latency, self.job);
                        writes += u64::from(writes_rows(&input, &output));
                        break;
                    }
                    Err(error) if error.retryable => {
                        if Instant::now() >= deadline {
                            outcome.gave_up += 1;
                            break 'terminal;
                        }
                        outcome.retry(input.kind(), &error);
                        crate::fibers::pause();
                    }
                    Err(error) => {
                        return Err(DriverError::fatal(format!(
                            "{}: {error}",
                            input.kind().as_str()
                        )))
                    }
                }
            }
        }
        Ok((outcome, writes))
    }
}

/// Whether a finished transaction committed writes.
fn writes_rows(input: &TxnInput, output: &TxnOutput) -> bool {
    !matches!(
        (input, output),
        (_, TxnOutput::NewOrder(NewOrderOutcome::RolledBack))
            | (TxnInput::OrderStatus(_) | TxnInput::StockLevel(_), _)
    )
}

/// A blocking session: each transaction runs on the calling thread (off a fiber, so its
/// waits block the thread).
pub struct HayateTpccSession {
    pub db: Database,
    pub trees: Trees,
}

impl HayateTpccSession {
    fn run_one(&self, input: &TxnInput) -> DriverResult<TxnOutput> {
        run(&self.db, &self.trees, input)
    }
}

fn unexpected(output: TxnOutput) -> DriverError {
    DriverError::fatal(format!("unexpected output {output:?}"))
}

impl TpccSession for HayateTpccSession {
    fn new_order(&mut self, input: &NewOrderInput) -> DriverResult<NewOrderOutcome> {
        match self.run_one(&TxnInput::NewOrder(input.clone()))? {
            TxnOutput::NewOrder(outcome) => Ok(outcome),
            other => Err(unexpected(other)),
        }
    }
    fn payment(&mut self, input: &PaymentInput) -> DriverResult<u32> {
        match self.run_one(&TxnInput::Payment(input.clone()))? {
            TxnOutput::Payment { c_id } => Ok(c_id),
            other => Err(unexpected(other)),
        }
    }
    fn order_status(&mut self, input: &OrderStatusInput) -> DriverResult<u32> {
        match self.run_one(&TxnInput::OrderStatus(input.clone()))? {
            TxnOutput::OrderStatus { lines } => Ok(lines),
            other => Err(unexpected(other)),
        }
    }
    fn delivery(&mut self, input: &DeliveryInput) -> DriverResult<u32> {
        match self.run_one(&TxnInput::Delivery(*input))? {
            TxnOutput::Delivery { delivered } => Ok(delivered),
            other => Err(unexpected(other)),
        }
    }
    fn stock_level(&mut self, input: &StockLevelInput) -> DriverResult<u32> {
        match self.run_one(&TxnInput::StockLevel(*input))? {
            TxnOutput::StockLevel { low_stock } => Ok(low_stock),
            other => Err(unexpected(other)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpcc::rows::generate_all;

    #[test]
    fn every_row_reads_back_as_written() {
        let scale = Scale {
            warehouses: 1,
            items: 50,
            customers_per_district: 5,
            orders_per_district: 5,
        };
        for row in generate_all(&scale, 3, 77) {
            let bytes = &row_entries_value(&row);
            let back = match &row {
                Row::Item(_) => Row::Item(decode_item(bytes).unwrap()),
                Row::Warehouse(_) => Row::Warehouse(decode_warehouse(bytes).unwrap()),
                Row::Stock(_) => Row::Stock(decode_stock(bytes).unwrap()),
                Row::District(_) => Row::District(decode_district(bytes).unwrap()),
                Row::Customer(_) => Row::Customer(decode_customer(bytes).unwrap()),
                Row::History(_) => Row::History(decode_history(bytes).unwrap()),
                Row::Order(_) => Row::Order(decode_order(bytes).unwrap()),
                Row::NewOrder(_) => Row::NewOrder(decode_new_order(bytes).unwrap()),
                Row::OrderLine(_) => Row::OrderLine(decode_order_line(bytes).unwrap()),
            };
            assert_eq!(back, row);
        }
        assert!(
            decode_customer(&[1, 2, 3]).is_err(),
            "truncated rows are errors"
        );
    }

    fn row_entries_value(row: &Row) -> Vec<u8> {
        let trees = Trees::from_ids(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
        row_entries(&trees, row, 1).remove(0).2
    }

    #[test]
    fn name_keys_sort_by_last_then_first_name() {
        let a = customer_name_key(1, 1, "ABLE", "Zed", 9);
        let b = customer_name_key(1, 1, "ABLEBAR", "Amy", 1);
        let c = customer_name_key(1, 1, "ABLE", "Amy", 10);
        assert!(c < a && a < b);
        let prefix = customer_name_prefix(1, 1, "ABLE");
        let end = prefix_end(&prefix);
        assert!(a.as_slice() >= prefix.as_slice() && a < end && b >= end);
    }
}
