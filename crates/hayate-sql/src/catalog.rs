//! The SQL catalog: table definitions, kept in an engine table so they are as durable as the
//! rows (same log, same recovery).
//!
//! Layout: the engine table `sql.catalog` maps a table's name (UTF-8) to its definition
//! (`TableDef::encode`); the rows of table `t` live in the engine table `sql.table.t`.
//!
//! CREATE TABLE:
//! 1. Drop a leftover `sql.table.t` that has no catalog row (a crash between steps 2 and 3).
//! 2. Create the engine table `sql.table.t` (the engine's DDL is durable on return).
//! 3. Insert the catalog row in a transaction and commit it; the table exists from here on.
//!
//! DROP TABLE: delete the catalog row (commit), then drop the engine table. A crash between
//! the two leaves an engine table without a catalog row, which `Catalog::open` drops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hayate_engine::{Database, TreeId};
use parking_lot::{Mutex, RwLock};

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::types::DataType;

const CATALOG_TREE: &str = "sql.catalog";
const TABLE_TREE_PREFIX: &str = "sql.table.";
const FORMAT_VERSION: u8 = 1;

#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    pub name: String,
    pub data_type: DataType,
    pub not_null: bool,
    /// The DEFAULT expression as SQL text, bound again whenever a statement uses it.
    pub default: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TableDef {
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Column indexes of the primary key; empty: rows are keyed by a hidden row id.
    pub primary_key: Vec<usize>,
}

impl TableDef {
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|column| column.name == name)
    }

    pub fn types(&self) -> Vec<DataType> {
        self.columns.iter().map(|column| column.data_type).collect()
    }

    /// Format version 1, little-endian: u8 version, name, u16 column count, per column
    /// (name, u8 type tag, u32 varchar length, u8 flags: 1 = NOT NULL, 2 = has default,
    /// default text if flag 2), u16 primary key length, u16 column index each. Strings are
    /// u32 length + UTF-8.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT_VERSION];
        put_string(&mut out, &self.name);
        out.extend_from_slice(&(self.columns.len() as u16).to_le_bytes());
        for column in &self.columns {
            put_string(&mut out, &column.name);
            out.push(column.data_type.tag());
            out.extend_from_slice(&column.data_type.type_modifier().to_le_bytes());
            let flags = column.not_null as u8 | (column.default.is_some() as u8) << 1;
            out.push(flags);
            if let Some(default) = &column.default {
                put_string(&mut out, default);
            }
        }
        out.extend_from_slice(&(self.primary_key.len() as u16).to_le_bytes());
        for index in &self.primary_key {
            out.extend_from_slice(&(*index as u16).to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> SqlResult<TableDef> {
        let mut reader = Reader { bytes, offset: 0 };
        let corrupt = |what: &str| {
            SqlError::new(
                sqlstate::DATA_CORRUPTED,
                format!("corrupt table definition in {CATALOG_TREE}: {what}"),
            )
        };
        let version = reader.u8().ok_or_else(|| corrupt("empty"))?;
        if version != FORMAT_VERSION {
            return Err(corrupt(&format!("unknown format {version}")));
        }
        let name = reader.string().ok_or_else(|| corrupt("name"))?;
        let column_count = reader.u16().ok_or_else(|| corrupt("column count"))?;
        let mut columns = Vec::with_capacity(column_count as usize);
        for _ in 0..column_count {
            let column_name = reader.string().ok_or_else(|| corrupt("column name"))?;
            let tag = reader.u8().ok_or_else(|| corrupt("column type"))?;
            let length = reader.u32().ok_or_else(|| corrupt("column length"))?;
            let data_type =
                DataType::from_tag(tag, length).ok_or_else(|| corrupt("unknown type tag"))?;
            let flags = reader.u8().ok_or_else(|| corrupt("column flags"))?;
            let default = if flags & 2 != 0 {
                Some(reader.string().ok_or_else(|| corrupt("default"))?)
            } else {
                None
            };
            columns.push(ColumnDef {
                name: column_name,
                data_type,
                not_null: flags & 1 != 0,
                default,
            });
        }
        let key_count = reader.u16().ok_or_else(|| corrupt("key length"))?;
        let mut primary_key = Vec::with_capacity(key_count as usize);
        for _ in 0..key_count {
            let index = reader.u16().ok_or_else(|| corrupt("key column"))? as usize;
            if index >= columns.len() {
                return Err(corrupt("key column out of range"));
            }
            primary_key.push(index);
        }
        if reader.offset != bytes.len() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(TableDef {
            name,
            columns,
            primary_key,
        })
    }
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
}

struct Reader<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl Reader<'_> {
    fn take(&mut self, length: usize) -> Option<&[u8]> {
        let end = self.offset.checked_add(length)?;
        let slice = self.bytes.get(self.offset..end)?;
        self.offset = end;
        Some(slice)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn string(&mut self) -> Option<String> {
        let length = self.u32()? as usize;
        String::from_utf8(self.take(length)?.to_vec()).ok()
    }
}

/// A table as statements use it: its definition and its engine table.
#[derive(Debug)]
pub struct Table {
    pub def: TableDef,
    pub tree: TreeId,
    /// Next hidden row id (tables without a primary key); 0 until first used after open.
    next_row_id: AtomicU64,
    row_id_init: Mutex<bool>,
}

impl Table {
    pub fn has_row_id(&self) -> bool {
        self.def.primary_key.is_empty()
    }

    /// Allocates a hidden row id. The first call after open finds the largest id in use by a
    /// scan of the table (its last key).
    pub fn allocate_row_id(&self, db: &Database) -> SqlResult<i64> {
        {
            let mut initialized = self.row_id_init.lock();
            if !*initialized {
                let txn = db.begin_read_only();
                let mut last = 0u64;
                for row in txn.scan(
                    self.tree,
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Unbounded,
                )? {
                    let (key, _) = row?;
                    if key.len() == 8 {
                        last =
                            u64::from_be_bytes(key[..8].try_into().expect("8 bytes")) ^ (1 << 63);
                    }
                }
                txn.abort();
                self.next_row_id.store(last + 1, Ordering::SeqCst);
                *initialized = true;
            }
        }
        Ok(self.next_row_id.fetch_add(1, Ordering::SeqCst) as i64)
    }
}

struct CatalogState {
    tables: HashMap<String, Arc<Table>>,
    /// Bumped by every DDL: prepared statements bound at an older version are bound again.
    version: u64,
}

/// The tables of the database, loaded at open and changed by DDL.
pub struct Catalog {
    db: Database,
    tree: TreeId,
    state: RwLock<CatalogState>,
    /// Serializes DDL statements.
    ddl: Mutex<()>,
}

impl Catalog {
    pub fn open(db: Database) -> SqlResult<Catalog> {
        let tree = match db.table(CATALOG_TREE) {
            Ok(tree) => tree,
            Err(hayate_engine::Error::NoSuchTable(_)) => db.create_table(CATALOG_TREE)?,
            Err(error) => return Err(error.into()),
        };
        let mut tables = HashMap::new();
        let txn = db.begin_read_only();
        for row in txn.scan(tree, std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)? {
            let (_, value) = row?;
            let def = TableDef::decode(&value)?;
            let tree = db.table(&tree_name(&def.name))?;
            tables.insert(def.name.clone(), Arc::new(new_table(def, tree)));
        }
        txn.abort();
        for info in db.tables() {
            if let Some(name) = info.name.strip_prefix(TABLE_TREE_PREFIX) {
                if !tables.contains_key(name) {
                    log::warn!(
                        "dropping engine table {} left without catalog row",
                        info.name
                    );
                    db.drop_table(&info.name)?;
                }
            }
        }
        Ok(Catalog {
            db,
            tree,
            state: RwLock::new(CatalogState { tables, version: 1 }),
            ddl: Mutex::new(()),
        })
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    pub fn version(&self) -> u64 {
        self.state.read().version
    }

    pub fn table(&self, name: &str) -> SqlResult<Arc<Table>> {
        self.state.read().tables.get(name).cloned().ok_or_else(|| {
            SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("relation \"{name}\" does not exist"),
            )
        })
    }

    pub fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.state.read().tables.keys().cloned().collect();
        names.sort();
        names
    }

    /// Creates a table; false if it exists and `if_not_exists` is set.
    pub fn create_table(&self, def: TableDef, if_not_exists: bool) -> SqlResult<bool> {
        let _ddl = self.ddl.lock();
        if self.state.read().tables.contains_key(&def.name) {
            if if_not_exists {
                return Ok(false);
            }
            return Err(SqlError::new(
                sqlstate::DUPLICATE_TABLE,
                format!("relation \"{}\" already exists", def.name),
            ));
        }
        let tree_name = tree_name(&def.name);
        if self.db.table(&tree_name).is_ok() {
            self.db.drop_table(&tree_name)?;
        }
        let tree = self.db.create_table(&tree_name)?;
        let mut txn = self.db.begin();
        let written = txn
            .insert(self.tree, def.name.as_bytes(), &def.encode())
            .and_then(|()| txn.commit().map(|_| ()));
        if let Err(error) = written {
            let _ = self.db.drop_table(&tree_name);
            return Err(error.into());
        }
        let mut state = self.state.write();
        state
            .tables
            .insert(def.name.clone(), Arc::new(new_table(def, tree)));
        state.version += 1;
        Ok(true)
    }

    /// Drops a table; false if it does not exist and `if_exists` is set.
    pub fn drop_table(&self, name: &str, if_exists: bool) -> SqlResult<bool> {
        let _ddl = self.ddl.lock();
        if !self.state.read().tables.contains_key(name) {
            if if_exists {
                return Ok(false);
            }
            return Err(SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("table \"{name}\" does not exist"),
            ));
        }
        let mut txn = self.db.begin();
        txn.delete(self.tree, name.as_bytes())?;
        txn.commit()?;
        {
            let mut state = self.state.write();
            state.tables.remove(name);
            state.version += 1;
        }
        self.db.drop_table(&tree_name(name))?;
        Ok(true)
    }
}

fn tree_name(table: &str) -> String {
    format!("{TABLE_TREE_PREFIX}{table}")
}

/// A `Table` that is not stored, to bind a system table's columns against (see `system`).
pub(crate) fn stand_in_table(def: TableDef, tree: TreeId) -> Table {
    new_table(def, tree)
}

fn new_table(def: TableDef, tree: TreeId) -> Table {
    Table {
        def,
        tree,
        next_row_id: AtomicU64::new(0),
        row_id_init: Mutex::new(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_def_round_trip() {
        let def = TableDef {
            name: "accounts".into(),
            columns: vec![
                ColumnDef {
                    name: "id".into(),
                    data_type: DataType::Int4,
                    not_null: true,
                    default: None,
                },
                ColumnDef {
                    name: "name".into(),
                    data_type: DataType::Varchar(Some(20)),
                    not_null: false,
                    default: Some("'x'".into()),
                },
            ],
            primary_key: vec![0],
        };
        let bytes = def.encode();
        assert_eq!(TableDef::decode(&bytes).unwrap(), def);
        for cut in 0..bytes.len() {
            assert!(TableDef::decode(&bytes[..cut]).is_err());
        }
    }
}
