//! The databases of one data directory (PostgreSQL's "database cluster"): namespaces of
//! tables, indexes and sequences over one engine, one log and one buffer pool
//! (docs/design.md, 8.2).
//!
//! 1. `sql.databases` maps a database's name to its oid. The default database, `postgres`
//!    (oid 5, as in PostgreSQL), keeps its trees under their plain names (`sql.catalog`,
//!    `sql.table.t`, ...), so data directories from before databases existed open unchanged;
//!    every other database prefixes its trees' names with `db<oid>.`.
//! 2. A connection names its database; `Cluster::catalog` gives that database's catalog
//!    (opened on first use, shared while any session holds it), or 3D000 if there is none.
//! 3. CREATE DATABASE creates the new catalog's trees, then commits its row: the database
//!    exists from the commit. DROP DATABASE refuses while sessions use it (55006), commits
//!    the row's delete, then drops every tree under its prefix. A crash between the steps
//!    leaves trees under a prefix no row names; `Cluster::open` drops them.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use hayate_engine::{Database, TreeId};
use parking_lot::{Mutex, RwLock};

use super::{create_catalog_trees, open_or_create, Catalog, ReplicationSource, ReplicationStat};
use crate::error::{sqlstate, SqlError, SqlResult};

/// The database every data directory has, and the one whose trees have no prefix.
pub const DEFAULT_DATABASE: &str = "postgres";
/// Its oid (PostgreSQL's too).
const DEFAULT_DATABASE_OID: u32 = 5;
/// The first oid of a created database (PostgreSQL's first user oid).
const FIRST_DATABASE_OID: u32 = 16384;
const DATABASES_TREE: &str = "sql.databases";

/// One database as pg_database lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseInfo {
    pub name: String,
    pub oid: u32,
}

/// The prefix of a database's engine tree names.
fn tree_prefix(oid: u32) -> String {
    match oid {
        DEFAULT_DATABASE_OID => String::new(),
        oid => format!("db{oid}."),
    }
}

/// The oid a tree name's database prefix names (`db<oid>.`), if it has one.
fn prefix_oid(tree: &str) -> Option<u32> {
    let rest = tree.strip_prefix("db")?;
    let (digits, _) = rest.split_once('.')?;
    digits.parse().ok()
}

struct ClusterState {
    /// Every database by name: its oid.
    databases: BTreeMap<String, u32>,
    /// The catalogs sessions hold now.
    open: HashMap<String, Weak<Catalog>>,
}

/// The databases of one engine database (see the module doc).
pub struct Cluster {
    db: Database,
    /// `sql.databases`; None on a standby whose primary has not written it yet (only the
    /// default database exists then).
    tree: RwLock<Option<TreeId>>,
    state: Mutex<ClusterState>,
    /// Serializes CREATE and DROP DATABASE.
    ddl: Mutex<()>,
    /// What a primary's replication reports (pg_stat_replication); set by the server.
    replication: RwLock<Option<ReplicationSource>>,
    /// Ends the sessions of a database (DROP DATABASE ... WITH (FORCE)); set by the server,
    /// which owns the connections.
    terminator: RwLock<Option<SessionTerminator>>,
    /// What its sessions are doing (pg_stat_activity), and signals to them.
    activities: Arc<super::activity::Activities>,
}

/// Ends the sessions connected to the named database (their connections close with FATAL
/// 57P01); returns how many it told to end.
pub type SessionTerminator = std::sync::Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// How long DROP DATABASE ... WITH (FORCE) waits for the ended sessions to let go.
const FORCE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn undefined_database(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_CATALOG_NAME,
        format!("database \"{name}\" does not exist"),
    )
}

/// The rows of `sql.databases`.
fn read_databases(db: &Database, tree: Option<TreeId>) -> SqlResult<BTreeMap<String, u32>> {
    let mut databases = BTreeMap::new();
    if let Some(tree) = tree {
        let txn = db.begin_read_only();
        for row in txn.scan(tree, Bound::Unbounded, Bound::Unbounded)? {
            let (name, value) = row?;
            let corrupt = || SqlError::new(sqlstate::DATA_CORRUPTED, "corrupt database row");
            let name = String::from_utf8(name).map_err(|_| corrupt())?;
            let oid = u32::from_be_bytes(value.as_slice().try_into().map_err(|_| corrupt())?);
            databases.insert(name, oid);
        }
        txn.abort();
    }
    databases
        .entry(DEFAULT_DATABASE.to_string())
        .or_insert(DEFAULT_DATABASE_OID);
    Ok(databases)
}

impl Cluster {
    /// Opens the databases of `db`, creating `sql.databases` on first use (a standby
    /// writes nothing: the tree comes with the primary's log), and drops what a crash left
    /// of a CREATE or DROP DATABASE.
    pub fn open(db: Database) -> SqlResult<Arc<Cluster>> {
        let tree = if db.is_standby() {
            db.table(DATABASES_TREE).ok()
        } else {
            // The default database's trees now, not when its first session opens it: by then
            // this may be a primary whose every write waits for its standby.
            create_catalog_trees(&db, "")?;
            let tree = open_or_create(&db, DATABASES_TREE)?;
            let txn = db.begin_read_only();
            let empty = txn.get(tree, DEFAULT_DATABASE.as_bytes())?.is_none();
            txn.abort();
            if empty {
                let mut txn = db.begin();
                txn.put(
                    tree,
                    DEFAULT_DATABASE.as_bytes(),
                    &DEFAULT_DATABASE_OID.to_be_bytes(),
                )?;
                txn.commit()?;
            }
            Some(tree)
        };
        let databases = read_databases(&db, tree)?;
        let cluster = Cluster {
            db,
            tree: RwLock::new(tree),
            state: Mutex::new(ClusterState {
                databases,
                open: HashMap::new(),
            }),
            ddl: Mutex::new(()),
            replication: RwLock::new(None),
            terminator: RwLock::new(None),
            activities: Default::default(),
        };
        if !cluster.db.is_standby() {
            cluster.drop_orphans()?;
        }
        Ok(Arc::new(cluster))
    }

    /// Drops the trees under a prefix no database row names.
    fn drop_orphans(&self) -> SqlResult<()> {
        let oids: Vec<u32> = self.state.lock().databases.values().copied().collect();
        for info in self.db.tables() {
            if let Some(oid) = prefix_oid(&info.name) {
                if !oids.contains(&oid) {
                    log::warn!("dropping engine tree {} of a dropped database", info.name);
                    self.db.drop_table(&info.name)?;
                }
            }
        }
        Ok(())
    }

    /// `sql.databases`, for a statement that changes it (25006 on a standby).
    fn writable_tree(&self, what: &str) -> SqlResult<TreeId> {
        match *self.tree.read() {
            Some(tree) if !self.db.is_standby() => Ok(tree),
            _ => Err(SqlError::new(
                sqlstate::READ_ONLY_SQL_TRANSACTION,
                format!("cannot execute {what} in a read-only transaction"),
            )),
        }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Every database, by name.
    pub fn databases(&self) -> Vec<DatabaseInfo> {
        hayate_engine::fiber::lock(&self.state)
            .databases
            .iter()
            .map(|(name, oid)| DatabaseInfo {
                name: name.clone(),
                oid: *oid,
            })
            .collect()
    }

    /// The catalog of the database `name` (3D000 if there is none), opened if no session
    /// holds it now.
    pub fn catalog(self: &Arc<Self>, name: &str) -> SqlResult<Arc<Catalog>> {
        let mut state = hayate_engine::fiber::lock(&self.state);
        let oid = *state
            .databases
            .get(name)
            .ok_or_else(|| undefined_database(name))?;
        if let Some(catalog) = state.open.get(name).and_then(Weak::upgrade) {
            if !catalog.is_dropped() {
                return Ok(catalog);
            }
        }
        let catalog = Arc::new(Catalog::open_in(
            self.clone(),
            name.to_string(),
            tree_prefix(oid),
        )?);
        state
            .open
            .insert(name.to_string(), Arc::downgrade(&catalog));
        Ok(catalog)
    }

    /// The catalogs sessions hold now.
    fn open_catalogs(&self) -> Vec<Arc<Catalog>> {
        let mut state = hayate_engine::fiber::lock(&self.state);
        state.open.retain(|_, catalog| catalog.strong_count() > 0);
        state.open.values().filter_map(Weak::upgrade).collect()
    }

    /// Analyzes the tables of every open database that are due (`Catalog::autoanalyze`)
    /// until `stopped`: (database, table) of each analyzed.
    pub fn autoanalyze(&self, stopped: super::analyze::Stopped) -> Vec<(String, String)> {
        let mut analyzed = Vec::new();
        for catalog in self.open_catalogs() {
            if catalog.is_dropped() {
                continue;
            }
            for table in catalog.autoanalyze(stopped) {
                analyzed.push((catalog.name().to_string(), table));
            }
        }
        analyzed
    }

    /// CREATE DATABASE: the new database is empty (no template is copied).
    pub fn create_database(self: &Arc<Self>, name: &str, if_not_exists: bool) -> SqlResult<()> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let tree = self.writable_tree("CREATE DATABASE")?;
        let oid = {
            let state = hayate_engine::fiber::lock(&self.state);
            if state.databases.contains_key(name) {
                if if_not_exists {
                    return Ok(());
                }
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_DATABASE,
                    format!("database \"{name}\" already exists"),
                ));
            }
            let highest = state.databases.values().max().copied().unwrap_or(0);
            highest.max(FIRST_DATABASE_OID - 1) + 1
        };
        // Its catalog's trees first (durable on return), then the row.
        Catalog::open_in(self.clone(), name.to_string(), tree_prefix(oid))?;
        let mut txn = self.db.begin();
        txn.put(tree, name.as_bytes(), &oid.to_be_bytes())?;
        txn.commit()?;
        hayate_engine::fiber::lock(&self.state)
            .databases
            .insert(name.to_string(), oid);
        Ok(())
    }

    /// Its sessions' activity (pg_stat_activity) and the signals to them.
    pub fn activities(&self) -> &Arc<super::activity::Activities> {
        &self.activities
    }

    /// Sets (or clears) what ends a database's sessions for DROP DATABASE ... WITH (FORCE).
    pub fn set_session_terminator(&self, terminator: Option<SessionTerminator>) {
        *self.terminator.write() = terminator;
    }

    /// DROP DATABASE: refused for `current` (the dropping session's database) and while any
    /// session uses it (55006); with `force` those sessions are ended first (by the server's
    /// terminator; without one, as embedded, they cannot be) and waited for up to
    /// `FORCE_WAIT`. False if it did not exist and `if_exists` said that is fine.
    pub fn drop_database(
        &self,
        name: &str,
        if_exists: bool,
        current: &str,
        force: bool,
    ) -> SqlResult<bool> {
        let _ddl = hayate_engine::fiber::lock(&self.ddl);
        let tree = self.writable_tree("DROP DATABASE")?;
        let (oid, catalog) = {
            let state = hayate_engine::fiber::lock(&self.state);
            let Some(oid) = state.databases.get(name).copied() else {
                if if_exists {
                    return Ok(false);
                }
                return Err(undefined_database(name));
            };
            (oid, state.open.get(name).and_then(Weak::upgrade))
        };
        if oid == DEFAULT_DATABASE_OID {
            // Its trees have no prefix to drop them by.
            return Err(SqlError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!("the default database \"{name}\" cannot be dropped"),
            ));
        }
        if name == current {
            return Err(SqlError::new(
                sqlstate::OBJECT_IN_USE,
                "cannot drop the currently open database",
            ));
        }
        if let Some(catalog) = &catalog {
            // Marked first, then counted; a connecting session counts itself first, then
            // looks at the mark: one of the two sees the other.
            catalog.dropped.store(true, Ordering::SeqCst);
            let mut sessions = catalog.sessions.load(Ordering::SeqCst);
            let terminator = self.terminator.read().clone();
            if let (true, true, Some(terminator)) = (sessions > 0, force, terminator) {
                // New sessions are refused by the mark; the ones there are told to end, and
                // let go of the catalog as their connections close.
                let told = terminator(name);
                log::info!("DROP DATABASE {name} WITH (FORCE): ending {told} sessions");
                let deadline = std::time::Instant::now() + FORCE_WAIT;
                while sessions > 0 && std::time::Instant::now() < deadline {
                    // On a server's event loop the statement's fiber suspends, so the loop
                    // can close the ended connections it serves.
                    let pause = std::time::Instant::now() + std::time::Duration::from_millis(10);
                    if hayate_engine::fiber::on_fiber() {
                        hayate_engine::fiber::suspend(hayate_engine::fiber::Wait::Until(pause));
                    } else {
                        std::thread::sleep(pause - std::time::Instant::now());
                    }
                    sessions = catalog.sessions.load(Ordering::SeqCst);
                }
            }
            if sessions > 0 {
                catalog.dropped.store(false, Ordering::SeqCst);
                let plural = if sessions == 1 {
                    "is 1 other session"
                } else {
                    "are other sessions"
                };
                return Err(SqlError::new(
                    sqlstate::OBJECT_IN_USE,
                    format!(
                        "database \"{name}\" is being accessed by other users \
                         (there {plural} using the database)"
                    ),
                ));
            }
        }
        let mut txn = self.db.begin();
        txn.delete(tree, name.as_bytes())?;
        txn.commit()?;
        {
            let mut state = hayate_engine::fiber::lock(&self.state);
            state.databases.remove(name);
            state.open.remove(name);
        }
        let prefix = tree_prefix(oid);
        for info in self.db.tables() {
            if info.name.starts_with(&prefix) {
                if let Err(error) = self.db.drop_table(&info.name) {
                    log::warn!("dropping engine tree {}: {error}", info.name);
                }
            }
        }
        Ok(true)
    }

    /// The engine trees holding the databases' definitions: `sql.databases` and the
    /// catalog trees of every open database (a standby reloads when the log changes one).
    pub fn catalog_trees(&self) -> Vec<TreeId> {
        let mut trees: Vec<TreeId> = self.tree.read().iter().copied().collect();
        for catalog in self.open_catalogs() {
            trees.extend(catalog.catalog_trees());
        }
        trees
    }

    /// Reads the databases and every open catalog again (a standby, after applying the
    /// primary's DDL; a promoted standby). A catalog whose database is gone is marked
    /// dropped.
    pub fn reload(&self) -> SqlResult<()> {
        let tree = {
            let mut tree = self.tree.write();
            if tree.is_none() {
                *tree = self.db.table(DATABASES_TREE).ok();
            }
            *tree
        };
        let databases = read_databases(&self.db, tree)?;
        hayate_engine::fiber::lock(&self.state).databases = databases.clone();
        for catalog in self.open_catalogs() {
            if databases.contains_key(catalog.name()) {
                catalog.reload()?;
            } else {
                catalog.dropped.store(true, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Installs (or, with None, removes) what pg_stat_replication reads.
    pub fn set_replication_source(&self, source: Option<ReplicationSource>) {
        *self.replication.write() = source;
    }

    /// The standbys the primary serves now (none on a standby or standalone).
    pub fn replication_stats(&self) -> Vec<ReplicationStat> {
        let source = self.replication.read().clone();
        source.map_or(Vec::new(), |source| source())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_name_their_database() {
        assert_eq!(tree_prefix(DEFAULT_DATABASE_OID), "");
        assert_eq!(tree_prefix(16384), "db16384.");
        assert_eq!(prefix_oid("db16384.sql.table.t"), Some(16384));
        assert_eq!(prefix_oid("sql.table.db1.x"), None);
        assert_eq!(prefix_oid("dbx.sql.catalog"), None);
        assert_eq!(prefix_oid("db17"), None);
    }
}
