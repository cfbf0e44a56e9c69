//! The nine TPC-C tables as Rust rows (clause 1.3), and the initial database of clause 4.3.3.1.
//!
//! Money is in cents, rates in ten-thousandths, timestamps in microseconds since the epoch;
//! every engine stores them so that they read back exactly (`numeric(12,2)` and the like in
//! SQL peers). The generator emits rows through a sink in an order loaders can batch: ITEM
//! first (`generate_items`), then per warehouse (`generate_warehouse`) the warehouse, its
//! stock, and per district the district, its customers with their history, its orders with
//! their order lines and new orders.

use crate::driver::DriverResult;
use crate::tpcc::spec::{
    last_name, Scale, TpccRandom, CUSTOMER_BALANCE_INITIAL, CUSTOMER_CREDIT_LIMIT,
    CUSTOMER_YTD_PAYMENT_INITIAL, C_LAST_LOAD, DISTRICTS_PER_WAREHOUSE, DISTRICT_YTD_INITIAL,
    WAREHOUSE_YTD_INITIAL,
};

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub i_id: u32,
    pub im_id: u32,
    pub name: String,
    /// Cents.
    pub price: i64,
    pub data: String,
}

/// Street, city, state and zip, shared by warehouse, district and customer.
#[derive(Debug, Clone, PartialEq)]
pub struct Address {
    pub street_1: String,
    pub street_2: String,
    pub city: String,
    pub state: String,
    pub zip: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Warehouse {
    pub w_id: u32,
    pub name: String,
    pub address: Address,
    /// Ten-thousandths (0..=2000).
    pub tax: i64,
    /// Cents.
    pub ytd: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct District {
    pub w_id: u32,
    pub d_id: u32,
    pub name: String,
    pub address: Address,
    pub tax: i64,
    pub ytd: i64,
    pub next_o_id: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Customer {
    pub w_id: u32,
    pub d_id: u32,
    pub c_id: u32,
    pub first: String,
    pub middle: String,
    pub last: String,
    pub address: Address,
    pub phone: String,
    pub since: i64,
    /// "GC" or "BC".
    pub credit: String,
    pub credit_lim: i64,
    /// Ten-thousandths (0..=5000).
    pub discount: i64,
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub c_id: u32,
    pub c_d_id: u32,
    pub c_w_id: u32,
    pub d_id: u32,
    pub w_id: u32,
    pub date: i64,
    pub amount: i64,
    pub data: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Order {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub c_id: u32,
    pub entry_d: i64,
    pub carrier_id: Option<u32>,
    pub ol_cnt: u32,
    pub all_local: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewOrder {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OrderLine {
    pub w_id: u32,
    pub d_id: u32,
    pub o_id: u32,
    pub number: u32,
    pub i_id: u32,
    pub supply_w_id: u32,
    pub delivery_d: Option<i64>,
    pub quantity: u32,
    /// Cents.
    pub amount: i64,
    pub dist_info: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stock {
    pub w_id: u32,
    pub i_id: u32,
    pub quantity: i32,
    /// S_DIST_01..S_DIST_10.
    pub dist: [String; 10],
    pub ytd: i64,
    pub order_cnt: u32,
    pub remote_cnt: u32,
    pub data: String,
}

/// One row of the initial database.
#[derive(Debug, Clone, PartialEq)]
pub enum Row {
    Item(Item),
    Warehouse(Warehouse),
    Stock(Stock),
    District(District),
    Customer(Customer),
    History(History),
    Order(Order),
    NewOrder(NewOrder),
    OrderLine(OrderLine),
}

pub type RowSink<'a> = dyn FnMut(Row) -> DriverResult<()> + 'a;

fn address(random: &mut TpccRandom) -> Address {
    Address {
        street_1: random.a_string(10, 20),
        street_2: random.a_string(10, 20),
        city: random.a_string(10, 20),
        state: random.a_string(2, 2).to_uppercase(),
        zip: random.zip(),
    }
}

/// The ITEM table.
pub fn generate_items(scale: &Scale, seed: u64, sink: &mut RowSink<'_>) -> DriverResult<()> {
    let mut random = TpccRandom::new(seed ^ 0x17e3);
    for i_id in 1..=scale.items {
        sink(Row::Item(Item {
            i_id,
            im_id: random.uniform_u32(1, 10_000),
            name: random.a_string(14, 24),
            price: random.uniform(100, 10_000) as i64,
            data: random.data_with_original(),
        }))?;
    }
    Ok(())
}

/// Warehouse `w_id` with its stock, districts, customers, history, orders, order lines and
/// new orders; `now` is the load time (C_SINCE, H_DATE, O_ENTRY_D).
pub fn generate_warehouse(
    scale: &Scale,
    w_id: u32,
    seed: u64,
    now: i64,
    sink: &mut RowSink<'_>,
) -> DriverResult<()> {
    let mut random = TpccRandom::new(seed ^ (w_id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    sink(Row::Warehouse(Warehouse {
        w_id,
        name: random.a_string(6, 10),
        address: address(&mut random),
        tax: random.uniform(0, 2000) as i64,
        ytd: WAREHOUSE_YTD_INITIAL * scale.customers_per_district as i64 / 3_000,
    }))?;
    for i_id in 1..=scale.items {
        sink(Row::Stock(Stock {
            w_id,
            i_id,
            quantity: random.uniform(10, 100) as i32,
            dist: std::array::from_fn(|_| random.a_string(24, 24)),
            ytd: 0,
            order_cnt: 0,
            remote_cnt: 0,
            data: random.data_with_original(),
        }))?;
    }
    for d_id in 1..=DISTRICTS_PER_WAREHOUSE {
        generate_district(scale, w_id, d_id, &mut random, now, sink)?;
    }
    Ok(())
}

fn generate_district(
    scale: &Scale,
    w_id: u32,
    d_id: u32,
    random: &mut TpccRandom,
    now: i64,
    sink: &mut RowSink<'_>,
) -> DriverResult<()> {
    sink(Row::District(District {
        w_id,
        d_id,
        name: random.a_string(6, 10),
        address: address(random),
        tax: random.uniform(0, 2000) as i64,
        ytd: DISTRICT_YTD_INITIAL * scale.customers_per_district as i64 / 3_000,
        next_o_id: scale.orders_per_district + 1,
    }))?;
    for c_id in 1..=scale.customers_per_district {
        let number = if c_id <= 1000 {
            c_id - 1
        } else {
            random.nurand(255, C_LAST_LOAD, 0, 999) as u32
        };
        sink(Row::Customer(Customer {
            w_id,
            d_id,
            c_id,
            first: random.a_string(8, 16),
            middle: "OE".into(),
            last: last_name(number),
            address: address(random),
            phone: random.n_string(16, 16),
            since: now,
            credit: if random.percent(10) { "BC" } else { "GC" }.into(),
            credit_lim: CUSTOMER_CREDIT_LIMIT,
            discount: random.uniform(0, 5000) as i64,
            balance: CUSTOMER_BALANCE_INITIAL,
            ytd_payment: CUSTOMER_YTD_PAYMENT_INITIAL,
            payment_cnt: 1,
            delivery_cnt: 0,
            data: random.a_string(300, 500),
        }))?;
        sink(Row::History(History {
            c_id,
            c_d_id: d_id,
            c_w_id: w_id,
            d_id,
            w_id,
            date: now,
            amount: CUSTOMER_YTD_PAYMENT_INITIAL,
            data: random.a_string(12, 24),
        }))?;
    }
    let customers = random.permutation(scale.customers_per_district);
    let first_new_order = scale.first_new_order();
    for o_id in 1..=scale.orders_per_district {
        let delivered = o_id < first_new_order;
        let ol_cnt = random.uniform_u32(5, 15);
        sink(Row::Order(Order {
            w_id,
            d_id,
            o_id,
            c_id: customers[((o_id - 1) % scale.customers_per_district) as usize],
            entry_d: now,
            carrier_id: delivered.then(|| random.uniform_u32(1, 10)),
            ol_cnt,
            all_local: true,
        }))?;
        for number in 1..=ol_cnt {
            sink(Row::OrderLine(OrderLine {
                w_id,
                d_id,
                o_id,
                number,
                i_id: random.uniform_u32(1, scale.items),
                supply_w_id: w_id,
                delivery_d: delivered.then_some(now),
                quantity: 5,
                amount: if delivered {
                    0
                } else {
                    random.uniform(1, 999_999) as i64
                },
                dist_info: random.a_string(24, 24),
            }))?;
        }
        if !delivered {
            sink(Row::NewOrder(NewOrder { w_id, d_id, o_id }))?;
        }
    }
    Ok(())
}

/// Every row of the initial database at `scale` (items, then each warehouse), in memory.
/// For tests and small scales.
#[cfg(test)]
pub fn generate_all(scale: &Scale, seed: u64, now: i64) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut sink = |row: Row| {
        rows.push(row);
        Ok(())
    };
    generate_items(scale, seed, &mut sink).expect("the sink never fails");
    for w_id in 1..=scale.warehouses {
        generate_warehouse(scale, w_id, seed, now, &mut sink).expect("the sink never fails");
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standard_warehouse_has_the_cardinalities_of_clause_4_3() {
        let scale = Scale::standard(1);
        let mut counts = [0u64; 9];
        let mut sink = |row: Row| {
            let index = match row {
                Row::Item(_) => 0,
                Row::Warehouse(_) => 1,
                Row::Stock(_) => 2,
                Row::District(_) => 3,
                Row::Customer(_) => 4,
                Row::History(_) => 5,
                Row::Order(_) => 6,
                Row::NewOrder(_) => 7,
                Row::OrderLine(_) => 8,
            };
            counts[index] += 1;
            Ok(())
        };
        generate_items(&scale, 1, &mut sink).unwrap();
        generate_warehouse(&scale, 1, 1, 0, &mut sink).unwrap();
        assert_eq!(
            counts[..8],
            [100_000, 1, 100_000, 10, 30_000, 30_000, 30_000, 9_000]
        );
        // 5..=15 lines per order: about 10 per order.
        assert!((290_000..310_000).contains(&counts[8]), "{}", counts[8]);
    }

    #[test]
    fn the_first_thousand_customers_take_every_last_name_once() {
        let scale = Scale::standard(1);
        let mut names = std::collections::BTreeSet::new();
        let mut sink = |row: Row| {
            if let Row::Customer(customer) = row {
                if customer.d_id == 1 && customer.c_id <= 1000 {
                    names.insert(customer.last);
                }
            }
            Ok(())
        };
        generate_warehouse(&scale, 1, 5, 0, &mut sink).unwrap();
        assert_eq!(names.len(), 1000);
    }
}
