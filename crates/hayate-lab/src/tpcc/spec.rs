//! TPC-C revision 5.11: the sizes of the initial database and the random functions of
//! clause 2.1.6 and 4.3.2, shared by the loader, the terminals and the checker.
//!
//! Money is kept in cents (`i64`) and rates (tax, discount) in ten-thousandths, so that every
//! consistency condition compares exact integers on every engine.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Districts per warehouse (fixed by the specification).
pub const DISTRICTS_PER_WAREHOUSE: u32 = 10;
/// Initial W_YTD (300,000.00) in cents.
pub const WAREHOUSE_YTD_INITIAL: i64 = 30_000_000;
/// Initial D_YTD (30,000.00) in cents.
pub const DISTRICT_YTD_INITIAL: i64 = 3_000_000;
/// Initial C_BALANCE (-10.00) in cents.
pub const CUSTOMER_BALANCE_INITIAL: i64 = -1_000;
/// Initial C_YTD_PAYMENT and H_AMOUNT (10.00) in cents.
pub const CUSTOMER_YTD_PAYMENT_INITIAL: i64 = 1_000;
/// C_CREDIT_LIM (50,000.00) in cents.
pub const CUSTOMER_CREDIT_LIMIT: i64 = 5_000_000;

/// The NURand constant C for C_LAST when loading; the run uses `C_LAST_RUN` (their difference
/// must lie in 65..=119 and not be 96 or 112, clause 2.1.6.1).
pub const C_LAST_LOAD: u64 = 157;
pub const C_LAST_RUN: u64 = 223;
/// The NURand constants for C_ID and OL_I_ID (any value in range, clause 2.1.6).
pub const C_ID: u64 = 259;
pub const C_OL_I_ID: u64 = 7_911;

/// The sizes of the initial database. `Scale::standard()` is the specification's; smaller
/// scales exist for the checker's own tests only (they are not TPC-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    pub warehouses: u32,
    /// Rows of ITEM (100,000).
    pub items: u32,
    /// Customers per district (3,000).
    pub customers_per_district: u32,
    /// Orders per district (3,000); the last 30% (O_ID >= `first_new_order()`) are undelivered.
    pub orders_per_district: u32,
}

impl Scale {
    pub fn standard(warehouses: u32) -> Scale {
        Scale {
            warehouses,
            items: 100_000,
            customers_per_district: 3_000,
            orders_per_district: 3_000,
        }
    }

    /// The first O_ID with a NEW-ORDER row after loading (2,101).
    pub fn first_new_order(&self) -> u32 {
        self.orders_per_district * 7 / 10 + 1
    }

    /// Rows of the initial database, all tables.
    pub fn rows(&self) -> u64 {
        let districts = self.districts() as u64;
        let orders = districts * self.orders_per_district as u64;
        self.items as u64
            + self.warehouses as u64 * (1 + DISTRICTS_PER_WAREHOUSE as u64 + self.items as u64)
            + districts * self.customers_per_district as u64 * 2 // customers and history
            + orders
            + districts * (self.orders_per_district - self.first_new_order() + 1) as u64
            + orders * 10 // order lines: 5..=15 per order, 10 on average
    }

    pub fn districts(&self) -> u32 {
        self.warehouses * DISTRICTS_PER_WAREHOUSE
    }

    /// Bytes of table data of the initial database by the specification's row sizes
    /// (clause 1.2): what buffer percentages refer to, the same for every engine.
    pub fn data_bytes(&self) -> u64 {
        let districts = self.districts() as u64;
        let customers = districts * self.customers_per_district as u64;
        let orders = districts * self.orders_per_district as u64;
        let new_orders = districts * (self.orders_per_district - self.first_new_order() + 1) as u64;
        self.items as u64 * 82
            + self.warehouses as u64 * (89 + self.items as u64 * 306)
            + districts * 95
            + customers * (655 + 46)
            + orders * (24 + 10 * 54)
            + new_orders * 8
    }
}

/// The random functions of the specification, over a fast seeded generator.
pub struct TpccRandom {
    rng: SmallRng,
}

impl TpccRandom {
    pub fn new(seed: u64) -> TpccRandom {
        TpccRandom {
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// Uniform in `low..=high`.
    pub fn uniform(&mut self, low: u64, high: u64) -> u64 {
        self.rng.gen_range(low..=high)
    }

    pub fn uniform_u32(&mut self, low: u32, high: u32) -> u32 {
        self.rng.gen_range(low..=high)
    }

    /// NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x.
    pub fn nurand(&mut self, a: u64, c: u64, low: u64, high: u64) -> u64 {
        (((self.uniform(0, a) | self.uniform(low, high)) + c) % (high - low + 1)) + low
    }

    /// A customer id by NURand(1023, 1, customers) (clause 2.1.6).
    pub fn customer_id(&mut self, scale: &Scale) -> u32 {
        let customers = scale.customers_per_district as u64;
        if customers < 1024 {
            return self.uniform_u32(1, scale.customers_per_district);
        }
        self.nurand(1023, C_ID, 1, customers) as u32
    }

    /// An item id by NURand(8191, 1, items).
    pub fn item_id(&mut self, scale: &Scale) -> u32 {
        let items = scale.items as u64;
        if items < 8192 {
            return self.uniform_u32(1, scale.items);
        }
        self.nurand(8191, C_OL_I_ID, 1, items) as u32
    }

    /// A last name for a run-time lookup: NURand(255, 0, 999) with the run's constant,
    /// limited to the names the scale loaded.
    pub fn last_name_for_run(&mut self, scale: &Scale) -> String {
        let names = scale.customers_per_district.min(1000) as u64;
        let number = if names < 1000 {
            self.uniform(0, names - 1)
        } else {
            self.nurand(255, C_LAST_RUN, 0, 999)
        };
        last_name(number as u32)
    }

    /// A string of `low..=high` random alphanumeric characters (a-string, clause 4.3.2.2).
    pub fn a_string(&mut self, low: usize, high: usize) -> String {
        const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let length = self.rng.gen_range(low..=high);
        (0..length)
            .map(|_| CHARS[self.rng.gen_range(0..CHARS.len())] as char)
            .collect()
    }

    /// A string of `low..=high` random digits (n-string).
    pub fn n_string(&mut self, low: usize, high: usize) -> String {
        let length = self.rng.gen_range(low..=high);
        (0..length)
            .map(|_| (b'0' + self.rng.gen_range(0..10u8)) as char)
            .collect()
    }

    /// A zip code: 4 random digits then "11111" (clause 4.3.2.7).
    pub fn zip(&mut self) -> String {
        format!("{}11111", self.n_string(4, 4))
    }

    /// I_DATA / S_DATA: 26..=50 characters, 10% of them holding "ORIGINAL" at a random place.
    pub fn data_with_original(&mut self) -> String {
        let mut data = self.a_string(26, 50);
        if self.uniform(1, 10) == 1 {
            let at = self.rng.gen_range(0..=data.len() - 8);
            data.replace_range(at..at + 8, "ORIGINAL");
        }
        data
    }

    /// True with probability `percent`%.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.uniform(1, 100) <= percent
    }

    /// A random permutation of 1..=n.
    pub fn permutation(&mut self, n: u32) -> Vec<u32> {
        let mut values: Vec<u32> = (1..=n).collect();
        for i in (1..values.len()).rev() {
            let j = self.rng.gen_range(0..=i);
            values.swap(i, j);
        }
        values
    }
}

/// The last name of number `0..=999`: three syllables by its digits (clause 4.3.2.3).
pub fn last_name(number: u32) -> String {
    const SYLLABLES: [&str; 10] = [
        "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
    ];
    let number = number % 1000;
    let mut name = String::with_capacity(15);
    name.push_str(SYLLABLES[(number / 100) as usize]);
    name.push_str(SYLLABLES[(number / 10 % 10) as usize]);
    name.push_str(SYLLABLES[(number % 10) as usize]);
    name
}

/// Microseconds since the Unix epoch: the timestamps of every table.
pub fn now_micros() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_micros() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_names_follow_the_syllable_table() {
        assert_eq!(last_name(0), "BARBARBAR");
        assert_eq!(last_name(371), "PRICALLYOUGHT");
        assert_eq!(last_name(999), "EINGEINGEING");
    }

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut random = TpccRandom::new(7);
        let mut counts = vec![0u32; 3001];
        for _ in 0..300_000 {
            let id = random.nurand(1023, C_ID, 1, 3000);
            assert!((1..=3000).contains(&id));
            counts[id as usize] += 1;
        }
        // Uniform would give 100 each; NURand makes some ids several times as frequent.
        let max = *counts.iter().max().unwrap();
        let min = *counts[1..].iter().min().unwrap();
        assert!(max > 3 * min, "max {max} min {min}");
    }

    #[test]
    fn run_constant_differs_from_load_constant_as_required() {
        let delta = C_LAST_RUN - C_LAST_LOAD;
        assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
    }

    #[test]
    fn original_appears_in_about_a_tenth_of_data() {
        let mut random = TpccRandom::new(3);
        let with = (0..10_000)
            .filter(|_| random.data_with_original().contains("ORIGINAL"))
            .count();
        assert!((700..1300).contains(&with), "{with}");
    }

    #[test]
    fn the_standard_scale_matches_clause_4_3() {
        let scale = Scale::standard(1);
        assert_eq!(scale.first_new_order(), 2101);
        // About 500k rows and 77 MB of table data per warehouse.
        assert!(
            (500_000..600_000).contains(&scale.rows()),
            "{}",
            scale.rows()
        );
        let mb = scale.data_bytes() / 1_000_000;
        assert!((60..90).contains(&mb), "{mb}");
    }
}
