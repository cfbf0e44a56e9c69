//! How a primary waits for its standby (`ReplicationPolicy`), with the engine, the primary
//! and a standby in one process over TCP on 127.0.0.1: strict by default; with `alone_after`
//! commits are acknowledged alone after that wait, and once the standby is back and holds
//! every one of them, commits wait for it again; while alone, the log kept for the standby is
//! capped, after which it must be seeded again. Replication connections prove the secret,
//! and with TLS carry the log encrypted to a standby that checked the primary's certificate.

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hayate_engine::{Database, DatabaseConfig, TreeId, WalConfig};
use hayate_server::replication::{
    seed_from, Identity, Primary, ReplicationAuth, ReplicationPolicy, ReplicationSecret,
    ReplicationTls, Standby, StandbyConfig, StandbyState,
};
use hayate_sql::Cluster;

fn open(dir: &Path) -> Database {
    Database::open(dir, config()).unwrap()
}

fn config() -> DatabaseConfig {
    DatabaseConfig {
        wal: WalConfig {
            segment_size_bytes: 256 << 10,
            buffer_size_bytes: 64 << 10,
            ..WalConfig::default()
        },
        buffer_size: hayate_engine::BufferSize::Bytes(16 << 20),
        ..DatabaseConfig::default()
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// A primary on `dir/a` (with a table, and the SQL catalog) and a copy of it in `dir/b` taken
/// while it was closed.
fn seeded(dir: &Path) -> (Database, TreeId) {
    let (a, b) = (dir.join("a"), dir.join("b"));
    let db = open(&a);
    let tree = db.create_table("t").unwrap();
    drop(Cluster::open(db.clone()).unwrap());
    db.close().unwrap();
    copy_dir(&a, &b);
    let db = open(&a);
    (db, tree)
}

fn start_primary(db: &Database, policy: ReplicationPolicy) -> Arc<Primary> {
    start_primary_with(db, policy, ReplicationAuth::default())
}

fn start_primary_with(
    db: &Database,
    policy: ReplicationPolicy,
    auth: ReplicationAuth,
) -> Arc<Primary> {
    let identity = Identity::new_system();
    let address = "127.0.0.1:0".parse().unwrap();
    let primary = Primary::start(db.clone(), address, identity, None, auth).unwrap();
    primary.set_policy(policy);
    primary
}

fn start_standby(db: &Database, dir: &Path, primary: &Primary) -> Standby {
    start_standby_with(
        db,
        dir,
        &primary.address().to_string(),
        ReplicationAuth::default(),
    )
}

fn start_standby_with(db: &Database, dir: &Path, primary: &str, auth: ReplicationAuth) -> Standby {
    if !db.is_standby() {
        db.start_standby().unwrap();
    }
    let cluster = Cluster::open(db.clone()).unwrap();
    let config = StandbyConfig {
        primary: primary.to_string(),
        dir: dir.to_path_buf(),
        name: "b".into(),
        successor: None,
        auth,
        peer_timeout: hayate_server::replication::PEER_TIMEOUT_DEFAULT,
    };
    Standby::start(db.clone(), cluster, config).unwrap()
}

fn put(db: &Database, tree: TreeId, key: u64, value: &[u8]) -> hayate_engine::Result<()> {
    let mut txn = db.begin();
    txn.put(tree, &key.to_be_bytes(), value)?;
    txn.commit().map(|_| ())
}

fn has(db: &Database, tree: TreeId, key: u64) -> bool {
    db.begin_read_only()
        .get(tree, &key.to_be_bytes())
        .unwrap()
        .is_some()
}

/// Ends the test binary if a test runs past `limit`: a commit that waits for a standby
/// forever (the policy not applied) fails instead of blocking CI.
fn watchdog(test: &'static str, limit: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(limit);
        eprintln!("{test}: still running after {limit:?}: stopping the test binary");
        std::process::exit(101);
    });
}

fn eventually(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_primary_acknowledges_alone_after_the_wait_and_waits_again_once_its_standby_is_back() {
    watchdog("acknowledging alone", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let (db, tree) = seeded(dir.path());
    let wait = Duration::from_millis(300);
    let primary = start_primary(
        &db,
        ReplicationPolicy {
            alone_after: Some(wait),
            max_slot_bytes: None,
            ..ReplicationPolicy::default()
        },
    );
    let standby_db = open(&dir.path().join("b"));
    let standby = start_standby(&standby_db, &dir.path().join("b"), &primary);
    put(&db, tree, 1, b"with the standby").unwrap();
    assert_eq!(primary.sync_standby().as_deref(), Some("b"));
    assert!(!primary.acknowledging_alone());

    // The standby goes: the next commit waits for it, then is acknowledged alone.
    standby.stop();
    let started = Instant::now();
    put(&db, tree, 2, b"alone").unwrap();
    assert!(
        started.elapsed() >= wait,
        "acknowledged after {:?}",
        started.elapsed()
    );
    assert!(primary.acknowledging_alone());
    assert_eq!(
        primary.sync_standby(),
        None,
        "the sync set no longer names it"
    );
    for key in 3..50 {
        put(&db, tree, key, b"alone").unwrap();
    }

    // It comes back, catches up, and counts again once it holds every commit acknowledged
    // alone.
    let standby = start_standby(&standby_db, &dir.path().join("b"), &primary);
    eventually("the standby to count again", || {
        primary.sync_standby().as_deref() == Some("b") && !primary.acknowledging_alone()
    });
    eventually("the standby to apply what was acknowledged alone", || {
        (1..50).all(|key| has(&standby_db, tree, key))
    });
    put(&db, tree, 50, b"with the standby again").unwrap();

    // Waiting again: gone once more, a commit waits before it is acknowledged alone.
    standby.stop();
    let started = Instant::now();
    put(&db, tree, 51, b"alone again").unwrap();
    assert!(
        started.elapsed() >= wait,
        "acknowledged after {:?}",
        started.elapsed()
    );
    primary.stop();
}

/// Commits `bytes` of rows alone with no standby, checkpoints, and says whether the log from
/// where the standby left off is still there.
fn log_kept_for_an_absent_standby(max_slot_bytes: Option<u64>) -> (bool, StandbyState) {
    let dir = tempfile::tempdir().unwrap();
    let (db, tree) = seeded(dir.path());
    let start = db.log_end_lsn();
    let primary = start_primary(
        &db,
        ReplicationPolicy {
            alone_after: Some(Duration::ZERO),
            max_slot_bytes,
            ..ReplicationPolicy::default()
        },
    );
    let row = vec![7u8; 3000];
    for key in 0..1_000 {
        put(&db, tree, key, &row).unwrap();
    }
    assert!(primary.acknowledging_alone());
    db.checkpoint().unwrap();
    let kept = db.read_log(start, start + 1).is_ok();
    // The standby, a copy from before those commits, asks for the log from `start`.
    let standby_db = open(&dir.path().join("b"));
    let standby = start_standby(&standby_db, &dir.path().join("b"), &primary);
    let deadline = Instant::now() + Duration::from_secs(5);
    while standby.state() == StandbyState::Following && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let state = standby.state();
    standby.stop();
    primary.stop();
    (kept, state)
}

#[test]
fn while_alone_the_log_kept_for_the_standby_is_capped() {
    watchdog("the slot cap", Duration::from_secs(120));
    let (kept, state) = log_kept_for_an_absent_standby(None);
    assert!(kept, "without a cap the slot keeps the log");
    assert_eq!(
        state,
        StandbyState::Following,
        "it catches up from the kept log"
    );
    let (kept, state) = log_kept_for_an_absent_standby(Some(256 << 10));
    assert!(!kept, "past the cap the log is released");
    assert!(
        matches!(state, StandbyState::NeedsSeed(_)),
        "the standby must be seeded again: {state:?}"
    );
}

#[test]
fn replication_connections_must_prove_the_primary_s_secret() {
    watchdog("the replication secret", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let (db, tree) = seeded(dir.path());
    let secret = ReplicationSecret::new(b"the right one");
    let auth = ReplicationAuth {
        secret: Some(secret),
        tls: None,
    };
    let primary = start_primary_with(&db, ReplicationPolicy::default(), auth.clone());
    let address = primary.address().to_string();
    for (name, wrong) in [
        ("c", Some(ReplicationSecret::new(b"a wrong one"))),
        ("d", None),
    ] {
        let wrong = ReplicationAuth {
            secret: wrong,
            tls: None,
        };
        let error = seed_from(&address, &dir.path().join(name), name, &wrong)
            .expect_err("a base backup without the secret");
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::PermissionDenied,
            "{error}"
        );
        assert!(
            error.to_string().contains("authentication failed"),
            "{error}"
        );
    }
    // A peer that begins the handshake and never finishes it holds up nobody else.
    let mut stalled = std::net::TcpStream::connect(&address).unwrap();
    std::io::Write::write_all(&mut stalled, b"P").unwrap();
    // A standby that knows it counts: a commit is acknowledged through it.
    let standby_db = open(&dir.path().join("b"));
    let standby = start_standby_with(&standby_db, &dir.path().join("b"), &address, auth);
    put(&db, tree, 1, b"through an authenticated standby").unwrap();
    assert_eq!(primary.sync_standby().as_deref(), Some("b"));
    drop(stalled);
    standby.stop();
    primary.stop();
}

/// TLS of a node trusting `ca` for its primary, presenting `certificate` as a primary.
fn replication_tls(ca: &Path, certificate: &Path, key: &Path) -> ReplicationTls {
    ReplicationTls {
        server: hayate_server::tls::load(certificate, key).unwrap(),
        client: hayate_server::tls::load_trusted(ca).unwrap(),
    }
}

/// A TCP relay to `target` on a port of its own, keeping a copy of every byte the target
/// sent (what anyone on the network would see of the primary's side).
fn eavesdropper(target: String) -> (String, Arc<parking_lot::Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let copy = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let (Ok(client), Ok(server)) = (client, TcpStream::connect(&target)) else {
                continue;
            };
            let pipe = |mut from: TcpStream, mut to: TcpStream, seen: Option<Arc<_>>| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16 * 1024];
                    while let Ok(read @ 1..) = from.read(&mut buf) {
                        if let Some(seen) = &seen {
                            let seen: &parking_lot::Mutex<Vec<u8>> = seen;
                            seen.lock().extend_from_slice(&buf[..read]);
                        }
                        if to.write_all(&buf[..read]).is_err() {
                            break;
                        }
                    }
                    let _ = to.shutdown(std::net::Shutdown::Both);
                })
            };
            pipe(
                client.try_clone().unwrap(),
                server.try_clone().unwrap(),
                None,
            );
            pipe(server, client, Some(copy.clone()));
        }
    });
    (address, seen)
}

#[test]
fn with_tls_the_log_travels_encrypted_to_a_standby_that_checked_the_primary() {
    watchdog("replication TLS", Duration::from_secs(120));
    let dir = tempfile::tempdir().unwrap();
    let (db, tree) = seeded(dir.path());
    let (ca, certificate, key) = common::certificates(dir.path(), "hayate");
    let (other_ca, _, _) = common::certificates(dir.path(), "other");
    let auth = ReplicationAuth {
        secret: Some(ReplicationSecret::new(b"shared")),
        tls: Some(replication_tls(&ca, &certificate, &key)),
    };
    let primary = start_primary_with(&db, ReplicationPolicy::default(), auth.clone());
    let address = primary.address().to_string();
    // A node without TLS, and one that does not trust the primary's certificate, get nothing.
    let plain = ReplicationAuth {
        tls: None,
        ..auth.clone()
    };
    let error = seed_from(&address, &dir.path().join("c"), "c", &plain)
        .expect_err("a plaintext connection to a TLS primary");
    assert!(
        !dir.path().join("c").join("control.hyt").exists(),
        "seeded through plaintext: {error}"
    );
    let distrusting = ReplicationAuth {
        tls: Some(replication_tls(&other_ca, &certificate, &key)),
        ..auth.clone()
    };
    let error = seed_from(&address, &dir.path().join("d"), "d", &distrusting)
        .expect_err("a primary whose certificate the node does not trust");
    assert!(error.to_string().contains("certificate"), "{error}");
    // Through a relay that keeps what the primary sent: the row is replicated (a commit is
    // acknowledged through the standby) and never seen in the clear.
    let address_direct = address.clone();
    let (relay, seen) = eavesdropper(address);
    let standby_db = open(&dir.path().join("b"));
    let standby = start_standby_with(&standby_db, &dir.path().join("b"), &relay, auth.clone());
    let secret_value = b"a value nobody on the wire may read".repeat(4);
    put(&db, tree, 7, &secret_value).unwrap();
    assert_eq!(primary.sync_standby().as_deref(), Some("b"));
    eventually("the row on the standby", || has(&standby_db, tree, 7));
    // Messages far larger than a TLS record, and than rustls's default send buffer (64 KiB).
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    put(&db, tree, 8, &large).unwrap();
    eventually("the large row on the standby", || has(&standby_db, tree, 8));
    // A node may trust the primary's certificate itself rather than its CA; its base backup
    // is sent in pieces of up to a megabyte.
    let pinned = ReplicationAuth {
        tls: Some(replication_tls(&certificate, &certificate, &key)),
        ..auth.clone()
    };
    seed_from(&address_direct, &dir.path().join("e"), "e", &pinned)
        .expect("seeded trusting the certificate");
    let seeded = open(&dir.path().join("e"));
    let copy = seeded
        .begin_read_only()
        .get(tree, &8u64.to_be_bytes())
        .unwrap();
    assert_eq!(
        copy.as_deref(),
        Some(&large[..]),
        "the large row in the base backup"
    );
    let seen = seen.lock().clone();
    assert!(
        seen.len() > secret_value.len(),
        "{} bytes relayed",
        seen.len()
    );
    let clear = seen
        .windows(b"a value nobody".len())
        .any(|window| window == b"a value nobody");
    assert!(!clear, "the log went out in the clear");
    standby.stop();
    primary.stop();
}

/// Both nodes opened as the server opens a replicated pair (`hold_checkpoints`, and `standby`
/// for the follower) take no checkpoint until the log is known to be held by the node that
/// may take over: the standby once its primary accepted its hello, the primary once its
/// standby acknowledged past where the primary's log ended at its start. Until then the last
/// checkpoint stays one a rewind can start from.
#[test]
fn checkpoints_wait_until_the_other_node_holds_the_log() {
    watchdog(
        "checkpoints_wait_until_the_other_node_holds_the_log",
        Duration::from_secs(120),
    );
    let dir = tempfile::tempdir().unwrap();
    let (db, tree) = seeded(dir.path());
    db.close().unwrap();
    let held = DatabaseConfig {
        hold_checkpoints: true,
        ..config()
    };
    let a = Database::open(&dir.path().join("a"), held.clone()).unwrap();
    assert!(a.checkpoint().is_err(), "the primary checkpointed at once");
    let primary = start_primary(&a, ReplicationPolicy::default());
    let b = Database::open(
        &dir.path().join("b"),
        DatabaseConfig {
            standby: true,
            ..held
        },
    )
    .unwrap();
    assert!(b.checkpoint().is_err(), "the standby checkpointed at once");
    let standby = start_standby(&b, &dir.path().join("b"), &primary);
    eventually("the standby's log to be accepted", || {
        b.checkpoint().is_ok()
    });
    assert!(
        a.checkpoint().is_err(),
        "no standby acknowledged the primary's log yet"
    );
    put(&a, tree, 1, b"acknowledged").unwrap();
    a.checkpoint().unwrap();
    eventually("the standby to apply", || has(&b, tree, 1));
    standby.stop();
    primary.stop();
}
