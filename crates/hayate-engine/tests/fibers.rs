//! Transactions on fibers of one thread: page misses keep many reads in flight on the thread's
//! ring, and waits for another fiber of the same thread (a row lock, a page being loaded)
//! suspend instead of blocking the thread that fiber needs.

use std::cell::Cell;
use std::ops::Bound;
use std::time::{Duration, Instant};

use hayate_engine::fiber::{self, Wait};
use hayate_engine::{
    install_thread_ring, reap_thread_ring, BufferSize, Database, DatabaseConfig, SimConfig, SimIo,
    TreeId,
};

const ROWS: u32 = 4000;

fn value(id: u32) -> Vec<u8> {
    format!("row {id:06} ").repeat(20).into_bytes()
}

/// A database of `ROWS` rows of 240 bytes in a pool of 32 pages: nearly every read misses.
fn small_pool_database(dir: &std::path::Path) -> (Database, TreeId) {
    let config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(32 * 4096),
        ..DatabaseConfig::default()
    };
    let db = Database::open(dir, config).unwrap();
    let table = db.create_table("t").unwrap();
    let mut txn = db.begin();
    for id in 0..ROWS {
        txn.insert(table, &id.to_be_bytes(), &value(id)).unwrap();
    }
    txn.commit().unwrap();
    (db, table)
}

/// An empty table in a database on a simulated disk (whose reads can be slowed down), with
/// a pool of 32 pages.
fn simulated_disk_database() -> (std::sync::Arc<SimIo>, Database, TreeId) {
    let disk = std::sync::Arc::new(SimIo::new(SimConfig::default()));
    let config = DatabaseConfig {
        buffer_size: BufferSize::Bytes(32 * 4096),
        ..DatabaseConfig::default()
    };
    let db = Database::open_with_io(disk.clone(), config).unwrap();
    let table = db.create_table("t").unwrap();
    (disk, db, table)
}

fn reap(idle: fiber::Idle) {
    hayate_engine::reap_or_sleep(idle);
}

#[test]
fn misses_of_many_fibers_are_in_flight_together() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = small_pool_database(dir.path());
    install_thread_ring().unwrap();
    let db = &db;
    let fibers = 24u32;
    let works: Vec<Box<dyn FnOnce() -> u32 + '_>> = (0..fibers)
        .map(|fiber_index| {
            Box::new(move || {
                let txn = db.begin_read_only();
                let mut found = 0u32;
                for step in 0..60u32 {
                    let id = (fiber_index * 7919 + step * 104_729) % ROWS;
                    let got = txn.get(table, &id.to_be_bytes()).unwrap();
                    assert_eq!(got.as_deref(), Some(&value(id)[..]), "row {id}");
                    found += 1;
                }
                // A scan on a fiber releases its latches at every miss and starts again.
                let low = (fiber_index * 150).to_be_bytes();
                let high = (fiber_index * 150 + 100).to_be_bytes();
                let rows = txn
                    .scan(table, Bound::Included(&low[..]), Bound::Excluded(&high[..]))
                    .unwrap()
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                assert_eq!(rows.len(), 100);
                for (key, row) in rows {
                    let id = u32::from_be_bytes(key.try_into().unwrap());
                    assert_eq!(row, value(id));
                }
                found
            }) as Box<dyn FnOnce() -> u32>
        })
        .collect();
    let before = db.stats().buffer.misses;
    let (results, most_reads) = fiber::run_all(works, reap);
    assert_eq!(results, vec![60; fibers as usize]);
    assert!(
        db.stats().buffer.misses > before,
        "the pool is too small to hold the rows"
    );
    assert!(
        most_reads >= 4,
        "one thread kept only {most_reads} reads in flight at once"
    );
}

#[test]
fn a_row_lock_held_by_another_fiber_of_the_thread_suspends_the_waiter() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = small_pool_database(dir.path());
    install_thread_ring().unwrap();
    let db = &db;
    let order = Cell::new(Vec::new());
    let note = |what: &'static str| {
        let mut seen = order.take();
        seen.push(what);
        order.set(seen);
    };
    let key = 5u32.to_be_bytes();
    let holder: Box<dyn FnOnce() + '_> = Box::new(|| {
        let mut txn = db.begin();
        assert!(txn.update(table, &key, b"holder").unwrap());
        note("holder locked");
        // Let the other fiber run into the lock, several times.
        for _ in 0..5 {
            fiber::suspend(Wait::Yield);
        }
        note("holder commits");
        txn.commit().unwrap();
    });
    let waiter: Box<dyn FnOnce() + '_> = Box::new(|| {
        let mut txn = db.begin();
        // Its snapshot predates the holder's commit: once the lock is free, the update finds
        // a newer committed version (40001 in SQL), as it would had it blocked its thread.
        let updated = txn.update(table, &key, b"waiter");
        assert!(
            matches!(updated, Err(hayate_engine::Error::SerializationFailure)),
            "{updated:?}"
        );
        note("waiter answered");
    });
    let started = Instant::now();
    fiber::run_all(vec![holder, waiter], reap);
    assert_eq!(
        order.take(),
        vec!["holder locked", "holder commits", "waiter answered"]
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the waiter waited out the lock timeout instead of the holder's commit"
    );
    let txn = db.begin_read_only();
    assert_eq!(txn.get(table, &key).unwrap().unwrap(), b"holder");
}

#[test]
fn a_slow_simulated_read_delays_its_fiber_not_the_thread() {
    // The simulated disk adds 50 ms to every read; on a fiber the read suspends for that time.
    let (disk, db, table) = simulated_disk_database();
    let mut txn = db.begin();
    for id in 0..ROWS {
        txn.insert(table, &id.to_be_bytes(), &value(id)).unwrap();
    }
    txn.commit().unwrap();
    // Make the hot row resident, then slow the disk down.
    let hot = 1u32.to_be_bytes();
    db.begin_read_only().get(table, &hot).unwrap().unwrap();
    disk.set_read_latency(Some(Duration::from_millis(50)));
    let db = &db;
    let hot_reads = Cell::new(0u32);
    let slow_done = Cell::new(None::<u32>);
    let slow: Box<dyn FnOnce() + '_> = Box::new(|| {
        let txn = db.begin_read_only();
        let cold = (ROWS / 2).to_be_bytes();
        assert_eq!(txn.get(table, &cold).unwrap().unwrap(), value(ROWS / 2));
        slow_done.set(Some(hot_reads.get()));
    });
    let fast: Box<dyn FnOnce() + '_> = Box::new(|| {
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(40) {
            let txn = db.begin_read_only();
            assert_eq!(txn.get(table, &hot).unwrap().unwrap(), value(1));
            hot_reads.set(hot_reads.get() + 1);
            fiber::suspend(Wait::Yield);
        }
    });
    let started = Instant::now();
    fiber::run_all(vec![slow, fast], reap);
    assert!(started.elapsed() >= Duration::from_millis(50));
    let reads_before_slow_finished = slow_done.get().expect("the slow read finished");
    assert!(
        reads_before_slow_finished >= 10,
        "only {reads_before_slow_finished} resident reads ran during the slow read"
    );
}

#[test]
fn a_scan_on_a_fiber_reads_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = small_pool_database(dir.path());
    install_thread_ring().unwrap();
    let before = db.stats().buffer.pages_read;
    let mut fiber = fiber::Fiber::new(|| {
        let txn = db.begin_read_only();
        txn.scan(table, Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    });
    let mut read_waits = 0;
    let rows = loop {
        match fiber.resume() {
            fiber::Step::Done(rows) => break rows,
            fiber::Step::Wait(Wait::Io(_)) => {
                read_waits += 1;
                reap_thread_ring(true);
            }
            fiber::Step::Wait(_) => {}
        }
    };
    assert_eq!(rows.len(), ROWS as usize);
    for (key, row) in &rows {
        let id = u32::from_be_bytes(key.as_slice().try_into().unwrap());
        assert_eq!(row, &value(id));
    }
    let pages_read = db.stats().buffer.pages_read - before;
    assert!(pages_read >= 100, "the scan read only {pages_read} pages");
    assert!(
        read_waits * 3 < pages_read,
        "{read_waits} waits for {pages_read} pages: the scan read one leaf at a time"
    );
}

#[test]
fn read_ahead_stays_within_the_scan_range() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = small_pool_database(dir.path());
    install_thread_ring().unwrap();
    let before = db.stats().buffer.pages_read;
    let (low, high) = (1000u32.to_be_bytes(), 1060u32.to_be_bytes());
    let work: Box<dyn FnOnce() -> usize + '_> = Box::new(|| {
        let txn = db.begin_read_only();
        txn.scan(table, Bound::Included(&low[..]), Bound::Excluded(&high[..]))
            .unwrap()
            .count()
    });
    let (rows, _) = fiber::run_all(vec![work], reap);
    assert_eq!(rows, vec![60]);
    // 60 rows of about 250 bytes fill 4 or 5 leaves; reading ahead 2, 4, 8 leaves without
    // looking at the range would read about 15.
    let pages_read = db.stats().buffer.pages_read - before;
    assert!(
        (4..=8).contains(&pages_read),
        "a 60-row range read {pages_read} pages"
    );
}

/// Resumes `fiber` once and returns the wake-up it then waits for (a wait of another kind
/// fails the test: a polled wait would come back as `Yield` or `Until`).
fn suspended_on_wakeup<R>(fiber: &mut fiber::Fiber<'_, R>) -> fiber::Wakeup {
    match fiber.resume() {
        fiber::Step::Wait(Wait::Wakeup(wakeup, _)) => wakeup,
        fiber::Step::Wait(other) => panic!("the fiber waits by {other:?}, not for a wake-up"),
        fiber::Step::Done(_) => panic!("the fiber did not wait"),
    }
}

#[test]
fn a_row_lock_waiter_sleeps_until_the_release_wakes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = small_pool_database(dir.path());
    let key = 9u32.to_be_bytes();
    let mut holder = db.begin();
    assert!(holder.update(table, &key, b"holder").unwrap());
    let mut waiter = fiber::Fiber::new(|| {
        let mut txn = db.begin();
        txn.update(table, &key, b"waiter")
    });
    let wakeup = suspended_on_wakeup(&mut waiter);
    assert!(!wakeup.fired(), "woken while the lock is still held");
    holder.commit().unwrap();
    assert!(wakeup.fired(), "the release did not wake the waiter");
    // Its snapshot predates the holder's commit: the newer version refuses the update.
    match waiter.resume() {
        fiber::Step::Done(result) => assert!(
            matches!(result, Err(hayate_engine::Error::SerializationFailure)),
            "{result:?}"
        ),
        fiber::Step::Wait(wait) => panic!("the waiter waits again ({wait:?})"),
    }
}

#[test]
fn a_fiber_waiting_for_the_log_is_woken_by_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let (db, table) = small_pool_database(dir.path());
    let key = 11u32.to_be_bytes();
    let mut committer = fiber::Fiber::new(|| {
        let mut txn = db.begin();
        assert!(txn.update(table, &key, b"durable").unwrap());
        db.commit_on_fiber(txn)
    });
    let committed = match committer.resume() {
        // The flush may have ended before the fiber looked: then it never waited.
        fiber::Step::Done(result) => result,
        fiber::Step::Wait(Wait::Wakeup(wakeup, _)) => {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !wakeup.fired() {
                assert!(Instant::now() < deadline, "the flush never woke the fiber");
                std::thread::sleep(Duration::from_millis(1));
            }
            match committer.resume() {
                fiber::Step::Done(result) => result,
                fiber::Step::Wait(wait) => panic!("woken before its commit was durable: {wait:?}"),
            }
        }
        fiber::Step::Wait(other) => panic!("the commit waits by {other:?}, not for a wake-up"),
    };
    assert!(committed.unwrap().is_some());
    assert_eq!(
        db.begin_read_only().get(table, &key).unwrap().as_deref(),
        Some(&b"durable"[..])
    );
}

/// How a reader reads the wide row in `a_fiber_reading_an_overflow_chain_holds_no_latch`.
#[derive(Clone, Copy, Debug)]
enum ChainRead {
    Get,
    GetSorted,
    Scan,
    ScanReverse,
}

/// A reader on a fiber whose row's overflow chain is not resident lets go of the leaf while the
/// chain is read (50 ms a page here): a writer of a neighbouring row of the same leaf, on
/// another fiber of the thread, commits meanwhile instead of waiting for the reader's latch.
#[test]
fn a_fiber_reading_an_overflow_chain_holds_no_latch() {
    for read in [
        ChainRead::Get,
        ChainRead::GetSorted,
        ChainRead::Scan,
        ChainRead::ScanReverse,
    ] {
        reader_of_a_chain_lets_a_writer_through(read);
    }
}

fn reader_of_a_chain_lets_a_writer_through(read: ChainRead) {
    let (disk, db, table) = simulated_disk_database();
    // A 20 KiB row among rows of 240 bytes: its value is an overflow chain of 5 pages.
    let wide_id = ROWS / 2;
    let wide: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    let mut txn = db.begin();
    for id in 0..ROWS {
        let value = if id == wide_id {
            wide.clone()
        } else {
            value(id)
        };
        txn.insert(table, &id.to_be_bytes(), &value).unwrap();
    }
    txn.commit().unwrap();
    // Every other page is evicted by reading the rest of the table; then the rows next to the
    // wide one (its leaf, and the leaf's path) are read again, without the chain.
    let reader = db.begin_read_only();
    for id in (0..ROWS).filter(|id| id.abs_diff(wide_id) > 40) {
        reader.get(table, &id.to_be_bytes()).unwrap().unwrap();
    }
    let neighbours = [wide_id - 1, wide_id + 1];
    for id in neighbours {
        reader.get(table, &id.to_be_bytes()).unwrap().unwrap();
    }
    drop(reader);
    disk.set_read_latency(Some(Duration::from_millis(50)));
    let db = &db;
    let order = std::cell::RefCell::new(Vec::new());
    let order = &order;
    let wide = &wide;
    let reading: Box<dyn FnOnce() + '_> = Box::new(move || {
        let txn = db.begin_read_only();
        let key = wide_id.to_be_bytes();
        let got = match read {
            ChainRead::Get => txn.get(table, &key).unwrap(),
            ChainRead::GetSorted => txn.get_sorted(table, &[key.to_vec()]).unwrap().remove(0),
            ChainRead::Scan | ChainRead::ScanReverse => {
                let (low, high) = (Bound::Included(&key[..]), Bound::Included(&key[..]));
                let mut scan = match read {
                    ChainRead::Scan => txn.scan(table, low, high).unwrap(),
                    _ => txn.scan_reverse(table, low, high).unwrap(),
                };
                let row = scan.next_row().unwrap().map(|(_, value)| value);
                assert!(scan.next_row().unwrap().is_none());
                row
            }
        };
        assert!(got.as_ref() == Some(wide), "{read:?}: the wide row");
        order.borrow_mut().push("reader");
    });
    let writing: Box<dyn FnOnce() + '_> = Box::new(move || {
        // Let the reader start (and find the chain missing) first.
        fiber::suspend(Wait::Yield);
        let mut txn = db.begin();
        for id in neighbours {
            assert!(txn.update(table, &id.to_be_bytes(), b"written").unwrap());
        }
        db.commit_on_fiber(txn).unwrap();
        order.borrow_mut().push("writer");
    });
    fiber::run_all(vec![reading, writing], reap);
    assert_eq!(
        *order.borrow(),
        ["writer", "reader"],
        "{read:?}: the writer waited for the reader's chain"
    );
    for id in neighbours {
        let row = db.begin_read_only().get(table, &id.to_be_bytes()).unwrap();
        assert_eq!(row.as_deref(), Some(&b"written"[..]));
    }
}
