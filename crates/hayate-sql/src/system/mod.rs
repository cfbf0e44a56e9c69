//! System catalogs: the `pg_catalog` and `information_schema` tables that tools read (psql's
//! `\d`, drivers and pgbench on start). They are not stored: a query that reads one gets rows
//! computed from the SQL catalog at that moment, so they can never disagree with it.
//!
//! A query's FROM resolves a name here when it is qualified with `pg_catalog` or
//! `information_schema`, or when it is not a user table.

use crate::catalog::Catalog;
use crate::error::SqlResult;
use crate::plan::OutputColumn;
use crate::types::{DataType, Value};

/// The schema every user table lives in.
pub const PUBLIC_SCHEMA: &str = "public";
pub const PUBLIC_NAMESPACE_OID: i64 = 2200;
pub const PG_CATALOG_NAMESPACE_OID: i64 = 11;
pub const INFORMATION_SCHEMA_NAMESPACE_OID: i64 = 13000;

/// A read-only table computed from the catalog.
#[derive(Debug, Clone)]
pub struct SystemTable {
    pub schema: &'static str,
    pub name: &'static str,
    pub columns: Vec<OutputColumn>,
    compute: fn(&Catalog) -> SqlResult<Vec<Vec<Value>>>,
}

impl SystemTable {
    /// The table's rows now, one value per column.
    pub fn rows(&self, catalog: &Catalog) -> SqlResult<Vec<Vec<Value>>> {
        (self.compute)(catalog)
    }
}

/// The system table `schema.name` (`schema` None: any system schema).
pub fn lookup(schema: Option<&str>, name: &str) -> Option<SystemTable> {
    let table = match name {
        "pg_namespace" => pg_namespace(),
        _ => return None,
    };
    match schema {
        Some(schema) if schema != table.schema => None,
        _ => Some(table),
    }
}

fn columns(columns: &[(&str, DataType)]) -> Vec<OutputColumn> {
    columns
        .iter()
        .map(|(name, data_type)| OutputColumn {
            name: name.to_string(),
            data_type: *data_type,
        })
        .collect()
}

fn pg_namespace() -> SystemTable {
    SystemTable {
        schema: "pg_catalog",
        name: "pg_namespace",
        columns: columns(&[("oid", DataType::Int8), ("nspname", DataType::Text)]),
        compute: |_| {
            Ok([
                (PG_CATALOG_NAMESPACE_OID, "pg_catalog"),
                (PUBLIC_NAMESPACE_OID, PUBLIC_SCHEMA),
                (INFORMATION_SCHEMA_NAMESPACE_OID, "information_schema"),
            ]
            .into_iter()
            .map(|(oid, name)| vec![Value::Int(oid), Value::Text(name.into())])
            .collect())
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_respects_the_schema() {
        assert!(lookup(None, "pg_namespace").is_some());
        assert!(lookup(Some("pg_catalog"), "pg_namespace").is_some());
        assert!(lookup(Some("public"), "pg_namespace").is_none());
        assert!(lookup(None, "no_such_table").is_none());
    }
}
