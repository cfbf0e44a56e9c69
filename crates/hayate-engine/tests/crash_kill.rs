//! A real `kill -9` of a process under concurrent load, repeated on the same database.
//!
//! 1. The test re-executes its own binary as a child (`HAYATE_KILL_CHILD=<dir>`). The child
//!    opens the on-disk database with the default I/O backend and runs writer threads; each
//!    commit inserts `KEYS_PER_COMMIT` new keys `(thread, seq, i)` with values derived from the
//!    key and sets the thread's counter row to `seq`. After a commit returns Ok the child prints
//!    `ack <thread> <seq>` and flushes.
//! 2. The parent kills the child with SIGKILL at a seeded random moment, reopens the database
//!    in-process and checks: every acknowledged commit is there with exact values; each
//!    counter is at least the last acknowledged seq; the keys are exactly those of seqs up to
//!    the counter (no commit half there, none beyond the counter); `check()` passes.
//! 3. The child restarts on the same directory and continues; repeat.
//!
//! `HAYATE_KILL_SEED` picks the seed (printed), `HAYATE_KILL_CYCLES` the number of kills.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use hayate_engine::{BufferSize, Database, DatabaseConfig, TreeId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

// The test's path in the crate's one test binary (tests/main.rs).
const TEST_NAME: &str = "crash_kill::kill_nine_under_load";
const CHILD_ENV: &str = "HAYATE_KILL_CHILD";
const WRITER_THREADS: u32 = 4;
const KEYS_PER_COMMIT: u32 = 3;
const TABLE: &str = "rows";
const COUNTERS: &str = "counters";

fn config() -> DatabaseConfig {
    // Checkpoints and page write-back happen while the child runs, so kills land in them too.
    DatabaseConfig {
        buffer_size: BufferSize::Bytes(2 << 20),
        checkpoint_log_bytes: 512 << 10,
        checkpoint_interval: Duration::from_millis(100),
        ..DatabaseConfig::default()
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
}

fn row_key(thread: u32, seq: u64, index: u32) -> Vec<u8> {
    format!("t{thread}-s{seq:010}-i{index}").into_bytes()
}

fn counter_key(thread: u32) -> Vec<u8> {
    format!("counter-{thread}").into_bytes()
}

/// The value stored under `key`: a length and filler derived from the key alone.
fn row_value(key: &[u8]) -> Vec<u8> {
    let hash = key.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, &byte| {
        (hash ^ byte as u64).wrapping_mul(0x100_0000_01b3)
    });
    let len = 16 + (hash % 1500) as usize;
    let mut value = key.to_vec();
    value.resize(len, (hash >> 32) as u8);
    value
}

fn open_tables(db: &Database) -> (TreeId, TreeId) {
    let table = db.table(TABLE).or_else(|_| db.create_table(TABLE));
    let counters = db.table(COUNTERS).or_else(|_| db.create_table(COUNTERS));
    (table.unwrap(), counters.unwrap())
}

fn read_counter(db: &Database, counters: TreeId, thread: u32) -> u64 {
    let txn = db.begin_read_only();
    txn.get(counters, &counter_key(thread))
        .unwrap()
        .map_or(0, |raw| {
            u64::from_le_bytes(raw.try_into().expect("8-byte counter"))
        })
}

/// The child: writes until killed.
fn run_child(dir: &Path) -> ! {
    let db = Database::open(dir, config()).expect("child open");
    let (table, counters) = open_tables(&db);
    println!("ready");
    std::io::stdout().flush().unwrap();
    let threads: Vec<_> = (0..WRITER_THREADS)
        .map(|thread| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut seq = read_counter(&db, counters, thread);
                loop {
                    seq += 1;
                    let mut txn = db.begin();
                    for index in 0..KEYS_PER_COMMIT {
                        let key = row_key(thread, seq, index);
                        txn.insert(table, &key, &row_value(&key)).unwrap();
                    }
                    txn.put(counters, &counter_key(thread), &seq.to_le_bytes())
                        .unwrap();
                    txn.commit().expect("commit");
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {thread} {seq}").unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        let _ = thread.join();
    }
    panic!("writer threads ended");
}

/// Runs one child until the kill; returns the highest acknowledged seq per thread.
fn run_and_kill(dir: &Path, delay: Duration) -> HashMap<u32, u64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().unwrap();
    let (ready_sender, ready_receiver) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acked: HashMap<u32, u64> = HashMap::new();
        let mut ready = Some(ready_sender);
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // The harness prints "test <name> ... " before the child's first line.
            if line.ends_with("ready") {
                if let Some(sender) = ready.take() {
                    let _ = sender.send(());
                }
                continue;
            }
            let mut parts = line.split_whitespace();
            if parts.next() != Some("ack") {
                continue;
            }
            let thread: u32 = parts.next().unwrap().parse().unwrap();
            let seq: u64 = parts.next().unwrap().parse().unwrap();
            let last = acked.entry(thread).or_insert(0);
            assert!(seq > *last, "thread {thread} acked {seq} after {last}");
            *last = seq;
        }
        acked
    });
    // The clock starts when the child has opened (recovered) the database and begins writing.
    let _ = ready_receiver.recv_timeout(Duration::from_secs(60));
    std::thread::sleep(delay);
    child.kill().expect("SIGKILL the child");
    let status = child.wait().unwrap();
    assert!(!status.success(), "child ended on its own: {status}");
    reader.join().unwrap()
}

/// Reopens the database and checks it against the acknowledged seqs.
fn verify(dir: &Path, acked: &HashMap<u32, u64>, cycle: u64) -> BTreeMap<u32, u64> {
    let db = Database::open(dir, config()).expect("reopen after kill");
    eprintln!("cycle {cycle}: {}", db.recovery_report());
    let (table, counters) = open_tables(&db);
    let mut counter_values = BTreeMap::new();
    for thread in 0..WRITER_THREADS {
        let counter = read_counter(&db, counters, thread);
        let last_acked = acked.get(&thread).copied().unwrap_or(0);
        assert!(
            counter >= last_acked,
            "cycle {cycle}: thread {thread} counter {counter} < acknowledged seq {last_acked}"
        );
        counter_values.insert(thread, counter);
    }
    let txn = db.begin_read_only();
    for (&thread, &counter) in &counter_values {
        for seq in 1..=counter {
            for index in 0..KEYS_PER_COMMIT {
                let key = row_key(thread, seq, index);
                let found = txn.get(table, &key).unwrap();
                assert!(
                    found.as_deref() == Some(&row_value(&key)[..]),
                    "cycle {cycle}: thread {thread} seq {seq} key {index} is {} (counter {counter})",
                    if found.is_some() { "wrong" } else { "missing" }
                );
            }
        }
    }
    // Nothing beyond the counters: no commit is half there, and none without its counter.
    let rows = txn
        .scan(
            table,
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
        )
        .unwrap()
        .count() as u64;
    let expected: u64 = counter_values.values().sum::<u64>() * KEYS_PER_COMMIT as u64;
    assert_eq!(rows, expected, "cycle {cycle}: rows beyond the counters");
    drop(txn);
    db.check()
        .unwrap_or_else(|error| panic!("cycle {cycle}: check failed: {error}"));
    drop(db); // no close: the next child recovers from the log again
    counter_values
}

#[test]
fn kill_nine_under_load() {
    if let Some(dir) = std::env::var_os(CHILD_ENV) {
        run_child(Path::new(&dir));
    }
    let seed = env_u64("HAYATE_KILL_SEED").unwrap_or(0x4b11);
    let cycles = env_u64("HAYATE_KILL_CYCLES").unwrap_or(5);
    eprintln!("kill_nine_under_load: seed {seed} (HAYATE_KILL_SEED), {cycles} cycles");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut total_acked = 0;
    let mut previous: BTreeMap<u32, u64> = BTreeMap::new();
    for cycle in 0..cycles {
        let delay = Duration::from_millis(rng.gen_range(50..=500));
        let acked = run_and_kill(dir.path(), delay);
        let acks: u64 = acked
            .iter()
            .map(|(thread, seq)| seq - previous.get(thread).copied().unwrap_or(0))
            .sum();
        total_acked += acks;
        let counters = verify(dir.path(), &acked, cycle);
        eprintln!(
            "cycle {cycle}: killed after {delay:?}, {acks} commits acked, counters {counters:?}"
        );
        for (thread, &counter) in &counters {
            assert!(
                counter >= previous.get(thread).copied().unwrap_or(0),
                "cycle {cycle}: thread {thread} went back"
            );
        }
        previous = counters;
    }
    assert!(total_acked > 0, "no commit was ever acknowledged");
}
