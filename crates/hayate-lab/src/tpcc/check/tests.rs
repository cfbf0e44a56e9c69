//! The checker must pass on a correct database and fail on each kind of damage, one test per
//! condition. Data comes from the real generator at a small scale.

use super::*;
use crate::tpcc::rows::generate_all;

fn small() -> Scale {
    Scale {
        warehouses: 2,
        items: 200,
        customers_per_district: 30,
        orders_per_district: 30,
    }
}

fn loaded() -> CheckData {
    CheckData::from_rows(&generate_all(&small(), 11, 1_000))
}

fn failing(data: &CheckData, which: Conditions) -> Vec<u32> {
    check(data, &small(), which)
        .into_iter()
        .filter(|result| !result.passed())
        .map(|result| result.number)
        .collect()
}

fn all() -> Conditions {
    Conditions::All { just_loaded: true }
}

/// A correct Payment of `amount` by customer (w, d, c) to its own district.
fn pay(data: &mut CheckData, (w_id, d_id, c_id): (u32, u32, u32), amount: i64) {
    data.warehouses
        .iter_mut()
        .find(|row| row.0 == w_id)
        .unwrap()
        .1 += amount;
    let district = data.districts.iter_mut();
    district
        .filter(|row| (row.w_id, row.d_id) == (w_id, d_id))
        .for_each(|row| row.ytd += amount);
    let customer = data
        .customers
        .iter_mut()
        .find(|row| (row.w_id, row.d_id, row.c_id) == (w_id, d_id, c_id))
        .unwrap();
    customer.balance -= amount;
    customer.ytd_payment += amount;
    data.history.push(HistoryCheck {
        c_w_id: w_id,
        c_d_id: d_id,
        c_id,
        w_id,
        d_id,
        amount,
    });
}

/// A correct New-Order of `lines` lines for customer c of district (w, d).
fn order(data: &mut CheckData, (w_id, d_id): (u32, u32), c_id: u32, lines: u32) {
    let district = data
        .districts
        .iter_mut()
        .find(|row| (row.w_id, row.d_id) == (w_id, d_id))
        .unwrap();
    let o_id = district.next_o_id;
    district.next_o_id += 1;
    data.orders.push(OrderCheck {
        w_id,
        d_id,
        o_id,
        c_id,
        carrier_id: None,
        ol_cnt: lines,
    });
    data.new_orders.push(NewOrder { w_id, d_id, o_id });
    for number in 1..=lines {
        data.order_lines.push(OrderLineCheck {
            w_id,
            d_id,
            o_id,
            number,
            delivered: false,
            amount: 100 * number as i64,
        });
    }
}

/// A correct Delivery of the oldest undelivered order of district (w, d).
fn deliver(data: &mut CheckData, (w_id, d_id): (u32, u32)) {
    let (index, oldest) = data
        .new_orders
        .iter()
        .enumerate()
        .filter(|(_, row)| (row.w_id, row.d_id) == (w_id, d_id))
        .min_by_key(|(_, row)| row.o_id)
        .map(|(index, row)| (index, row.o_id))
        .unwrap();
    data.new_orders.remove(index);
    let order = data
        .orders
        .iter_mut()
        .find(|row| (row.w_id, row.d_id, row.o_id) == (w_id, d_id, oldest))
        .unwrap();
    order.carrier_id = Some(3);
    let c_id = order.c_id;
    let mut total = 0;
    for line in data.order_lines.iter_mut() {
        if (line.w_id, line.d_id, line.o_id) == (w_id, d_id, oldest) {
            line.delivered = true;
            total += line.amount;
        }
    }
    let customer = data
        .customers
        .iter_mut()
        .find(|row| (row.w_id, row.d_id, row.c_id) == (w_id, d_id, c_id))
        .unwrap();
    customer.balance += total;
}

#[test]
fn a_loaded_database_passes_every_condition() {
    let results = check(&loaded(), &small(), all());
    assert_eq!(results.len(), 12);
    for result in &results {
        assert!(result.passed(), "{result:?}");
        assert!(result.checked > 0, "{result:?}");
    }
}

#[test]
fn correct_transactions_keep_every_condition_but_eleven() {
    let mut data = loaded();
    pay(&mut data, (1, 2, 3), 12_345);
    order(&mut data, (2, 5), 7, 9);
    deliver(&mut data, (1, 4));
    deliver(&mut data, (2, 5));
    let later = Conditions::All { just_loaded: false };
    assert_eq!(failing(&data, later), Vec::<u32>::new());
    assert_eq!(
        check(&data, &small(), later).len(),
        11,
        "condition 11 is skipped"
    );
    // Deliveries change order counts minus new-order counts: 11 no longer holds, as expected.
    assert_eq!(failing(&data, all()), vec![11]);
}

#[test]
fn condition_1_fails_when_a_district_ytd_drifts_from_its_warehouse() {
    let mut data = loaded();
    data.warehouses[0].1 += 1;
    assert!(failing(&data, all()).contains(&1));
    assert!(failing(&data, Conditions::FirstFour).contains(&1));
}

#[test]
fn condition_2_fails_when_next_order_id_is_off() {
    let mut data = loaded();
    data.districts[3].next_o_id += 1;
    assert_eq!(failing(&data, all()), vec![2]);
}

#[test]
fn condition_3_fails_on_a_gap_in_new_orders() {
    let mut data = loaded();
    let middle = data
        .new_orders
        .iter()
        .position(|row| row.o_id == 25)
        .unwrap();
    data.new_orders.remove(middle);
    assert!(failing(&data, all()).contains(&3));
}

#[test]
fn condition_4_fails_when_an_order_line_is_lost() {
    let mut data = loaded();
    data.order_lines.pop();
    assert!(failing(&data, all()).contains(&4));
}

#[test]
fn condition_5_fails_when_a_queued_order_has_a_carrier() {
    let mut data = loaded();
    let order = data
        .orders
        .iter_mut()
        .find(|row| row.carrier_id.is_none())
        .unwrap();
    order.carrier_id = Some(1);
    assert!(failing(&data, all()).contains(&5));
}

#[test]
fn condition_6_fails_when_a_line_moves_to_another_order() {
    let mut data = loaded();
    // The district's total of lines stays the same (condition 4 holds), two orders are wrong.
    let first = data.order_lines[0];
    let other = data
        .order_lines
        .iter_mut()
        .find(|line| (line.w_id, line.d_id) == (first.w_id, first.d_id) && line.o_id != first.o_id)
        .unwrap();
    other.o_id = first.o_id;
    other.number = 99;
    assert_eq!(failing(&data, all()), vec![6]);
}

#[test]
fn condition_7_fails_when_a_delivered_line_looks_undelivered() {
    let mut data = loaded();
    // Delivered lines of the initial orders have amount 0: balances are unaffected.
    let line = data
        .order_lines
        .iter_mut()
        .find(|line| line.delivered)
        .unwrap();
    line.delivered = false;
    assert_eq!(failing(&data, all()), vec![7]);
}

#[test]
fn condition_8_fails_when_history_and_warehouse_disagree() {
    let mut data = loaded();
    // A payment recorded in HISTORY only (9 and 10 break with it; 8 must be among them).
    data.history[0].amount += 1;
    assert!(failing(&data, all()).contains(&8));
    // A warehouse whose W_YTD moved along with one district (1 holds, 8 and 9 do not).
    let mut data = loaded();
    data.warehouses[0].1 += 7;
    data.districts
        .iter_mut()
        .find(|row| row.w_id == data.warehouses[0].0)
        .unwrap()
        .ytd += 7;
    assert_eq!(failing(&data, all()), vec![8, 9]);
}

#[test]
fn condition_9_fails_when_history_points_at_another_district() {
    let mut data = loaded();
    let row = &mut data.history[0];
    row.d_id = row.d_id % 10 + 1;
    assert_eq!(failing(&data, all()), vec![9]);
}

#[test]
fn condition_10_fails_when_a_balance_moves_into_ytd_payment() {
    let mut data = loaded();
    data.customers[5].balance -= 1;
    data.customers[5].ytd_payment += 1;
    assert_eq!(failing(&data, all()), vec![10]);
}

#[test]
fn condition_11_fails_when_an_order_is_delivered() {
    let mut data = loaded();
    deliver(&mut data, (1, 1));
    assert_eq!(failing(&data, all()), vec![11]);
}

#[test]
fn condition_12_fails_when_ytd_payment_drifts() {
    let mut data = loaded();
    data.customers[9].ytd_payment += 100;
    assert_eq!(failing(&data, all()), vec![12]);
}

#[test]
fn failures_are_counted_and_described() {
    let mut data = loaded();
    data.districts[0].next_o_id = 1;
    data.districts[1].next_o_id = 5;
    let result = check(&data, &small(), all())
        .into_iter()
        .find(|result| result.number == 2)
        .unwrap();
    assert_eq!(result.failures, 2);
    assert_eq!(result.checked, 20);
    assert!(result.example.unwrap().contains("D_NEXT_O_ID 1"));
}
