//! The SQL catalog: table, index and sequence definitions, kept in engine tables so they are
//! as durable as the rows (same log, same recovery).
//!
//! This file opens the catalog (`Catalog::open`) and holds its in-memory state; the folder
//! has one file per job: `definition` (table definitions and their rows in `sql.catalog`),
//! `table` (a table as statements use it), `sequence` (sequences and their rows in
//! `sql.sequence`), `index_entry` (the key of a secondary index entry), `reader` (the one
//! reader of their rows), `ddl` (CREATE and DROP), `rebuild` (TRUNCATE and ALTER TABLE) and
//! `batch` (filling new engine trees).
//!
//! Layout (docs/design.md, 8.2):
//! - `sql.catalog` maps a table's name (UTF-8) to its definition (`TableDef::encode`), its
//!   secondary indexes included;
//! - the rows of a table live in the engine table its definition names (`sql.table.t`, or
//!   `sql.table.t.N` after TRUNCATE or a rebuild), each index in the engine index its
//!   `IndexDef` names (`sql.index.i[.N]`);
//! - `sql.sequence` maps a sequence's name (`t_col_seq`) to the next value not yet handed out
//!   by any open of the database, and for a CREATE SEQUENCE sequence its options and the
//!   name of the empty engine tree `sql.sequence.s[.N]` its oid derives from (`sequence`).
//!
//! CREATE/DROP SEQUENCE are not transactional: they commit on their own, also inside a
//! transaction block (their row and tree follow steps 1-3 below without a block).
//!
//! Every DDL follows one rule, so a crash at any point leaves either the old or the new state:
//! 1. Create the new engine trees (the engine's DDL is durable on return).
//! 2. Fill them (index entries, copied rows) from one snapshot, in batches of bounded size
//!    (`BatchWriter`: SQL cannot see trees no definition names), then write the catalog rows
//!    in one transaction and commit. The change exists from here on.
//! 3. Publish it in memory, then drop the engine trees nothing refers to any more.
//!
//! Inside a transaction block (`block` is the block's engine transaction) step 2 writes the
//! catalog rows into the block's transaction instead, and the change is published in memory
//! at once for the session's later statements; the returned `DdlUndo` says what to do when
//! the block ends (`Catalog::finish_ddl`): at commit drop the replaced trees, at rollback
//! (or ROLLBACK TO an earlier savepoint) put the old tables back and drop the new trees.
//!
//! `Catalog::open` drops every `sql.table.*`/`sql.index.*` engine tree that no definition
//! names: those a crash left between steps 1 and 2 or 2 and 3. DDL statements are serialized
//! by one mutex, so inside it an unreferenced tree is always such a leftover.
//!
//! Writes of other transactions to a table while a DDL rebuilds it (TRUNCATE, ALTER TABLE,
//! CREATE INDEX) would not be seen by the rebuild: the sessions' table locks (`table_lock`)
//! make the DDL wait for the writers and hold new ones off.

pub mod activity;
pub mod analyze;
mod automatic_index;
mod batch;
pub mod cluster;
mod ddl;
mod definition;
pub mod enum_type;
pub(crate) mod index_entry;
mod reader;
mod rebuild;
pub mod sequence;
pub mod statistics;
mod table;
mod view;

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use hayate_engine::{Database, Transaction, TreeId};
use parking_lot::{Mutex, RwLock};

use crate::error::{sqlstate, SqlError, SqlResult};
use definition::{CATALOG_TREE, TABLE_TREE_PREFIX};
use statistics::TableStatistics;

pub use automatic_index::Leading;
pub use cluster::{Cluster, DatabaseInfo, SessionTerminator, DEFAULT_DATABASE};
pub use ddl::{DdlUndo, NewIndex};
pub(crate) use definition::{mentions, quote_literal};
pub use definition::{
    rename_column_in, CheckDef, ColumnDef, Deferral, ForeignKeyDef, Identity, IndexDef,
    IndexExpression, IndexKey, IndexKeys, IndexKind, ReferentialAction, TableDef, EXPRESSION_KEY,
    INDEX_DESC, INDEX_NULLS_FIRST,
};
pub use rebuild::Rebuild;
pub use sequence::{Sequence, SequenceChanges, SequenceOptions, SessionSequences};
pub use table::{Table, NOT_READY};
pub use view::{View, ViewDef};

/// The first oid of user objects.
pub const FIRST_USER_OID: i64 = 16384;

/// The oid of the user object with engine tree id `tree` (a table, view, sequence or type).
pub fn tree_oid(tree: TreeId) -> i64 {
    FIRST_USER_OID + 4 * tree as i64
}

const SEQUENCE_TREE: &str = "sql.sequence";
const INDEX_TREE_PREFIX: &str = "sql.index.";
/// Engine trees that give CREATE SEQUENCE sequences their oids (`sequence` module).
const SEQUENCE_TREE_PREFIX: &str = "sql.sequence.";

struct CatalogState {
    tables: HashMap<String, Arc<Table>>,
    /// CREATE SEQUENCE sequences (a column's sequence belongs to its `Table`).
    sequences: HashMap<String, Arc<Sequence>>,
    views: HashMap<String, Arc<View>>,
    /// Enum types by name.
    enums: HashMap<String, enum_type::StoredEnum>,
    /// Bumped by every DDL: prepared statements bound at an older version are bound again.
    version: u64,
}

/// The tables of one database, loaded at open and changed by DDL.
pub struct Catalog {
    db: Database,
    /// The databases this one belongs to.
    cluster: Arc<Cluster>,
    /// The database's name.
    name: String,
    /// Prepended to the names of the database's engine trees (`cluster`).
    prefix: String,
    /// Sessions using the database now (`Session::new`, until dropped).
    pub(crate) sessions: AtomicUsize,
    /// DROP DATABASE took it (or is taking it; see `Cluster::drop_database`).
    pub(crate) dropped: AtomicBool,
    tree: TreeId,
    sequence_tree: TreeId,
    state: RwLock<CatalogState>,
    /// Serializes DDL statements.
    ddl: Mutex<()>,
    /// Writers' and DDLs' table locks (`table_lock`), taken by the sessions.
    pub table_locks: crate::table_lock::TableLocks,
}

/// The names of the trees holding a database's definitions and sequences.
fn catalog_tree_names(prefix: &str) -> (String, String) {
    (
        format!("{prefix}{CATALOG_TREE}"),
        format!("{prefix}{SEQUENCE_TREE}"),
    )
}

/// Creates the trees of a database's definitions and sequences if they are missing (a
/// primary only).
pub(super) fn create_catalog_trees(db: &Database, prefix: &str) -> SqlResult<()> {
    let (catalog_tree, sequence_tree) = catalog_tree_names(prefix);
    open_or_create(db, &catalog_tree)?;
    open_or_create(db, &sequence_tree)?;
    Ok(())
}

fn open_or_create(db: &Database, name: &str) -> SqlResult<TreeId> {
    match db.table(name) {
        Ok(tree) => Ok(tree),
        Err(hayate_engine::Error::NoSuchTable(_)) => Ok(db.create_table(name)?),
        Err(error) => Err(error.into()),
    }
}

/// One standby as a primary sees it (a row of pg_stat_replication).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicationStat {
    /// The standby's name (`--ha-node`), or its address.
    pub application_name: String,
    pub client_addr: String,
    pub client_port: u16,
    /// Log bytes sent to it up to here.
    pub sent_lsn: u64,
    /// Durable on it up to here (what commits waited for).
    pub flush_lsn: u64,
    /// Applied on it up to here (None until it reported).
    pub replay_lsn: Option<u64>,
    /// From this primary's flush of the last measured position to the standby's report that
    /// it was durable there, and applied.
    pub flush_lag: Option<std::time::Duration>,
    pub replay_lag: Option<std::time::Duration>,
    /// "sync" for the standby whose acknowledgements count, else "potential".
    pub sync_state: &'static str,
}

/// Reports the primary's standbys now.
pub type ReplicationSource = Arc<dyn Fn() -> Vec<ReplicationStat> + Send + Sync>;

/// Sequences by name.
type Sequences = HashMap<String, Arc<Sequence>>;

/// What the catalog's trees hold.
struct Definitions {
    tables: Vec<TableDef>,
    sequences: Sequences,
    views: Vec<ViewDef>,
    enums: Vec<enum_type::StoredEnum>,
    /// What ANALYZE learned, by the engine tree of the table's rows.
    statistics: HashMap<TreeId, TableStatistics>,
}

/// The table and view definitions and the sequences stored in the catalog's trees.
fn read_definitions(db: &Database, tree: TreeId, sequence_tree: TreeId) -> SqlResult<Definitions> {
    let mut defs = Vec::new();
    let mut views = Vec::new();
    let mut enums = Vec::new();
    let mut sequences = HashMap::new();
    let mut statistics = HashMap::new();
    let txn = db.begin_read_only();
    for row in txn.scan(tree, Bound::Unbounded, Bound::Unbounded)? {
        let (key, value) = row?;
        if let Some(table_tree) = statistics::statistics_tree(&key) {
            // Advisory: unreadable statistics are as none (the next ANALYZE writes them).
            match TableStatistics::decode(&value) {
                Ok(decoded) => {
                    statistics.insert(table_tree, decoded);
                }
                Err(error) => log::warn!("statistics of tree {table_tree} skipped: {error}"),
            }
        } else if value.first() == Some(&view::VIEW_TAG) {
            views.push(ViewDef::decode(&value)?);
        } else if value.first() == Some(&enum_type::ENUM_TAG) {
            enums.push(enum_type::decode(&value)?);
        } else {
            defs.push(TableDef::decode(&value)?);
        }
    }
    for row in txn.scan(sequence_tree, Bound::Unbounded, Bound::Unbounded)? {
        let (name, value) = row?;
        let Some(definition) = sequence::decode_definition(&value) else {
            continue; // a column's sequence
        };
        let stored = definition?;
        let name = String::from_utf8(name)
            .map_err(|_| SqlError::new(sqlstate::DATA_CORRUPTED, "corrupt sequence name"))?;
        let tree = db.table(&stored.tree)?;
        let sequence = Sequence::new(
            name.clone(),
            stored.options,
            Some((stored.tree, tree)),
            db.clone(),
            sequence_tree,
        );
        sequence.set_owner_in_memory(stored.owner);
        sequences.insert(name, Arc::new(sequence));
    }
    txn.abort();
    Ok(Definitions {
        tables: defs,
        sequences,
        views,
        enums,
        statistics,
    })
}

pub(super) fn duplicate_relation(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::DUPLICATE_TABLE,
        format!("relation \"{name}\" already exists"),
    )
}

impl Catalog {
    /// Opens the SQL catalog of the default database of `db` (`Cluster`), creating its
    /// trees on first use. On a standby it writes nothing (the trees come with the
    /// primary's log).
    pub fn open(db: Database) -> SqlResult<Arc<Catalog>> {
        Cluster::open(db)?.catalog(DEFAULT_DATABASE)
    }

    /// Opens the catalog of the database `name` of `cluster`, whose trees are named with
    /// `prefix`.
    pub(super) fn open_in(
        cluster: Arc<Cluster>,
        name: String,
        prefix: String,
    ) -> SqlResult<Catalog> {
        let db = cluster.database().clone();
        let (catalog_tree, sequence_tree) = catalog_tree_names(&prefix);
        let (tree, sequence_tree) = if db.is_standby() {
            let missing = |_| {
                SqlError::new(
                    sqlstate::READ_ONLY_SQL_TRANSACTION,
                    "a standby's data directory must be a copy of its primary's \
                     (it has no SQL catalog)",
                )
            };
            (
                db.table(&catalog_tree).map_err(missing)?,
                db.table(&sequence_tree).map_err(missing)?,
            )
        } else {
            (
                open_or_create(&db, &catalog_tree)?,
                open_or_create(&db, &sequence_tree)?,
            )
        };
        let definitions = read_definitions(&db, tree, sequence_tree)?;
        let mut catalog = Catalog {
            db,
            cluster,
            name,
            prefix,
            sessions: AtomicUsize::new(0),
            dropped: AtomicBool::new(false),
            tree,
            sequence_tree,
            state: RwLock::new(CatalogState {
                tables: HashMap::new(),
                sequences: definitions.sequences,
                views: HashMap::new(),
                enums: HashMap::new(),
                version: 1,
            }),
            ddl: Mutex::new(()),
            table_locks: Default::default(),
        };
        let mut tables = HashMap::new();
        for def in definitions.tables {
            let table = catalog.load(def)?;
            tables.insert(table.def.name.clone(), Arc::new(table));
        }
        catalog.state.get_mut().tables = tables;
        catalog.install_statistics(definitions.statistics);
        catalog.state.get_mut().views = catalog.load_views(definitions.views);
        catalog.state.get_mut().enums = catalog.load_enums(definitions.enums);
        if !catalog.db.is_standby() {
            catalog.drop_unreferenced()?;
        }
        Ok(catalog)
    }

    /// The databases this one belongs to.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// True once DROP DATABASE took the database: a session must not start on it.
    pub fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::SeqCst)
    }

    /// The name of an engine tree of this database: `kind` (a `*_PREFIX`) and `name`.
    pub(super) fn tree_name(&self, kind: &str, name: &str) -> String {
        format!("{}{kind}{name}", self.prefix)
    }

    /// Reads the definitions again (a standby, after applying the primary's DDL): tables and
    /// sequences as committed now; prepared statements are bound again. A definition whose
    /// trees are not there (yet, or any more: the rest of its DDL is still to come) is skipped.
    pub fn reload(&self) -> SqlResult<()> {
        let definitions = read_definitions(&self.db, self.tree, self.sequence_tree)?;
        let views = self.load_views(definitions.views);
        let enums = self.load_enums(definitions.enums);
        let mut tables = HashMap::new();
        for def in definitions.tables {
            let name = def.name.clone();
            match self.load(def) {
                Ok(table) => {
                    tables.insert(name, Arc::new(table));
                }
                Err(error) => log::debug!("catalog reload: table {name} skipped: {error}"),
            }
        }
        let mut state = self.state.write();
        state.tables = tables;
        state.sequences = definitions.sequences;
        state.views = views;
        state.enums = enums;
        state.version += 1;
        drop(state);
        self.install_statistics(definitions.statistics);
        Ok(())
    }

    /// Gives each table the statistics stored for its rows' engine tree (none if there are
    /// none).
    fn install_statistics(&self, mut stored: HashMap<TreeId, TableStatistics>) {
        for table in self.state.read().tables.values() {
            table
                .statistics
                .set(stored.remove(&table.tree).map(Arc::new));
        }
    }

    /// The engine trees holding the SQL catalog itself (table definitions, sequences).
    pub fn catalog_trees(&self) -> [TreeId; 2] {
        [self.tree, self.sequence_tree]
    }

    /// True on a standby: writes fail with 25006, `pg_is_in_recovery()` is true.
    pub fn is_standby(&self) -> bool {
        self.db.is_standby()
    }

    /// The views of these definitions; one whose tree is not there (a standby yet to apply
    /// the rest of its DDL) is skipped.
    fn load_views(&self, defs: Vec<ViewDef>) -> HashMap<String, Arc<View>> {
        defs.into_iter()
            .filter_map(|def| match self.db.table(&def.tree) {
                Ok(tree) => Some((def.name.clone(), Arc::new(View { def, tree }))),
                Err(error) => {
                    log::debug!("catalog: view {} skipped: {error}", def.name);
                    None
                }
            })
            .collect()
    }

    /// Builds the in-memory table of a definition whose engine trees exist.
    pub(super) fn load(&self, def: TableDef) -> SqlResult<Table> {
        let tree = self.db.table(&def.tree)?;
        let index_trees: Vec<TreeId> = def
            .indexes
            .iter()
            .map(|index| self.db.table(&index.tree))
            .collect::<Result<_, _>>()?;
        // A reloaded table keeps its sequences: their reserved values stay in one place.
        let current = self.state.read().tables.get(&def.name).cloned();
        let sequences = (0..def.columns.len())
            .map(|column| {
                def.columns[column].identity.map(|_| {
                    let name = def.sequence_name(column);
                    let kept = current.as_ref().and_then(|table| {
                        table.sequences.iter().flatten().find(|s| s.name == name)
                    });
                    match kept {
                        Some(sequence) => sequence.clone(),
                        None => Arc::new(Sequence::new(
                            name,
                            SequenceOptions::for_column(def.columns[column].data_type),
                            None,
                            self.db.clone(),
                            self.sequence_tree,
                        )),
                    }
                })
            })
            .collect();
        // An index the catalog had (by its engine tree, which a rename keeps; not by its
        // name, which a dropped index's successor may take) stays as readable as it was; a
        // new one is readable from now on (the DDL has committed; a block's DDL marks its
        // indexes not ready until the block commits, `finish_or_defer`).
        let now = self.db.begin_read_only().snapshot_ts();
        let index_ready = {
            let state = self.state.read();
            let known = |tree: &TreeId| {
                state.tables.values().find_map(|table| {
                    let position = table.index_trees.iter().position(|t| t == tree)?;
                    Some(table.index_ready(position))
                })
            };
            (index_trees.iter())
                .map(|tree| known(tree).unwrap_or(now))
                .collect()
        };
        // Statistics describe the rows of a tree, whichever definition names it.
        let statistics = (self.state.read().tables.values())
            .find(|table| table.tree == tree)
            .map(|table| table.statistics.clone())
            .unwrap_or_default();
        Ok(Table::new(
            def,
            tree,
            index_trees,
            sequences,
            index_ready,
            statistics,
        ))
    }

    /// Drops the engine trees of tables and indexes no definition names (left by a crash in
    /// the middle of a DDL, or by a DDL that failed).
    fn drop_unreferenced(&self) -> SqlResult<()> {
        let referenced: HashSet<String> = {
            let state = self.state.read();
            state
                .tables
                .values()
                .flat_map(|table| {
                    std::iter::once(table.def.tree.clone())
                        .chain(table.def.indexes.iter().map(|index| index.tree.clone()))
                })
                .chain(
                    state
                        .sequences
                        .values()
                        .filter_map(|sequence| Some(sequence.tree.as_ref()?.0.clone())),
                )
                .chain(state.views.values().map(|view| view.def.tree.clone()))
                .chain(state.enums.values().map(|stored| stored.tree.clone()))
                .collect()
        };
        for info in self.db.tables() {
            let ours = [
                TABLE_TREE_PREFIX,
                INDEX_TREE_PREFIX,
                SEQUENCE_TREE_PREFIX,
                view::VIEW_TREE_PREFIX,
                enum_type::TYPE_TREE_PREFIX,
            ]
            .iter()
            .any(|kind| info.name.starts_with(&format!("{}{kind}", self.prefix)));
            if ours && !referenced.contains(&info.name) {
                log::warn!(
                    "dropping engine tree {} that no definition names",
                    info.name
                );
                self.db.drop_table(&info.name)?;
            }
        }
        Ok(())
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    pub fn version(&self) -> u64 {
        self.state.read().version
    }

    /// Marks a change that prepared statements and the system tables must see (a sequence's
    /// owner).
    pub fn bump_version(&self) {
        self.state.write().version += 1;
    }

    pub fn table(&self, name: &str) -> SqlResult<Arc<Table>> {
        self.state.read().tables.get(name).cloned().ok_or_else(|| {
            SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("relation \"{name}\" does not exist"),
            )
        })
    }

    /// The foreign keys of other tables (and of the table itself) that reference `table`:
    /// (referencing table, position in its `foreign_keys`), by table name.
    pub fn referencing(&self, table: &str) -> Vec<(Arc<Table>, usize)> {
        let state = self.state.read();
        let mut found: Vec<(Arc<Table>, usize)> = state
            .tables
            .values()
            .flat_map(|child| {
                child
                    .def
                    .foreign_keys
                    .iter()
                    .enumerate()
                    .filter(|(_, key)| key.table == table)
                    .map(|(position, _)| (child.clone(), position))
            })
            .collect();
        found.sort_by(|(a, x), (b, y)| (&a.def.name, x).cmp(&(&b.def.name, y)));
        found
    }

    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.state.read().tables.keys().cloned().collect();
        names.sort();
        names
    }

    /// Gives a new primary key a name no relation and no constraint of its table has, as
    /// PostgreSQL does: a name given that is taken is 42P07 (42710 for a constraint's); a
    /// taken `<table>_pkey` becomes `<table>_pkey1`, `2`, ... (a renamed table kept it).
    pub(super) fn name_primary_key(&self, def: &mut TableDef) -> SqlResult<()> {
        if def.primary_key.is_empty() {
            return Ok(());
        }
        let constraint_taken = |name: &str| {
            def.checks.iter().any(|c| c.name == name)
                || def.foreign_keys.iter().any(|k| k.name == name)
                || def.indexes.iter().any(|i| !i.automatic && i.name == name)
        };
        let name = def.primary_key_name();
        let relation_taken = self.relation_exists(&name)
            && self.table(&def.name).map_or(true, |t| {
                t.def.primary_key.is_empty() || t.def.primary_key_name() != name
            });
        let taken = relation_taken || name == def.name || constraint_taken(&name);
        if !taken {
            return Ok(());
        }
        if def.primary_key_constraint.is_some() {
            if constraint_taken(&name) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_OBJECT,
                    format!(
                        "constraint \"{name}\" for relation \"{}\" already exists",
                        def.name
                    ),
                ));
            }
            return Err(duplicate_relation(&name));
        }
        let free = (1..).map(|n| format!("{name}{n}"));
        def.primary_key_constraint = free
            .into_iter()
            .find(|n| !self.relation_exists(n) && !constraint_taken(n) && *n != def.name);
        Ok(())
    }

    /// True if a table, index or sequence has the name (they share one namespace, as in
    /// PostgreSQL, where indexes and sequences are relations too).
    pub(super) fn relation_exists(&self, name: &str) -> bool {
        let state = self.state.read();
        state.tables.contains_key(name)
            || state.sequences.contains_key(name)
            || state.views.contains_key(name)
            || state.tables.values().any(|table| {
                table
                    .def
                    .indexes
                    .iter()
                    .any(|index| !index.automatic && index.name == name)
                    || (!table.def.primary_key.is_empty() && table.def.primary_key_name() == name)
                    || (0..table.def.columns.len()).any(|column| {
                        table.def.columns[column].identity.is_some()
                            && table.def.sequence_name(column) == name
                    })
            })
    }

    /// Creates an engine tree with a name not in use: `base`, else `base.2`, `base.3`, ...
    pub(super) fn fresh_tree(
        &self,
        base: &str,
        index: Option<bool>,
    ) -> SqlResult<(String, TreeId)> {
        let mut attempt = 1u32;
        loop {
            let name = match attempt {
                1 => base.to_string(),
                n => format!("{base}.{n}"),
            };
            if self.db.table(&name).is_err() {
                let tree = match index {
                    None => self.db.create_table(&name)?,
                    Some(unique) => self.db.create_index(&name, unique)?,
                };
                return Ok((name, tree));
            }
            attempt += 1;
        }
    }

    /// Drops engine trees after the catalog stopped naming them (failures only leave
    /// leftovers for the next open).
    pub(super) fn drop_trees(&self, names: &[String]) {
        for name in names {
            if let Err(error) = self.db.drop_table(name) {
                log::warn!("dropping engine tree {name}: {error}");
            }
        }
    }

    pub(super) fn publish(&self, table: Table) {
        let mut state = self.state.write();
        state.tables.insert(table.def.name.clone(), Arc::new(table));
        state.version += 1;
    }

    pub(super) fn write_def(&self, txn: &mut Transaction, def: &TableDef) -> SqlResult<()> {
        Ok(txn.put(self.tree, def.name.as_bytes(), &def.encode())?)
    }

    /// Step 2's catalog writes: in the transaction block's engine transaction if there is
    /// one (the change then commits or rolls back with the block), else in their own
    /// transaction, committed here.
    pub(super) fn write_defs(
        &self,
        block: Option<&mut Transaction>,
        write: impl FnOnce(&mut Transaction) -> SqlResult<()>,
    ) -> SqlResult<()> {
        match block {
            Some(txn) => write(txn),
            None => {
                let mut txn = self.db.begin();
                write(&mut txn)?;
                txn.commit()?;
                Ok(())
            }
        }
    }

    /// The sequence of this name (CREATE SEQUENCE or a column's `<table>_<column>_seq`).
    pub fn sequence(&self, name: &str) -> SqlResult<Arc<Sequence>> {
        self.sequences()
            .into_iter()
            .find(|sequence| sequence.name == name)
            .ok_or_else(|| undefined_sequence(name))
    }

    /// TRUNCATE ... RESTART IDENTITY: the sequences of `table`'s columns (its own and those
    /// OWNED BY one of them) start again at their START value.
    pub fn restart_identities(&self, table: &str) -> SqlResult<()> {
        let own = self
            .table(table)?
            .sequences
            .iter()
            .flatten()
            .cloned()
            .collect::<Vec<_>>();
        let owned = self
            .sequences()
            .into_iter()
            .filter(|sequence| sequence.owner().is_some_and(|(owner, _)| owner == table));
        for sequence in own.into_iter().chain(owned) {
            sequence.set_value(sequence.options().start, false, None)?;
        }
        Ok(())
    }

    /// Every sequence, CREATE SEQUENCE ones first, each group by name.
    pub fn sequences(&self) -> Vec<Arc<Sequence>> {
        let state = self.state.read();
        let mut own: Vec<Arc<Sequence>> = state.sequences.values().cloned().collect();
        own.sort_by(|a, b| a.name.cmp(&b.name));
        let mut columns: Vec<Arc<Sequence>> = state
            .tables
            .values()
            .flat_map(|table| table.sequences.iter().flatten().cloned())
            .collect();
        columns.sort_by(|a, b| a.name.cmp(&b.name));
        own.extend(columns);
        own
    }
}

fn undefined_sequence(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_TABLE,
        format!("relation \"{name}\" does not exist"),
    )
}

/// A constraint the table does not have (42704).
pub(crate) fn undefined_constraint(constraint: &str, table: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_OBJECT,
        format!("constraint \"{constraint}\" for table \"{table}\" does not exist"),
    )
}
