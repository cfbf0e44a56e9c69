//! The five TPC-C transactions of clauses 2.4 - 2.8 in SQL, written once over a small
//! connection interface (`SqlConnection`) each peer implements with its own client, and the
//! snapshot read of what the consistency conditions need.
//!
//! Each transaction is one database transaction (`Begin`): committed, or rolled back on an
//! error or on the unused item of clause 2.4.2.3. Statements are written with `?`
//! placeholders and the dialect's exact conversions (`tpcc_schema::Dialect`), and prepared once
//! per connection.

use super::tpcc_schema::{scaled_text, Dialect, Value, HISTORY, NEW_ORDER, ORDERS, ORDER_LINE};
use crate::driver::{DriverError, DriverResult};
use crate::tpcc::check::{
    CheckData, CustomerCheck, DistrictCheck, HistoryCheck, OrderCheck, OrderLineCheck,
};
use crate::tpcc::rows::NewOrder;
use crate::tpcc::txn::{
    CustomerSelector, DeliveryInput, NewOrderInput, NewOrderOutcome, OrderStatusInput,
    PaymentInput, StockLevelInput, TpccSession,
};

/// Orders Stock-Level looks back on (clause 2.8.2.2).
const STOCK_LEVEL_ORDERS: i64 = 20;
/// C_DATA holds at most 500 characters (clause 2.5.2.2).
const CUSTOMER_DATA_CHARS_MAX: usize = 500;

/// Column `index` of a result row as an integer.
fn int(row: &[Value], index: usize) -> DriverResult<i64> {
    match row.get(index) {
        Some(Value::Int(value)) => Ok(*value),
        Some(Value::Text(text)) => text
            .trim()
            .parse()
            .map_err(|_| DriverError::fatal(format!("column {index}: {text:?} is not an integer"))),
        other => Err(DriverError::fatal(format!(
            "column {index}: expected an integer, found {other:?}"
        ))),
    }
}

fn optional_int(row: &[Value], index: usize) -> DriverResult<Option<i64>> {
    match row.get(index) {
        Some(Value::Null) => Ok(None),
        _ => int(row, index).map(Some),
    }
}

fn id(row: &[Value], index: usize) -> DriverResult<u32> {
    let value = int(row, index)?;
    u32::try_from(value)
        .map_err(|_| DriverError::fatal(format!("column {index}: {value} is not an id")))
}

fn text(row: &[Value], index: usize) -> DriverResult<&str> {
    match row.get(index) {
        Some(Value::Text(text)) => Ok(text),
        other => Err(DriverError::fatal(format!(
            "column {index}: expected text, found {other:?}"
        ))),
    }
}

/// The one row a query must return.
fn one_row(rows: Vec<Vec<Value>>, what: impl FnOnce() -> String) -> DriverResult<Vec<Value>> {
    let count = rows.len();
    match <[Vec<Value>; 1]>::try_from(rows) {
        Ok([row]) => Ok(row),
        Err(_) => Err(DriverError::fatal(format!(
            "{}: {count} rows instead of one",
            what()
        ))),
    }
}

/// How a transaction begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Begin {
    /// Reads then writes: READ COMMITTED with FOR UPDATE on rows read then written
    /// (PostgreSQL, MariaDB); BEGIN IMMEDIATE (SQLite).
    Write,
    /// Read only, READ COMMITTED (Order-Status, Stock-Level).
    Read,
    /// Read only, one snapshot of every table (the consistency check).
    Snapshot,
}

/// The statements of the transactions and of the check, each prepared once per connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Statement {
    NewOrderWarehouse,
    NewOrderDistrict,
    NewOrderDistrictUpdate,
    NewOrderCustomer,
    NewOrderItem,
    NewOrderStock,
    NewOrderStockUpdate,
    NewOrderInsertOrder,
    NewOrderInsertNewOrder,
    NewOrderInsertLine,
    PaymentWarehouseUpdate,
    PaymentWarehouse,
    PaymentDistrictUpdate,
    PaymentDistrict,
    CustomersByName,
    PaymentCustomer,
    PaymentCustomerUpdate,
    PaymentCustomerUpdateData,
    PaymentInsertHistory,
    OrderStatusCustomer,
    OrderStatusLastOrder,
    OrderStatusLines,
    DeliveryOldest,
    DeliveryDeleteNewOrder,
    DeliveryOrderUpdate,
    DeliveryOrderCustomer,
    DeliveryLinesUpdate,
    DeliveryLinesAmount,
    DeliveryCustomerUpdate,
    StockLevelDistrict,
    StockLevelCount,
    CheckWarehouses,
    CheckDistricts,
    CheckCustomers,
    CheckHistory,
    CheckOrders,
    CheckNewOrders,
    CheckOrderLines,
}

impl Statement {
    pub const COUNT: usize = Statement::CheckOrderLines as usize + 1;

    /// The statement's text in `dialect`, placeholders numbered as it wants them.
    pub fn text(self, dialect: Dialect) -> String {
        dialect.placeholders(&self.text_with_question_marks(dialect))
    }

    fn text_with_question_marks(self, dialect: Dialect) -> String {
        use Statement::*;
        let d = dialect;
        let lock = d.for_update();
        let (money, timestamp) = (d.money_in(), d.timestamp_in());
        let customer_key = "c_w_id = ? AND c_d_id = ? AND c_id = ?";
        match self {
            NewOrderWarehouse => format!(
                "SELECT {} FROM warehouse WHERE w_id = ?",
                d.rate_out("w_tax")
            ),
            NewOrderDistrict => format!(
                "SELECT d_next_o_id, {} FROM district WHERE d_w_id = ? AND d_id = ?{lock}",
                d.rate_out("d_tax")
            ),
            NewOrderDistrictUpdate => "UPDATE district SET d_next_o_id = d_next_o_id + 1 \
                                       WHERE d_w_id = ? AND d_id = ?"
                .into(),
            NewOrderCustomer => format!(
                "SELECT {}, c_last, c_credit FROM customer WHERE {customer_key}",
                d.rate_out("c_discount")
            ),
            NewOrderItem => format!(
                "SELECT {}, i_name, i_data FROM item WHERE i_id = ?",
                d.money_out("i_price")
            ),
            NewOrderStock => format!(
                "SELECT s_quantity, s_data, s_dist_01, s_dist_02, s_dist_03, s_dist_04, \
                 s_dist_05, s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10 \
                 FROM stock WHERE s_w_id = ? AND s_i_id = ?{lock}"
            ),
            NewOrderStockUpdate => "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, \
                                    s_order_cnt = s_order_cnt + 1, \
                                    s_remote_cnt = s_remote_cnt + ? \
                                    WHERE s_w_id = ? AND s_i_id = ?"
                .into(),
            NewOrderInsertOrder => format!(
                "INSERT INTO orders ({}) VALUES (?, ?, ?, ?, {timestamp}, NULL, ?, ?)",
                ORDERS.column_list()
            ),
            NewOrderInsertNewOrder => format!(
                "INSERT INTO new_order ({}) VALUES (?, ?, ?)",
                NEW_ORDER.column_list()
            ),
            NewOrderInsertLine => format!(
                "INSERT INTO order_line ({}) VALUES (?, ?, ?, ?, ?, ?, NULL, ?, {money}, ?)",
                ORDER_LINE.column_list()
            ),
            PaymentWarehouseUpdate => {
                format!("UPDATE warehouse SET w_ytd = w_ytd + {money} WHERE w_id = ?")
            }
            PaymentWarehouse => "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip \
                                 FROM warehouse WHERE w_id = ?"
                .into(),
            PaymentDistrictUpdate => {
                format!("UPDATE district SET d_ytd = d_ytd + {money} WHERE d_w_id = ? AND d_id = ?")
            }
            PaymentDistrict => "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip \
                                FROM district WHERE d_w_id = ? AND d_id = ?"
                .into(),
            CustomersByName => "SELECT c_id FROM customer \
                                WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first"
                .into(),
            PaymentCustomer => format!(
                "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, \
                 c_zip, c_phone, c_credit, {}, {}, {}, c_data \
                 FROM customer WHERE {customer_key}{lock}",
                d.money_out("c_credit_lim"),
                d.rate_out("c_discount"),
                d.money_out("c_balance")
            ),
            PaymentCustomerUpdate => format!(
                "UPDATE customer SET c_balance = c_balance - {money}, \
                 c_ytd_payment = c_ytd_payment + {money}, c_payment_cnt = c_payment_cnt + 1 \
                 WHERE {customer_key}"
            ),
            PaymentCustomerUpdateData => format!(
                "UPDATE customer SET c_balance = c_balance - {money}, \
                 c_ytd_payment = c_ytd_payment + {money}, c_payment_cnt = c_payment_cnt + 1, \
                 c_data = ? WHERE {customer_key}"
            ),
            PaymentInsertHistory => format!(
                "INSERT INTO history ({}) VALUES (?, ?, ?, ?, ?, {timestamp}, {money}, ?)",
                HISTORY.column_list()
            ),
            OrderStatusCustomer => format!(
                "SELECT {}, c_first, c_middle, c_last FROM customer WHERE {customer_key}",
                d.money_out("c_balance")
            ),
            OrderStatusLastOrder => "SELECT o_id, o_carrier_id, o_entry_d FROM orders \
                                     WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? \
                                     ORDER BY o_id DESC LIMIT 1"
                .into(),
            OrderStatusLines => format!(
                "SELECT ol_i_id, ol_supply_w_id, ol_quantity, {}, ol_delivery_d \
                 FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
                d.money_out("ol_amount")
            ),
            DeliveryOldest => format!(
                "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? \
                 ORDER BY no_o_id LIMIT 1{lock}"
            ),
            DeliveryDeleteNewOrder => "DELETE FROM new_order \
                                       WHERE no_w_id = ? AND no_d_id = ? AND no_o_id = ?"
                .into(),
            DeliveryOrderUpdate => "UPDATE orders SET o_carrier_id = ? \
                                    WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?"
                .into(),
            DeliveryOrderCustomer => {
                "SELECT o_c_id FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_id = ?".into()
            }
            DeliveryLinesUpdate => format!(
                "UPDATE order_line SET ol_delivery_d = {timestamp} \
                 WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?"
            ),
            DeliveryLinesAmount => format!(
                "SELECT {} FROM order_line WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
                d.money_out("COALESCE(SUM(ol_amount), 0)")
            ),
            DeliveryCustomerUpdate => format!(
                "UPDATE customer SET c_balance = c_balance + {money}, \
                 c_delivery_cnt = c_delivery_cnt + 1 WHERE {customer_key}"
            ),
            StockLevelDistrict => {
                "SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?".into()
            }
            StockLevelCount => "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock \
                                WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id < ? \
                                AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id \
                                AND s_quantity < ?"
                .into(),
            CheckWarehouses => format!("SELECT w_id, {} FROM warehouse", d.money_out("w_ytd")),
            CheckDistricts => format!(
                "SELECT d_w_id, d_id, {}, d_next_o_id FROM district",
                d.money_out("d_ytd")
            ),
            CheckCustomers => format!(
                "SELECT c_w_id, c_d_id, c_id, {}, {} FROM customer",
                d.money_out("c_balance"),
                d.money_out("c_ytd_payment")
            ),
            CheckHistory => format!(
                "SELECT h_c_w_id, h_c_d_id, h_c_id, h_w_id, h_d_id, {} FROM history",
                d.money_out("h_amount")
            ),
            CheckOrders => {
                "SELECT o_w_id, o_d_id, o_id, o_c_id, o_carrier_id, o_ol_cnt FROM orders".into()
            }
            CheckNewOrders => "SELECT no_w_id, no_d_id, no_o_id FROM new_order".into(),
            CheckOrderLines => format!(
                "SELECT ol_w_id, ol_d_id, ol_o_id, ol_number, \
                 CASE WHEN ol_delivery_d IS NULL THEN 0 ELSE 1 END, {} FROM order_line",
                d.money_out("ol_amount")
            ),
        }
    }
}

/// One connection of a peer, as the transactions use it.
pub(crate) trait SqlConnection: Send {
    fn begin(&mut self, kind: Begin) -> DriverResult<()>;
    fn commit(&mut self) -> DriverResult<()>;
    fn rollback(&mut self) -> DriverResult<()>;
    /// Runs a statement returning rows, handing each to `each` as it arrives (the check reads
    /// whole tables without holding them as values).
    fn for_each_row(
        &mut self,
        statement: Statement,
        params: &[Value],
        each: &mut dyn FnMut(&[Value]) -> DriverResult<()>,
    ) -> DriverResult<()>;
    /// Runs a statement returning rows.
    fn query(&mut self, statement: Statement, params: &[Value]) -> DriverResult<Vec<Vec<Value>>> {
        let mut rows = Vec::new();
        self.for_each_row(statement, params, &mut |row| {
            rows.push(row.to_vec());
            Ok(())
        })?;
        Ok(rows)
    }
    /// Runs a statement changing rows; returns how many rows it matched.
    fn execute(&mut self, statement: Statement, params: &[Value]) -> DriverResult<u64>;
}

/// How a transaction's body wants it to end.
enum Finish<T> {
    Commit(T),
    Rollback(T),
}

/// Runs `body` in one transaction: committed, or rolled back when it asks or fails.
fn transaction<C: SqlConnection, T>(
    connection: &mut C,
    kind: Begin,
    body: impl FnOnce(&mut C) -> DriverResult<Finish<T>>,
) -> DriverResult<T> {
    connection.begin(kind)?;
    let result = body(connection).and_then(|finish| match finish {
        Finish::Commit(value) => connection.commit().map(|()| value),
        Finish::Rollback(value) => connection.rollback().map(|()| value),
    });
    if result.is_err() {
        // The transaction may still be open (a failed statement, a busy commit); ending it
        // is all that matters, so its own error is not the one to report.
        let _ = connection.rollback();
    }
    result
}

/// The five transactions over any peer's connection.
pub(crate) struct SqlTpccSession<C> {
    connection: C,
    dialect: Dialect,
}

impl<C: SqlConnection> SqlTpccSession<C> {
    pub fn new(connection: C, dialect: Dialect) -> SqlTpccSession<C> {
        SqlTpccSession {
            connection,
            dialect,
        }
    }
}

impl<C: SqlConnection> TpccSession for SqlTpccSession<C> {
    fn new_order(&mut self, input: &NewOrderInput) -> DriverResult<NewOrderOutcome> {
        let dialect = self.dialect;
        transaction(&mut self.connection, Begin::Write, |connection| {
            new_order(connection, dialect, input)
        })
    }

    fn payment(&mut self, input: &PaymentInput) -> DriverResult<u32> {
        let dialect = self.dialect;
        transaction(&mut self.connection, Begin::Write, |connection| {
            payment(connection, dialect, input).map(Finish::Commit)
        })
    }

    fn order_status(&mut self, input: &OrderStatusInput) -> DriverResult<u32> {
        transaction(&mut self.connection, Begin::Read, |connection| {
            order_status(connection, input).map(Finish::Commit)
        })
    }

    fn delivery(&mut self, input: &DeliveryInput) -> DriverResult<u32> {
        let dialect = self.dialect;
        transaction(&mut self.connection, Begin::Write, |connection| {
            delivery(connection, dialect, input).map(Finish::Commit)
        })
    }

    fn stock_level(&mut self, input: &StockLevelInput) -> DriverResult<u32> {
        transaction(&mut self.connection, Begin::Read, |connection| {
            stock_level(connection, input).map(Finish::Commit)
        })
    }
}

/// An UPDATE or DELETE that must match exactly one row.
fn execute_one<C: SqlConnection>(
    connection: &mut C,
    statement: Statement,
    params: &[Value],
) -> DriverResult<()> {
    match connection.execute(statement, params)? {
        1 => Ok(()),
        rows => Err(DriverError::fatal(format!(
            "{statement:?} {params:?} matched {rows} rows instead of one"
        ))),
    }
}

/// A line of a New-Order with what its item costs.
struct PricedLine {
    /// OL_NUMBER (the line's place in the input, from 1).
    number: u32,
    i_id: u32,
    supply_w_id: u32,
    quantity: u32,
    price: i64,
}

/// Clause 2.4.2.2. Stock rows are locked in (supply warehouse, item) order, so that two
/// New-Orders never wait on each other's stock.
fn new_order<C: SqlConnection>(
    connection: &mut C,
    dialect: Dialect,
    input: &NewOrderInput,
) -> DriverResult<Finish<NewOrderOutcome>> {
    let (w_id, d_id) = (Value::id(input.w_id), Value::id(input.d_id));
    let district_key = [w_id.clone(), d_id.clone()];
    let warehouse = connection.query(Statement::NewOrderWarehouse, std::slice::from_ref(&w_id))?;
    one_row(warehouse, || format!("warehouse {}", input.w_id))?;
    let district = connection.query(Statement::NewOrderDistrict, &district_key)?;
    let district = one_row(district, || {
        format!("district {}/{}", input.w_id, input.d_id)
    })?;
    let o_id = id(&district, 0)?;
    execute_one(connection, Statement::NewOrderDistrictUpdate, &district_key)?;
    let customer_key = [w_id.clone(), d_id.clone(), Value::id(input.c_id)];
    let customer = connection.query(Statement::NewOrderCustomer, &customer_key)?;
    one_row(customer, || {
        format!("customer {}/{}/{}", input.w_id, input.d_id, input.c_id)
    })?;
    let mut lines = Vec::with_capacity(input.items.len());
    for (index, item) in input.items.iter().enumerate() {
        let rows = connection.query(Statement::NewOrderItem, &[Value::id(item.i_id)])?;
        let Some(row) = rows.first() else {
            // An unused item number: the whole order rolls back (clause 2.4.2.3).
            return Ok(Finish::Rollback(NewOrderOutcome::RolledBack));
        };
        lines.push(PricedLine {
            number: index as u32 + 1,
            i_id: item.i_id,
            supply_w_id: item.supply_w_id,
            quantity: item.quantity,
            price: int(row, 0)?,
        });
    }
    let order = [
        Value::id(o_id),
        d_id.clone(),
        w_id.clone(),
        Value::id(input.c_id),
        dialect.timestamp_value(input.entry_d),
        Value::Int(lines.len() as i64),
        Value::Int(input.all_local() as i64),
    ];
    connection.execute(Statement::NewOrderInsertOrder, &order)?;
    let new_order = [Value::id(o_id), d_id.clone(), w_id.clone()];
    connection.execute(Statement::NewOrderInsertNewOrder, &new_order)?;
    lines.sort_by_key(|line| (line.supply_w_id, line.i_id, line.number));
    for line in &lines {
        let stock_key = [Value::id(line.supply_w_id), Value::id(line.i_id)];
        let stock = connection.query(Statement::NewOrderStock, &stock_key)?;
        let stock = one_row(stock, || {
            format!("stock {}/{}", line.supply_w_id, line.i_id)
        })?;
        let quantity = int(&stock, 0)?;
        let ordered = line.quantity as i64;
        let new_quantity = if quantity >= ordered + 10 {
            quantity - ordered
        } else {
            quantity - ordered + 91
        };
        let remote = line.supply_w_id != input.w_id;
        let [supply_w_id, i_id] = stock_key;
        let update = [
            Value::Int(new_quantity),
            Value::Int(ordered),
            Value::Int(remote as i64),
            supply_w_id.clone(),
            i_id.clone(),
        ];
        execute_one(connection, Statement::NewOrderStockUpdate, &update)?;
        let dist_info = text(&stock, 1 + input.d_id as usize)?.to_string();
        let order_line = [
            Value::id(o_id),
            d_id.clone(),
            w_id.clone(),
            Value::id(line.number),
            i_id,
            supply_w_id,
            Value::Int(ordered),
            Value::Int(ordered * line.price),
            Value::Text(dist_info),
        ];
        connection.execute(Statement::NewOrderInsertLine, &order_line)?;
    }
    Ok(Finish::Commit(NewOrderOutcome::Committed { o_id }))
}

/// The customer a Payment or Order-Status is for: by id, or the one at position ceil(n/2) of
/// those with the last name, sorted by C_FIRST (clause 2.5.2.2).
fn select_customer<C: SqlConnection>(
    connection: &mut C,
    w_id: u32,
    d_id: u32,
    selector: &CustomerSelector,
) -> DriverResult<u32> {
    match selector {
        CustomerSelector::ById(c_id) => Ok(*c_id),
        CustomerSelector::ByLastName(last) => {
            let params = [Value::id(w_id), Value::id(d_id), Value::Text(last.clone())];
            let rows = connection.query(Statement::CustomersByName, &params)?;
            if rows.is_empty() {
                return Err(DriverError::fatal(format!(
                    "no customer named {last} in district {w_id}/{d_id}"
                )));
            }
            id(&rows[(rows.len() - 1) / 2], 0)
        }
    }
}

/// Clause 2.5.2.2.
fn payment<C: SqlConnection>(
    connection: &mut C,
    dialect: Dialect,
    input: &PaymentInput,
) -> DriverResult<u32> {
    let amount = Value::Int(input.amount);
    let (w_id, d_id) = (Value::id(input.w_id), Value::id(input.d_id));
    let warehouse_update = [amount.clone(), w_id.clone()];
    execute_one(
        connection,
        Statement::PaymentWarehouseUpdate,
        &warehouse_update,
    )?;
    let warehouse = connection.query(Statement::PaymentWarehouse, std::slice::from_ref(&w_id))?;
    let warehouse = one_row(warehouse, || format!("warehouse {}", input.w_id))?;
    let district_update = [amount.clone(), w_id.clone(), d_id.clone()];
    execute_one(
        connection,
        Statement::PaymentDistrictUpdate,
        &district_update,
    )?;
    let district = connection.query(Statement::PaymentDistrict, &[w_id.clone(), d_id.clone()])?;
    let district = one_row(district, || {
        format!("district {}/{}", input.w_id, input.d_id)
    })?;
    let c_id = select_customer(connection, input.c_w_id, input.c_d_id, &input.customer)?;
    let customer_key = [
        Value::id(input.c_w_id),
        Value::id(input.c_d_id),
        Value::id(c_id),
    ];
    let customer = connection.query(Statement::PaymentCustomer, &customer_key)?;
    let customer = one_row(customer, || {
        format!("customer {}/{}/{c_id}", input.c_w_id, input.c_d_id)
    })?;
    if text(&customer, 9)?.trim() == "BC" {
        let entry = format!(
            "{c_id} {} {} {} {} {}|",
            input.c_d_id,
            input.c_w_id,
            input.d_id,
            input.w_id,
            scaled_text(input.amount, 100)
        );
        let data: String = entry
            .chars()
            .chain(text(&customer, 13)?.chars())
            .take(CUSTOMER_DATA_CHARS_MAX)
            .collect();
        let mut update = vec![amount.clone(), amount.clone(), Value::Text(data)];
        update.extend(customer_key);
        execute_one(connection, Statement::PaymentCustomerUpdateData, &update)?;
    } else {
        let mut update = vec![amount.clone(), amount.clone()];
        update.extend(customer_key);
        execute_one(connection, Statement::PaymentCustomerUpdate, &update)?;
    }
    let history_data = format!(
        "{}    {}",
        text(&warehouse, 0)?.trim_end(),
        text(&district, 0)?.trim_end()
    );
    let history = [
        Value::id(c_id),
        Value::id(input.c_d_id),
        Value::id(input.c_w_id),
        d_id,
        w_id,
        dialect.timestamp_value(input.date),
        amount,
        Value::Text(history_data),
    ];
    connection.execute(Statement::PaymentInsertHistory, &history)?;
    Ok(c_id)
}

/// Clause 2.6.2.2: the customer's last order and its lines; returns how many lines.
fn order_status<C: SqlConnection>(
    connection: &mut C,
    input: &OrderStatusInput,
) -> DriverResult<u32> {
    let c_id = select_customer(connection, input.w_id, input.d_id, &input.customer)?;
    let (w_id, d_id) = (Value::id(input.w_id), Value::id(input.d_id));
    let customer_key = [w_id.clone(), d_id.clone(), Value::id(c_id)];
    let customer = connection.query(Statement::OrderStatusCustomer, &customer_key)?;
    one_row(customer, || {
        format!("customer {}/{}/{c_id}", input.w_id, input.d_id)
    })?;
    let order = connection.query(Statement::OrderStatusLastOrder, &customer_key)?;
    let Some(order) = order.first() else {
        return Ok(0);
    };
    let lines_key = [w_id, d_id, Value::id(id(order, 0)?)];
    let lines = connection.query(Statement::OrderStatusLines, &lines_key)?;
    Ok(lines.len() as u32)
}

/// Clause 2.7.4.2: the oldest undelivered order of each district; returns how many districts
/// had one.
fn delivery<C: SqlConnection>(
    connection: &mut C,
    dialect: Dialect,
    input: &DeliveryInput,
) -> DriverResult<u32> {
    let mut delivered = 0;
    for d_id in input.districts() {
        if let Some(o_id) = take_oldest_new_order(connection, input.w_id, d_id)? {
            deliver_order(connection, dialect, input, d_id, o_id)?;
            delivered += 1;
        }
    }
    Ok(delivered)
}

/// Deletes the district's oldest NEW-ORDER row and returns its order, if there is one.
fn take_oldest_new_order<C: SqlConnection>(
    connection: &mut C,
    w_id: u32,
    d_id: u32,
) -> DriverResult<Option<u32>> {
    let district_key = [Value::id(w_id), Value::id(d_id)];
    // At READ COMMITTED a concurrent Delivery may delete the row this one waited for:
    // PostgreSQL then returns no row, so an empty answer is asked once more, and a row
    // already gone (nothing deleted) makes it look again.
    let mut empty_answers = 0;
    while empty_answers < 2 {
        let rows = connection.query(Statement::DeliveryOldest, &district_key)?;
        let Some(row) = rows.first() else {
            empty_answers += 1;
            continue;
        };
        let o_id = id(row, 0)?;
        let key = [Value::id(w_id), Value::id(d_id), Value::id(o_id)];
        if connection.execute(Statement::DeliveryDeleteNewOrder, &key)? == 1 {
            return Ok(Some(o_id));
        }
    }
    Ok(None)
}

fn deliver_order<C: SqlConnection>(
    connection: &mut C,
    dialect: Dialect,
    input: &DeliveryInput,
    d_id: u32,
    o_id: u32,
) -> DriverResult<()> {
    let order_key = [Value::id(input.w_id), Value::id(d_id), Value::id(o_id)];
    let mut order_update = vec![Value::id(input.carrier_id)];
    order_update.extend(order_key.iter().cloned());
    execute_one(connection, Statement::DeliveryOrderUpdate, &order_update)?;
    let order = connection.query(Statement::DeliveryOrderCustomer, &order_key)?;
    let c_id = id(
        &one_row(order, || format!("order {}/{d_id}/{o_id}", input.w_id))?,
        0,
    )?;
    let mut lines_update = vec![dialect.timestamp_value(input.date)];
    lines_update.extend(order_key.iter().cloned());
    connection.execute(Statement::DeliveryLinesUpdate, &lines_update)?;
    let amount = connection.query(Statement::DeliveryLinesAmount, &order_key)?;
    let amount = int(
        &one_row(amount, || {
            format!("order lines of {}/{d_id}/{o_id}", input.w_id)
        })?,
        0,
    )?;
    let customer_update = [
        Value::Int(amount),
        Value::id(input.w_id),
        Value::id(d_id),
        Value::id(c_id),
    ];
    execute_one(
        connection,
        Statement::DeliveryCustomerUpdate,
        &customer_update,
    )
}

/// Clause 2.8.2.2: distinct items of the district's last 20 orders with stock below the
/// threshold.
fn stock_level<C: SqlConnection>(connection: &mut C, input: &StockLevelInput) -> DriverResult<u32> {
    let (w_id, d_id) = (Value::id(input.w_id), Value::id(input.d_id));
    let district =
        connection.query(Statement::StockLevelDistrict, &[w_id.clone(), d_id.clone()])?;
    let district = one_row(district, || {
        format!("district {}/{}", input.w_id, input.d_id)
    })?;
    let next_o_id = int(&district, 0)?;
    let params = [
        w_id.clone(),
        d_id,
        Value::Int(next_o_id),
        Value::Int(next_o_id - STOCK_LEVEL_ORDERS),
        w_id,
        Value::Int(input.threshold as i64),
    ];
    let count = connection.query(Statement::StockLevelCount, &params)?;
    let count = int(&one_row(count, || "stock level count".into())?, 0)?;
    u32::try_from(count).map_err(|_| DriverError::fatal(format!("stock level count {count}")))
}

/// What the consistency conditions read, in one snapshot.
pub(crate) fn read_check_data<C: SqlConnection>(connection: &mut C) -> DriverResult<CheckData> {
    transaction(connection, Begin::Snapshot, |connection| {
        read_check_tables(connection).map(Finish::Commit)
    })
}

fn read_check_tables<C: SqlConnection>(connection: &mut C) -> DriverResult<CheckData> {
    let mut data = CheckData::default();
    connection.for_each_row(Statement::CheckWarehouses, &[], &mut |row| {
        data.warehouses.push((id(row, 0)?, int(row, 1)?));
        Ok(())
    })?;
    connection.for_each_row(Statement::CheckDistricts, &[], &mut |row| {
        data.districts.push(DistrictCheck {
            w_id: id(row, 0)?,
            d_id: id(row, 1)?,
            ytd: int(row, 2)?,
            next_o_id: id(row, 3)?,
        });
        Ok(())
    })?;
    connection.for_each_row(Statement::CheckCustomers, &[], &mut |row| {
        data.customers.push(CustomerCheck {
            w_id: id(row, 0)?,
            d_id: id(row, 1)?,
            c_id: id(row, 2)?,
            balance: int(row, 3)?,
            ytd_payment: int(row, 4)?,
        });
        Ok(())
    })?;
    connection.for_each_row(Statement::CheckHistory, &[], &mut |row| {
        data.history.push(HistoryCheck {
            c_w_id: id(row, 0)?,
            c_d_id: id(row, 1)?,
            c_id: id(row, 2)?,
            w_id: id(row, 3)?,
            d_id: id(row, 4)?,
            amount: int(row, 5)?,
        });
        Ok(())
    })?;
    connection.for_each_row(Statement::CheckOrders, &[], &mut |row| {
        let carrier_id = match optional_int(row, 4)? {
            Some(_) => Some(id(row, 4)?),
            None => None,
        };
        data.orders.push(OrderCheck {
            w_id: id(row, 0)?,
            d_id: id(row, 1)?,
            o_id: id(row, 2)?,
            c_id: id(row, 3)?,
            carrier_id,
            ol_cnt: id(row, 5)?,
        });
        Ok(())
    })?;
    connection.for_each_row(Statement::CheckNewOrders, &[], &mut |row| {
        data.new_orders.push(NewOrder {
            w_id: id(row, 0)?,
            d_id: id(row, 1)?,
            o_id: id(row, 2)?,
        });
        Ok(())
    })?;
    connection.for_each_row(Statement::CheckOrderLines, &[], &mut |row| {
        data.order_lines.push(OrderLineCheck {
            w_id: id(row, 0)?,
            d_id: id(row, 1)?,
            o_id: id(row, 2)?,
            number: id(row, 3)?,
            delivered: int(row, 4)? != 0,
            amount: int(row, 5)?,
        });
        Ok(())
    })?;
    Ok(data)
}
