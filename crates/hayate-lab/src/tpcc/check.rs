//! The consistency conditions of TPC-C (clause 3.3.2.1 - 3.3.2.12), over the columns they
//! need, read from any engine into `CheckData`.
//!
//! Condition 11 holds only right after loading (Delivery removes NEW-ORDER rows and leaves
//! their orders); `check` runs it only when asked to, and says so.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::tpcc::rows::{NewOrder, Row};
use crate::tpcc::spec::Scale;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DistrictCheck {
    pub w_id: u32,
    pub d_id: u32,
    pub ytd: i64,
    pub next_o_id: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CustomerCheck {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    pub balance: i64,
    pub ytd_payment: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryCheck {
    pub c_w_id: u32,
    pub c_d_id: u32,
    pub c_id: u32,
    pub w_id: u32,
    pub d_id: u32,
    pub amount: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderCheck {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub c_id: u32,
    pub carrier_id: Option<u32>,
    pub ol_cnt: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderLineCheck {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub number: u32,
    pub delivered: bool,
    pub amount: i64,
}

/// The columns the conditions read, of every row of the seven tables involved.
#[derive(Debug, Clone, Default)]
pub struct CheckData {
    /// (W_ID, W_YTD).
    pub warehouses: Vec<(u32, i64)>,
    pub districts: Vec<DistrictCheck>,
    pub customers: Vec<CustomerCheck>,
    pub history: Vec<HistoryCheck>,
    pub orders: Vec<OrderCheck>,
    pub new_orders: Vec<NewOrder>,
    pub order_lines: Vec<OrderLineCheck>,
}

impl CheckData {
    /// Adds the columns of a row (rows of ITEM and STOCK are not needed and ignored).
    pub fn add(&mut self, row: &Row) {
        match row {
            Row::Warehouse(row) => self.warehouses.push((row.w_id, row.ytd)),
            Row::District(row) => self.districts.push(DistrictCheck {
                w_id: row.w_id,
                d_id: row.d_id,
                ytd: row.ytd,
                next_o_id: row.next_o_id,
            }),
            Row::Customer(row) => self.customers.push(CustomerCheck {
                w_id: row.w_id,
                d_id: row.d_id,
                c_id: row.c_id,
                balance: row.balance,
                ytd_payment: row.ytd_payment,
            }),
            Row::History(row) => self.history.push(HistoryCheck {
                c_w_id: row.c_w_id,
                c_d_id: row.c_d_id,
                c_id: row.c_id,
                w_id: row.w_id,
                d_id: row.d_id,
                amount: row.amount,
            }),
            Row::Order(row) => self.orders.push(OrderCheck {
                w_id: row.w_id,
                d_id: row.d_id,
                o_id: row.o_id,
                c_id: row.c_id,
                carrier_id: row.carrier_id,
                ol_cnt: row.ol_cnt,
            }),
            Row::NewOrder(row) => self.new_orders.push(*row),
            Row::OrderLine(row) => self.order_lines.push(OrderLineCheck {
                w_id: row.w_id,
                d_id: row.d_id,
                o_id: row.o_id,
                number: row.number,
                delivered: row.delivery_d.is_some(),
                amount: row.amount,
            }),
            Row::Item(_) | Row::Stock(_) => {}
        }
    }

    #[cfg(test)]
    pub fn from_rows<'a>(rows: impl IntoIterator<Item = &'a Row>) -> CheckData {
        let mut data = CheckData::default();
        for row in rows {
            data.add(row);
        }
        data
    }

    /// Whether order (w, d, o) exists: for the crash loop's acknowledged New-Orders.
    pub fn order_ids(&self) -> HashSet<(u32, u32, u32)> {
        self.orders
            .iter()
            .map(|order| (order.w_id, order.d_id, order.o_id))
            .collect()
    }
}

/// The outcome of one condition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConditionResult {
    pub number: u32,
    pub title: String,
    /// Warehouses, districts, customers or orders the condition was checked on.
    pub checked: u64,
    /// How many of them violate it.
    pub failures: u64,
    /// The first violation, described.
    pub example: Option<String>,
}

impl ConditionResult {
    pub fn passed(&self) -> bool {
        self.failures == 0
    }
}

/// Which conditions to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conditions {
    /// 1 - 10 and 12; 11 also when `just_loaded`.
    All { just_loaded: bool },
    /// 1 - 4, the ones the crash loop checks after every recovery.
    FirstFour,
}

impl Conditions {
    fn includes(self, number: u32) -> bool {
        match self {
            Conditions::All { just_loaded } => number != 11 || just_loaded,
            Conditions::FirstFour => number <= 4,
        }
    }
}

/// Titles of the conditions, as the specification states them.
pub const TITLES: [&str; 12] = [
    "W_YTD = sum(D_YTD)",
    "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
    "max(NO_O_ID) - min(NO_O_ID) + 1 = rows in NEW-ORDER",
    "sum(O_OL_CNT) = rows in ORDER-LINE",
    "O_CARRIER_ID is null iff a NEW-ORDER row exists",
    "O_OL_CNT = order lines of the order",
    "OL_DELIVERY_D is null iff O_CARRIER_ID is null",
    "W_YTD = sum(H_AMOUNT)",
    "D_YTD = sum(H_AMOUNT)",
    "C_BALANCE = sum(OL_AMOUNT delivered) - sum(H_AMOUNT)",
    "rows in ORDER - rows in NEW-ORDER = 2100 (right after loading only)",
    "C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT delivered)",
];

/// Counts checks and failures of one condition, keeping the first failure.
struct Tally {
    checked: u64,
    failures: u64,
    example: Option<String>,
}

impl Tally {
    fn new() -> Tally {
        Tally {
            checked: 0,
            failures: 0,
            example: None,
        }
    }

    fn check(&mut self, holds: bool, describe: impl FnOnce() -> String) {
        self.checked += 1;
        if !holds {
            self.failures += 1;
            if self.example.is_none() {
                self.example = Some(describe());
            }
        }
    }

    fn finish(self, number: u32) -> ConditionResult {
        ConditionResult {
            number,
            title: TITLES[number as usize - 1].to_string(),
            checked: self.checked,
            failures: self.failures,
            example: self.example,
        }
    }
}

type DistrictKey = (u32, u32);

/// Per district: the aggregates conditions 2 - 4, 9 and 11 compare.
#[derive(Default)]
struct DistrictSums {
    max_o_id: Option<u32>,
    orders: u64,
    ol_cnt_sum: u64,
    order_lines: u64,
    new_orders: u64,
    min_no: Option<u32>,
    max_no: Option<u32>,
    history_amount: i64,
}

/// Checks the conditions on `data`; `scale` gives condition 11's constant.
pub fn check(data: &CheckData, scale: &Scale, which: Conditions) -> Vec<ConditionResult> {
    let mut districts: BTreeMap<DistrictKey, DistrictSums> = BTreeMap::new();
    for district in &data.districts {
        districts.entry((district.w_id, district.d_id)).or_default();
    }
    let new_order_set: HashSet<(u32, u32, u32)> = data
        .new_orders
        .iter()
        .map(|row| (row.w_id, row.d_id, row.o_id))
        .collect();
    for order in &data.orders {
        let sums = districts.entry((order.w_id, order.d_id)).or_default();
        sums.max_o_id = sums.max_o_id.max(Some(order.o_id));
        sums.orders += 1;
        sums.ol_cnt_sum += order.ol_cnt as u64;
    }
    for row in &data.new_orders {
        let sums = districts.entry((row.w_id, row.d_id)).or_default();
        sums.new_orders += 1;
        sums.min_no = Some(sums.min_no.map_or(row.o_id, |min| min.min(row.o_id)));
        sums.max_no = sums.max_no.max(Some(row.o_id));
    }
    // Lines per order, and delivered amounts per customer (through the order's customer).
    let mut lines_per_order: HashMap<(u32, u32, u32), u32> = HashMap::new();
    for line in &data.order_lines {
        districts
            .entry((line.w_id, line.d_id))
            .or_default()
            .order_lines += 1;
        *lines_per_order
            .entry((line.w_id, line.d_id, line.o_id))
            .or_default() += 1;
    }
    let mut warehouse_history: HashMap<u32, i64> = HashMap::new();
    let mut customer_history: HashMap<(u32, u32, u32), i64> = HashMap::new();
    for row in &data.history {
        *warehouse_history.entry(row.w_id).or_default() += row.amount;
        districts
            .entry((row.w_id, row.d_id))
            .or_default()
            .history_amount += row.amount;
        *customer_history
            .entry((row.c_w_id, row.c_d_id, row.c_id))
            .or_default() += row.amount;
    }
    let order_by_id: HashMap<(u32, u32, u32), &OrderCheck> = data
        .orders
        .iter()
        .map(|order| ((order.w_id, order.d_id, order.o_id), order))
        .collect();
    let mut customer_delivered: HashMap<(u32, u32, u32), i64> = HashMap::new();
    for line in &data.order_lines {
        if !line.delivered {
            continue;
        }
        if let Some(order) = order_by_id.get(&(line.w_id, line.d_id, line.o_id)) {
            *customer_delivered
                .entry((order.w_id, order.d_id, order.c_id))
                .or_default() += line.amount;
        }
    }

    let mut results = Vec::new();
    let mut run = |number: u32, body: &mut dyn FnMut(&mut Tally)| {
        if which.includes(number) {
            let mut tally = Tally::new();
            body(&mut tally);
            results.push(tally.finish(number));
        }
    };

    run(1, &mut |tally| {
        let mut district_ytd: HashMap<u32, i64> = HashMap::new();
        for district in &data.districts {
            *district_ytd.entry(district.w_id).or_default() += district.ytd;
        }
        for &(w_id, ytd) in &data.warehouses {
            let sum = district_ytd.get(&w_id).copied().unwrap_or(0);
            tally.check(ytd == sum, || {
                format!(
                    "warehouse {w_id}: W_YTD {} but sum(D_YTD) {}",
                    cents(ytd),
                    cents(sum)
                )
            });
        }
    });
    run(2, &mut |tally| {
        for district in &data.districts {
            let sums = &districts[&(district.w_id, district.d_id)];
            let expected = district.next_o_id.checked_sub(1);
            let holds =
                sums.max_o_id == expected && (sums.max_no.is_none() || sums.max_no == expected);
            tally.check(holds, || {
                format!(
                    "district {}/{}: D_NEXT_O_ID {}, max(O_ID) {:?}, max(NO_O_ID) {:?}",
                    district.w_id, district.d_id, district.next_o_id, sums.max_o_id, sums.max_no
                )
            });
        }
    });
    run(3, &mut |tally| {
        for (&(w_id, d_id), sums) in &districts {
            let span = match (sums.min_no, sums.max_no) {
                (Some(min), Some(max)) => (max - min + 1) as u64,
                _ => 0,
            };
            tally.check(span == sums.new_orders, || {
                format!(
                    "district {w_id}/{d_id}: NO_O_ID from {:?} to {:?} but {} rows",
                    sums.min_no, sums.max_no, sums.new_orders
                )
            });
        }
    });
    run(4, &mut |tally| {
        for (&(w_id, d_id), sums) in &districts {
            tally.check(sums.ol_cnt_sum == sums.order_lines, || {
                format!(
                    "district {w_id}/{d_id}: sum(O_OL_CNT) {} but {} order lines",
                    sums.ol_cnt_sum, sums.order_lines
                )
            });
        }
    });
    run(5, &mut |tally| {
        for order in &data.orders {
            let queued = new_order_set.contains(&(order.w_id, order.d_id, order.o_id));
            tally.check(order.carrier_id.is_none() == queued, || {
                format!(
                    "order {}/{}/{}: O_CARRIER_ID {:?}, NEW-ORDER row {}",
                    order.w_id,
                    order.d_id,
                    order.o_id,
                    order.carrier_id,
                    if queued { "present" } else { "absent" }
                )
            });
        }
    });
    run(6, &mut |tally| {
        for order in &data.orders {
            let lines = lines_per_order
                .get(&(order.w_id, order.d_id, order.o_id))
                .copied()
                .unwrap_or(0);
            tally.check(order.ol_cnt == lines, || {
                format!(
                    "order {}/{}/{}: O_OL_CNT {} but {lines} order lines",
                    order.w_id, order.d_id, order.o_id, order.ol_cnt
                )
            });
        }
    });
    run(7, &mut |tally| {
        for line in &data.order_lines {
            let order = order_by_id.get(&(line.w_id, line.d_id, line.o_id));
            let holds = order.is_some_and(|order| order.carrier_id.is_some() == line.delivered);
            tally.check(holds, || {
                format!(
                    "order line {}/{}/{}/{}: delivered {} but its order's carrier {:?}",
                    line.w_id,
                    line.d_id,
                    line.o_id,
                    line.number,
                    line.delivered,
                    order.map(|order| order.carrier_id)
                )
            });
        }
    });
    run(8, &mut |tally| {
        for &(w_id, ytd) in &data.warehouses {
            let sum = warehouse_history.get(&w_id).copied().unwrap_or(0);
            tally.check(ytd == sum, || {
                format!(
                    "warehouse {w_id}: W_YTD {} but sum(H_AMOUNT) {}",
                    cents(ytd),
                    cents(sum)
                )
            });
        }
    });
    run(9, &mut |tally| {
        for district in &data.districts {
            let sum = districts[&(district.w_id, district.d_id)].history_amount;
            tally.check(district.ytd == sum, || {
                format!(
                    "district {}/{}: D_YTD {} but sum(H_AMOUNT) {}",
                    district.w_id,
                    district.d_id,
                    cents(district.ytd),
                    cents(sum)
                )
            });
        }
    });
    run(10, &mut |tally| {
        for customer in &data.customers {
            let key = (customer.w_id, customer.d_id, customer.c_id);
            let delivered = customer_delivered.get(&key).copied().unwrap_or(0);
            let paid = customer_history.get(&key).copied().unwrap_or(0);
            tally.check(customer.balance == delivered - paid, || {
                format!(
                    "customer {}/{}/{}: C_BALANCE {} but delivered {} - paid {}",
                    customer.w_id,
                    customer.d_id,
                    customer.c_id,
                    cents(customer.balance),
                    cents(delivered),
                    cents(paid)
                )
            });
        }
    });
    run(11, &mut |tally| {
        let expected = scale.first_new_order() as u64 - 1;
        for (&(w_id, d_id), sums) in &districts {
            let difference = sums.orders.saturating_sub(sums.new_orders);
            tally.check(difference == expected, || {
                format!(
                    "district {w_id}/{d_id}: {} orders - {} new orders = \
                     {difference}, not {expected}",
                    sums.orders, sums.new_orders
                )
            });
        }
    });
    run(12, &mut |tally| {
        for customer in &data.customers {
            let key = (customer.w_id, customer.d_id, customer.c_id);
            let delivered = customer_delivered.get(&key).copied().unwrap_or(0);
            tally.check(customer.balance + customer.ytd_payment == delivered, || {
                format!(
                    "customer {}/{}/{}: C_BALANCE {} + C_YTD_PAYMENT {} but delivered {}",
                    customer.w_id,
                    customer.d_id,
                    customer.c_id,
                    cents(customer.balance),
                    cents(customer.ytd_payment),
                    cents(delivered)
                )
            });
        }
    });
    results
}

/// Cents as a decimal amount.
fn cents(value: i64) -> String {
    let sign = if value < 0 { "-" } else { "" };
    format!(
        "{sign}{}.{:02}",
        value.unsigned_abs() / 100,
        value.unsigned_abs() % 100
    )
}

#[cfg(test)]
mod tests;
