//! The system tables' columns and rows. Column types follow PostgreSQL with the types Hayate
//! has: `oid`/`regproc` are int8, `name`/`"char"`/`pg_node_tree` are text, arrays are text in
//! the array text form, `float4` is float8.

use super::array;
use super::pg_types::{builtin_types, type_of};
use super::{
    all_tables, Definition, Rule, SessionNames, Snapshot, SystemTable, UserTable, BOOL,
    BTREE_AM_OID, DEFAULT_COLLATION_OID, HEAP_AM_OID, INFORMATION_SCHEMA_NAMESPACE_OID, INT2, INT4,
    NAME, OID, OWNER_ROLE_OID, PG_CATALOG_NAMESPACE_OID, PUBLIC_NAMESPACE_OID, PUBLIC_SCHEMA, TEXT,
};
use crate::catalog::{Identity, EXPRESSION_KEY};
use crate::types::{DataType, Value};

const FLOAT: DataType = DataType::Float8;
const INT8: DataType = DataType::Int8;

/// Every system table's name.
pub(super) const NAMES: &[&str] = &[
    "pg_namespace",
    "pg_class",
    "pg_attribute",
    "pg_type",
    "pg_index",
    "pg_constraint",
    "pg_attrdef",
    "pg_am",
    "pg_database",
    "pg_roles",
    "pg_user",
    "pg_authid",
    "pg_settings",
    "pg_inherits",
    "pg_partitioned_table",
    "pg_policy",
    "pg_statistic_ext",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_namespace",
    "pg_trigger",
    "pg_description",
    "pg_depend",
    "pg_collation",
    "pg_tablespace",
    "pg_proc",
    "pg_range",
    "pg_enum",
    "pg_sequence",
    "pg_stat_replication",
    "pg_stat_activity",
    "pg_timezone_names",
    "pg_views",
    "pg_tables",
    "pg_indexes",
    "pg_sequences",
    "tables",
    "columns",
    "schemata",
];

type Rows = Vec<Vec<Value>>;

fn oid(value: i64) -> Value {
    Value::Int(value)
}
fn text(value: &str) -> Value {
    Value::Text(value.to_string())
}
fn int(value: i64) -> Value {
    Value::Int(value)
}
fn bool(value: bool) -> Value {
    Value::Bool(value)
}
const NULL: Value = Value::Null;

/// The definition of the system table `name`.
pub(super) fn definition(name: &str) -> Option<SystemTable> {
    let (schema, table_oid, cols, compute): Definition = match name {
        "pg_namespace" => (
            "pg_catalog",
            2615,
            &[
                ("oid", OID),
                ("nspname", NAME),
                ("nspowner", OID),
                ("nspacl", TEXT),
            ],
            pg_namespace,
        ),
        "pg_class" => ("pg_catalog", 1259, PG_CLASS_COLUMNS, pg_class),
        "pg_attribute" => ("pg_catalog", 1249, PG_ATTRIBUTE_COLUMNS, pg_attribute),
        "pg_type" => ("pg_catalog", 1247, PG_TYPE_COLUMNS, pg_type),
        "pg_index" => ("pg_catalog", 2610, PG_INDEX_COLUMNS, pg_index),
        "pg_constraint" => ("pg_catalog", 2606, PG_CONSTRAINT_COLUMNS, pg_constraint),
        "pg_attrdef" => (
            "pg_catalog",
            2604,
            &[
                ("oid", OID),
                ("adrelid", OID),
                ("adnum", INT2),
                ("adbin", TEXT),
            ],
            pg_attrdef,
        ),
        "pg_am" => (
            "pg_catalog",
            2601,
            &[
                ("oid", OID),
                ("amname", NAME),
                ("amhandler", OID),
                ("amtype", TEXT),
            ],
            |_, _| {
                vec![
                    vec![oid(HEAP_AM_OID), text("heap"), oid(3), text("t")],
                    vec![oid(BTREE_AM_OID), text("btree"), oid(330), text("i")],
                ]
            },
        ),
        "pg_database" => ("pg_catalog", 1262, PG_DATABASE_COLUMNS, pg_database),
        "pg_roles" => ("pg_catalog", 12001, PG_ROLES_COLUMNS, pg_roles),
        "pg_authid" => ("pg_catalog", 1260, PG_ROLES_COLUMNS, pg_roles),
        "pg_user" => (
            "pg_catalog",
            12002,
            &[
                ("usename", NAME),
                ("usesysid", OID),
                ("usecreatedb", BOOL),
                ("usesuper", BOOL),
                ("userepl", BOOL),
                ("usebypassrls", BOOL),
                ("passwd", TEXT),
                ("valuntil", TEXT),
                ("useconfig", TEXT),
            ],
            |_, names| {
                vec![vec![
                    text(&names.user),
                    oid(OWNER_ROLE_OID),
                    bool(true),
                    bool(true),
                    bool(true),
                    bool(true),
                    text("********"),
                    NULL,
                    NULL,
                ]]
            },
        ),
        "pg_settings" => ("pg_catalog", 12003, PG_SETTINGS_COLUMNS, pg_settings),
        "pg_inherits" => (
            "pg_catalog",
            2611,
            &[
                ("inhrelid", OID),
                ("inhparent", OID),
                ("inhseqno", INT4),
                ("inhdetachpending", BOOL),
            ],
            no_rows,
        ),
        "pg_partitioned_table" => (
            "pg_catalog",
            3350,
            &[
                ("partrelid", OID),
                ("partstrat", TEXT),
                ("partnatts", INT2),
                ("partdefid", OID),
                ("partattrs", TEXT),
                ("partclass", TEXT),
                ("partcollation", TEXT),
                ("partexprs", TEXT),
            ],
            no_rows,
        ),
        "pg_policy" => (
            "pg_catalog",
            3256,
            &[
                ("oid", OID),
                ("polname", NAME),
                ("polrelid", OID),
                ("polcmd", TEXT),
                ("polpermissive", BOOL),
                ("polroles", TEXT),
                ("polqual", TEXT),
                ("polwithcheck", TEXT),
            ],
            no_rows,
        ),
        "pg_statistic_ext" => (
            "pg_catalog",
            3381,
            &[
                ("oid", OID),
                ("stxrelid", OID),
                ("stxname", NAME),
                ("stxnamespace", OID),
                ("stxowner", OID),
                ("stxstattarget", INT4),
                ("stxkeys", TEXT),
                ("stxkind", TEXT),
                ("stxexprs", TEXT),
            ],
            no_rows,
        ),
        "pg_publication" => (
            "pg_catalog",
            6104,
            &[
                ("oid", OID),
                ("pubname", NAME),
                ("pubowner", OID),
                ("puballtables", BOOL),
                ("pubinsert", BOOL),
                ("pubupdate", BOOL),
                ("pubdelete", BOOL),
                ("pubtruncate", BOOL),
                ("pubviaroot", BOOL),
            ],
            no_rows,
        ),
        "pg_publication_rel" => (
            "pg_catalog",
            6106,
            &[
                ("oid", OID),
                ("prpubid", OID),
                ("prrelid", OID),
                ("prqual", TEXT),
                ("prattrs", TEXT),
            ],
            no_rows,
        ),
        "pg_publication_namespace" => (
            "pg_catalog",
            6237,
            &[("oid", OID), ("pnpubid", OID), ("pnnspid", OID)],
            no_rows,
        ),
        "pg_trigger" => (
            "pg_catalog",
            2620,
            &[
                ("oid", OID),
                ("tgrelid", OID),
                ("tgparentid", OID),
                ("tgname", NAME),
                ("tgfoid", OID),
                ("tgtype", INT2),
                ("tgenabled", TEXT),
                ("tgisinternal", BOOL),
                ("tgconstrrelid", OID),
                ("tgconstrindid", OID),
                ("tgconstraint", OID),
                ("tgdeferrable", BOOL),
                ("tginitdeferred", BOOL),
                ("tgnargs", INT2),
                ("tgattr", TEXT),
                ("tgargs", TEXT),
                ("tgqual", TEXT),
                ("tgoldtable", NAME),
                ("tgnewtable", NAME),
            ],
            no_rows,
        ),
        "pg_description" => (
            "pg_catalog",
            2609,
            &[
                ("objoid", OID),
                ("classoid", OID),
                ("objsubid", INT4),
                ("description", TEXT),
            ],
            |_, _| {
                // PostgreSQL's comment on the public schema (pg_dump compares with it).
                vec![vec![
                    oid(PUBLIC_NAMESPACE_OID),
                    oid(2615),
                    int(0),
                    text("standard public schema"),
                ]]
            },
        ),
        "pg_depend" => (
            "pg_catalog",
            2608,
            &[
                ("classid", OID),
                ("objid", OID),
                ("objsubid", INT4),
                ("refclassid", OID),
                ("refobjid", OID),
                ("refobjsubid", INT4),
                ("deptype", TEXT),
            ],
            pg_depend,
        ),
        "pg_collation" => (
            "pg_catalog",
            3456,
            &[
                ("oid", OID),
                ("collname", NAME),
                ("collnamespace", OID),
                ("collowner", OID),
                ("collprovider", TEXT),
                ("collisdeterministic", BOOL),
                ("collencoding", INT4),
                ("collcollate", TEXT),
                ("collctype", TEXT),
            ],
            |_, _| {
                [
                    (100, "default", "d", -1, NULL),
                    (950, "C", "c", -1, text("C")),
                ]
                .into_iter()
                .map(|(collation, name, provider, encoding, locale)| {
                    vec![
                        oid(collation),
                        text(name),
                        oid(PG_CATALOG_NAMESPACE_OID),
                        oid(OWNER_ROLE_OID),
                        text(provider),
                        bool(true),
                        int(encoding),
                        locale.clone(),
                        locale,
                    ]
                })
                .collect()
            },
        ),
        "pg_tablespace" => (
            "pg_catalog",
            1213,
            &[
                ("oid", OID),
                ("spcname", NAME),
                ("spcowner", OID),
                ("spcacl", TEXT),
                ("spcoptions", TEXT),
            ],
            |_, _| {
                [(1663, "pg_default"), (1664, "pg_global")]
                    .into_iter()
                    .map(|(space, name)| {
                        vec![oid(space), text(name), oid(OWNER_ROLE_OID), NULL, NULL]
                    })
                    .collect()
            },
        ),
        "pg_proc" => (
            "pg_catalog",
            1255,
            &[
                ("oid", OID),
                ("proname", NAME),
                ("pronamespace", OID),
                ("proowner", OID),
                ("prokind", TEXT),
                ("proretset", BOOL),
                ("prorettype", OID),
                ("pronargs", INT2),
                ("proargtypes", TEXT),
                ("prolang", OID),
                ("proacl", TEXT),
            ],
            pg_proc,
        ),
        "pg_range" => (
            "pg_catalog",
            3541,
            &[
                ("rngtypid", OID),
                ("rngsubtype", OID),
                ("rngmultitypid", OID),
                ("rngcollation", OID),
                ("rngsubopc", OID),
                ("rngcanonical", OID),
                ("rngsubdiff", OID),
            ],
            no_rows,
        ),
        "pg_enum" => (
            "pg_catalog",
            3501,
            &[
                ("oid", OID),
                ("enumtypid", OID),
                ("enumsortorder", FLOAT),
                ("enumlabel", NAME),
            ],
            pg_enum,
        ),
        "pg_sequence" => (
            "pg_catalog",
            2224,
            &[
                ("seqrelid", OID),
                ("seqtypid", OID),
                ("seqstart", INT8),
                ("seqincrement", INT8),
                ("seqmax", INT8),
                ("seqmin", INT8),
                ("seqcache", INT8),
                ("seqcycle", BOOL),
            ],
            pg_sequence,
        ),
        "pg_stat_replication" => (
            "pg_catalog",
            12020,
            &[
                ("pid", INT4),
                ("usesysid", OID),
                ("usename", NAME),
                ("application_name", TEXT),
                ("client_addr", TEXT),
                ("client_hostname", TEXT),
                ("client_port", INT4),
                ("backend_start", TEXT),
                ("backend_xmin", TEXT),
                ("state", TEXT),
                ("sent_lsn", TEXT),
                ("write_lsn", TEXT),
                ("flush_lsn", TEXT),
                ("replay_lsn", TEXT),
                ("write_lag", DataType::Interval),
                ("flush_lag", DataType::Interval),
                ("replay_lag", DataType::Interval),
                ("sync_priority", INT4),
                ("sync_state", TEXT),
                ("reply_time", TEXT),
            ],
            pg_stat_replication,
        ),
        "pg_stat_activity" => (
            "pg_catalog",
            12015,
            &[
                ("datid", OID),
                ("datname", NAME),
                ("pid", INT4),
                ("leader_pid", INT4),
                ("usesysid", OID),
                ("usename", NAME),
                ("application_name", TEXT),
                ("client_addr", TEXT),
                ("client_hostname", TEXT),
                ("client_port", INT4),
                ("backend_start", DataType::TimestampTz),
                ("xact_start", DataType::TimestampTz),
                ("query_start", DataType::TimestampTz),
                ("state_change", DataType::TimestampTz),
                ("wait_event_type", TEXT),
                ("wait_event", TEXT),
                ("state", TEXT),
                ("backend_xid", TEXT),
                ("backend_xmin", TEXT),
                ("query_id", DataType::Int8),
                ("query", TEXT),
                ("backend_type", TEXT),
            ],
            pg_stat_activity,
        ),
        "pg_timezone_names" => (
            "pg_catalog",
            12133,
            &[
                ("name", TEXT),
                ("abbrev", TEXT),
                ("utc_offset", DataType::Interval),
                ("is_dst", BOOL),
            ],
            pg_timezone_names,
        ),
        "pg_views" => (
            "pg_catalog",
            12004,
            &[
                ("schemaname", NAME),
                ("viewname", NAME),
                ("viewowner", NAME),
                ("definition", TEXT),
            ],
            |snapshot, names| {
                snapshot
                    .views
                    .iter()
                    .map(|(_, view)| {
                        vec![
                            text(PUBLIC_SCHEMA),
                            text(&view.def.name),
                            text(&names.user),
                            text(&view.def.query),
                        ]
                    })
                    .collect()
            },
        ),
        "pg_tables" => (
            "pg_catalog",
            12006,
            &[
                ("schemaname", NAME),
                ("tablename", NAME),
                ("tableowner", NAME),
                ("tablespace", NAME),
                ("hasindexes", BOOL),
                ("hasrules", BOOL),
                ("hastriggers", BOOL),
                ("rowsecurity", BOOL),
            ],
            |snapshot, names| {
                snapshot
                    .tables
                    .iter()
                    .map(|table| {
                        vec![
                            text(PUBLIC_SCHEMA),
                            text(table.name()),
                            text(&names.user),
                            NULL,
                            bool(!table.indexes.is_empty()),
                            bool(false),
                            bool(has_foreign_keys(snapshot, table)),
                            bool(false),
                        ]
                    })
                    .collect()
            },
        ),
        "pg_indexes" => (
            "pg_catalog",
            12008,
            &[
                ("schemaname", NAME),
                ("tablename", NAME),
                ("indexname", NAME),
                ("tablespace", NAME),
                ("indexdef", TEXT),
            ],
            |snapshot, _| {
                let mut rows = Vec::new();
                for table in &snapshot.tables {
                    for index in &table.indexes {
                        rows.push(vec![
                            text(PUBLIC_SCHEMA),
                            text(table.name()),
                            text(&index.name),
                            NULL,
                            text(&index.definition(table)),
                        ]);
                    }
                }
                rows
            },
        ),
        "pg_sequences" => (
            "pg_catalog",
            12010,
            &[
                ("schemaname", NAME),
                ("sequencename", NAME),
                ("sequenceowner", NAME),
                ("data_type", TEXT),
                ("start_value", INT8),
                ("min_value", INT8),
                ("max_value", INT8),
                ("increment_by", INT8),
                ("cycle", BOOL),
                ("cache_size", INT8),
                ("last_value", INT8),
            ],
            |snapshot, names| {
                snapshot
                    .sequences
                    .iter()
                    .map(|info| {
                        let options = info.sequence.options();
                        // NULL until a value was handed out, as in PostgreSQL.
                        let last = match info.sequence.last_value() {
                            Ok((value, true)) => int(value),
                            _ => NULL,
                        };
                        vec![
                            text(PUBLIC_SCHEMA),
                            text(&info.sequence.name),
                            text(&names.user),
                            text(options.data_type.name()),
                            int(options.start),
                            int(options.min),
                            int(options.max),
                            int(options.increment),
                            bool(options.cycle),
                            int(options.cache),
                            last,
                        ]
                    })
                    .collect()
            },
        ),
        "tables" => (
            "information_schema",
            13100,
            &[
                ("table_catalog", NAME),
                ("table_schema", NAME),
                ("table_name", NAME),
                ("table_type", TEXT),
                ("self_referencing_column_name", NAME),
                ("reference_generation", TEXT),
                ("user_defined_type_catalog", NAME),
                ("user_defined_type_schema", NAME),
                ("user_defined_type_name", NAME),
                ("is_insertable_into", TEXT),
                ("is_typed", TEXT),
                ("commit_action", TEXT),
            ],
            information_schema_tables,
        ),
        "columns" => (
            "information_schema",
            13101,
            INFORMATION_SCHEMA_COLUMNS_COLUMNS,
            information_schema_columns,
        ),
        "schemata" => (
            "information_schema",
            13102,
            &[
                ("catalog_name", NAME),
                ("schema_name", NAME),
                ("schema_owner", NAME),
                ("default_character_set_catalog", NAME),
                ("default_character_set_schema", NAME),
                ("default_character_set_name", NAME),
                ("sql_path", TEXT),
            ],
            |_, names| {
                ["pg_catalog", PUBLIC_SCHEMA, "information_schema"]
                    .into_iter()
                    .map(|schema| {
                        vec![
                            text(&names.database),
                            text(schema),
                            text(&names.user),
                            NULL,
                            NULL,
                            NULL,
                            NULL,
                        ]
                    })
                    .collect()
            },
        ),
        _ => return None,
    };
    let name = NAMES.iter().find(|known| **known == name)?;
    Some(SystemTable {
        schema,
        name,
        oid: table_oid,
        columns: cols,
        compute,
    })
}

fn no_rows(_: &Snapshot, _: &SessionNames) -> Rows {
    Vec::new()
}

fn pg_namespace(_: &Snapshot, _: &SessionNames) -> Rows {
    [
        (PG_CATALOG_NAMESPACE_OID, "pg_catalog"),
        (PUBLIC_NAMESPACE_OID, PUBLIC_SCHEMA),
        (INFORMATION_SCHEMA_NAMESPACE_OID, "information_schema"),
    ]
    .into_iter()
    .map(|(namespace, name)| vec![oid(namespace), text(name), oid(OWNER_ROLE_OID), NULL])
    .collect()
}

fn namespace_oid(schema: &str) -> i64 {
    match schema {
        "pg_catalog" => PG_CATALOG_NAMESPACE_OID,
        "information_schema" => INFORMATION_SCHEMA_NAMESPACE_OID,
        _ => PUBLIC_NAMESPACE_OID,
    }
}

const PG_CLASS_COLUMNS: &[(&str, DataType)] = &[
    ("oid", OID),
    ("relname", NAME),
    ("relnamespace", OID),
    ("reltype", OID),
    ("reloftype", OID),
    ("relowner", OID),
    ("relam", OID),
    ("relfilenode", OID),
    ("reltablespace", OID),
    ("relpages", INT4),
    ("reltuples", FLOAT),
    ("relallvisible", INT4),
    ("reltoastrelid", OID),
    ("relhasindex", BOOL),
    ("relisshared", BOOL),
    ("relpersistence", TEXT),
    ("relkind", TEXT),
    ("relnatts", INT2),
    ("relchecks", INT2),
    ("relhasrules", BOOL),
    ("relhastriggers", BOOL),
    ("relhassubclass", BOOL),
    ("relrowsecurity", BOOL),
    ("relforcerowsecurity", BOOL),
    ("relispopulated", BOOL),
    ("relreplident", TEXT),
    ("relispartition", BOOL),
    ("relrewrite", OID),
    ("relfrozenxid", OID),
    ("relminmxid", OID),
    ("relacl", TEXT),
    ("reloptions", TEXT),
    ("relpartbound", TEXT),
];

/// One pg_class row; `kind` is r (table), i (index) or v (view).
fn class_row(
    relation: i64,
    name: &str,
    namespace: i64,
    row_type: i64,
    kind: &str,
    attributes: usize,
    (has_index, checks, triggers): (bool, usize, bool),
) -> Vec<Value> {
    let am = match kind {
        "i" => BTREE_AM_OID,
        "r" => HEAP_AM_OID,
        _ => 0,
    };
    vec![
        oid(relation),
        text(name),
        oid(namespace),
        oid(row_type),
        oid(0),
        oid(OWNER_ROLE_OID),
        oid(am),
        oid(if kind == "v" { 0 } else { relation }),
        oid(0),
        int(0),
        Value::Float(-1.0),
        int(0),
        oid(0),
        bool(has_index),
        bool(false),
        text("p"),
        text(kind),
        int(attributes as i64),
        int(checks as i64),
        bool(false),
        bool(triggers),
        bool(false),
        bool(false),
        bool(false),
        bool(true),
        text(if kind == "v" { "n" } else { "d" }),
        bool(false),
        oid(0),
        oid(0),
        oid(0),
        NULL,
        NULL,
        NULL,
    ]
}

/// The sequence name of a default `nextval('name'[::regclass])`.
fn nextval_argument(default: &str) -> Option<String> {
    let start = default.find("nextval('")? + "nextval('".len();
    let length = default[start..].find('\'')?;
    Some(default[start..start + length].to_string())
}

/// True if the table has foreign keys or is referenced by one.
fn has_foreign_keys(snapshot: &Snapshot, table: &UserTable) -> bool {
    !table.table.def.foreign_keys.is_empty()
        || snapshot.tables.iter().any(|other| {
            other
                .table
                .def
                .foreign_keys
                .iter()
                .any(|key| key.table == table.name())
        })
}

/// The dependencies pg_dump orders its output by: a column's sequence on its column
/// ('a' for SERIAL, 'i' for identity: `ALTER SEQUENCE ... OWNED BY`), a SERIAL default on its
/// sequence, a view on the tables and views it reads.
fn pg_depend(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    const PG_CLASS: i64 = 1259;
    const PG_ATTRDEF: i64 = 2604;
    let row = |classid, objid, refobjid, refobjsubid, deptype| {
        vec![
            oid(classid),
            oid(objid),
            int(0),
            oid(PG_CLASS),
            oid(refobjid),
            int(refobjsubid),
            text(deptype),
        ]
    };
    let mut rows = Vec::new();
    for info in &snapshot.sequences {
        let Some((table_oid, attnum)) = info.owner else {
            continue;
        };
        let Some(table) = snapshot.table_by_oid(table_oid) else {
            continue;
        };
        let column = &table.table.def.columns[(attnum - 1) as usize];
        let identity = matches!(
            column.identity,
            Some(Identity::Always | Identity::ByDefault)
        );
        rows.push(row(
            PG_CLASS,
            info.oid,
            table_oid,
            attnum,
            if identity { "i" } else { "a" },
        ));
    }
    // A default that calls nextval('s') depends on s.
    for table in &snapshot.tables {
        for position in 0..table.table.def.columns.len() {
            let Some(default) = table.table.def.default_shown(position) else {
                continue;
            };
            let Some(sequence) = nextval_argument(&default) else {
                continue;
            };
            if let Some(info) = snapshot.sequence(&Value::Text(sequence)) {
                let attnum = position as i64 + 1;
                rows.push(row(PG_ATTRDEF, table.oid << 16 | attnum, info.oid, 0, "n"));
            }
        }
    }
    for (view_oid, view) in &snapshot.views {
        for read in &view.def.reads {
            if let Some(read_oid) = snapshot.relation_oid(&format!("\"{read}\"")) {
                rows.push(row(PG_CLASS, *view_oid, read_oid, 0, "n"));
            }
        }
    }
    rows
}

fn pg_class(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        let def = &table.table.def;
        let mut row = class_row(
            table.oid,
            table.name(),
            PUBLIC_NAMESPACE_OID,
            table.row_type_oid(),
            "r",
            def.columns.len(),
            // pg_dump reads the CHECKs of tables with relchecks and the foreign keys of
            // tables with triggers (PostgreSQL enforces foreign keys by triggers).
            (
                !table.indexes.is_empty(),
                def.checks.len(),
                has_foreign_keys(snapshot, table),
            ),
        );
        // reltuples: the rows at the last ANALYZE (-1 before the first, as PostgreSQL 14+).
        if let Some(taken) = table.table.statistics.get() {
            let reltuples = (PG_CLASS_COLUMNS.iter())
                .position(|(name, _)| *name == "reltuples")
                .expect("pg_class has reltuples");
            row[reltuples] = Value::Float(taken.rows);
        }
        rows.push(row);
        for index in &table.indexes {
            rows.push(class_row(
                index.oid,
                &index.name,
                PUBLIC_NAMESPACE_OID,
                0,
                "i",
                index.columns.len(),
                (false, 0, false),
            ));
        }
    }
    for (view_oid, view) in &snapshot.views {
        rows.push(class_row(
            *view_oid,
            &view.def.name,
            PUBLIC_NAMESPACE_OID,
            0,
            "v",
            view.def.columns.len(),
            (false, 0, false),
        ));
    }
    for info in &snapshot.sequences {
        rows.push(class_row(
            info.oid,
            &info.sequence.name,
            PUBLIC_NAMESPACE_OID,
            0,
            "S",
            3,
            (false, 0, false),
        ));
    }
    for system in all_tables() {
        let kind = if system.oid >= 12000 { "v" } else { "r" };
        rows.push(class_row(
            system.oid,
            system.name,
            namespace_oid(system.schema),
            0,
            kind,
            system.columns.len(),
            (false, 0, false),
        ));
    }
    rows
}

const PG_ATTRIBUTE_COLUMNS: &[(&str, DataType)] = &[
    ("attrelid", OID),
    ("attname", NAME),
    ("atttypid", OID),
    ("attstattarget", INT4),
    ("attlen", INT2),
    ("attnum", INT2),
    ("attndims", INT4),
    ("attcacheoff", INT4),
    ("atttypmod", INT4),
    ("attbyval", BOOL),
    ("attalign", TEXT),
    ("attstorage", TEXT),
    ("attcompression", TEXT),
    ("attnotnull", BOOL),
    ("atthasdef", BOOL),
    ("atthasmissing", BOOL),
    ("attidentity", TEXT),
    ("attgenerated", TEXT),
    ("attisdropped", BOOL),
    ("attislocal", BOOL),
    ("attinhcount", INT4),
    ("attcollation", OID),
    ("attacl", TEXT),
    ("attoptions", TEXT),
    ("attfdwoptions", TEXT),
    ("attmissingval", TEXT),
];

fn attribute_row(
    relation: i64,
    name: &str,
    data_type: DataType,
    number: usize,
    not_null: bool,
    has_default: bool,
    identity: &str,
) -> Vec<Value> {
    let (type_oid, typmod) = type_of(data_type);
    let builtin = builtin_types().into_iter().find(|t| t.oid == type_oid);
    let (length, by_value, collation) = match data_type {
        // An enum is a 4-byte value in PostgreSQL (its label's oid), stored plain.
        DataType::Enum(_) => (4, true, 0),
        _ => builtin
            .map(|t| (t.length, t.by_value, t.collation))
            .unwrap_or((-1, false, 0)),
    };
    let collation = if collation != 0 {
        DEFAULT_COLLATION_OID
    } else {
        0
    };
    vec![
        oid(relation),
        text(name),
        oid(type_oid),
        int(-1),
        int(length),
        int(number as i64),
        int(0),
        int(-1),
        int(typmod),
        bool(by_value),
        text(if length == 8 { "d" } else { "i" }),
        text(if length == -1 { "x" } else { "p" }),
        text(""),
        bool(not_null),
        bool(has_default),
        bool(false),
        text(identity),
        text(""),
        bool(false),
        bool(true),
        int(0),
        oid(collation),
        NULL,
        NULL,
        NULL,
        NULL,
    ]
}

fn pg_attribute(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        let def = &table.table.def;
        let columns = &def.columns;
        for (position, column) in columns.iter().enumerate() {
            let identity = match column.identity {
                Some(Identity::Always) => "a",
                Some(Identity::ByDefault) => "d",
                _ => "",
            };
            rows.push(attribute_row(
                table.oid,
                &column.name,
                column.data_type,
                position + 1,
                column.not_null,
                def.default_shown(position).is_some(),
                identity,
            ));
        }
        for index in &table.indexes {
            for position in 0..index.columns.len() {
                let (name, _, data_type) = index.key(table, position);
                rows.push(attribute_row(
                    index.oid,
                    &name,
                    data_type,
                    position + 1,
                    false,
                    false,
                    "",
                ));
            }
        }
    }
    for (view_oid, view) in &snapshot.views {
        for (position, (name, data_type)) in view.def.columns.iter().enumerate() {
            rows.push(attribute_row(
                *view_oid,
                name,
                *data_type,
                position + 1,
                false,
                false,
                "",
            ));
        }
    }
    for system in all_tables() {
        for (position, (name, data_type)) in system.columns.iter().enumerate() {
            rows.push(attribute_row(
                system.oid,
                name,
                *data_type,
                position + 1,
                false,
                false,
                "",
            ));
        }
    }
    rows
}

const PG_TYPE_COLUMNS: &[(&str, DataType)] = &[
    ("oid", OID),
    ("typname", NAME),
    ("typnamespace", OID),
    ("typowner", OID),
    ("typlen", INT2),
    ("typbyval", BOOL),
    ("typtype", TEXT),
    ("typcategory", TEXT),
    ("typispreferred", BOOL),
    ("typisdefined", BOOL),
    ("typdelim", TEXT),
    ("typrelid", OID),
    ("typsubscript", TEXT),
    ("typelem", OID),
    ("typarray", OID),
    ("typinput", TEXT),
    ("typoutput", TEXT),
    ("typreceive", TEXT),
    ("typsend", TEXT),
    ("typalign", TEXT),
    ("typstorage", TEXT),
    ("typnotnull", BOOL),
    ("typbasetype", OID),
    ("typtypmod", INT4),
    ("typndims", INT4),
    ("typcollation", OID),
    ("typdefault", TEXT),
    ("typacl", TEXT),
];

#[allow(clippy::too_many_arguments)]
fn type_row(
    type_oid: i64,
    name: &str,
    length: i64,
    by_value: bool,
    kind: &str,
    category: &str,
    relation: i64,
    element: i64,
    array: i64,
    io: &str,
    collation: i64,
) -> Vec<Value> {
    vec![
        oid(type_oid),
        text(name),
        oid(PG_CATALOG_NAMESPACE_OID),
        oid(OWNER_ROLE_OID),
        int(length),
        bool(by_value),
        text(kind),
        text(category),
        bool(false),
        bool(true),
        text(","),
        oid(relation),
        text(if element != 0 {
            "array_subscript_handler"
        } else {
            "-"
        }),
        oid(element),
        oid(array),
        text(&format!("{io}in")),
        text(&format!("{io}out")),
        text(&format!("{io}recv")),
        text(&format!("{io}send")),
        text(if length == 8 { "d" } else { "i" }),
        text(if length == -1 { "x" } else { "p" }),
        bool(false),
        oid(0),
        int(-1),
        int(0),
        oid(collation),
        NULL,
        NULL,
    ]
}

fn pg_type(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for builtin in builtin_types() {
        let io = if builtin.category == "A" && builtin.name.starts_with('_') {
            "array_"
        } else {
            builtin.name
        };
        rows.push(type_row(
            builtin.oid,
            builtin.name,
            builtin.length,
            builtin.by_value,
            builtin.kind,
            builtin.category,
            0,
            builtin.element,
            builtin.array,
            io,
            builtin.collation,
        ));
    }
    for table in &snapshot.tables {
        let mut row = type_row(
            table.row_type_oid(),
            table.name(),
            -1,
            false,
            "c",
            "C",
            table.oid,
            0,
            0,
            "record_",
            0,
        );
        row[2] = oid(PUBLIC_NAMESPACE_OID);
        rows.push(row);
    }
    for enum_type in &snapshot.enums {
        let (type_oid, _) = type_of(DataType::Enum(enum_type.oid));
        let mut row = type_row(
            type_oid,
            &enum_type.name,
            4,
            true,
            "e",
            "E",
            0,
            0,
            0,
            "enum_",
            0,
        );
        row[2] = oid(PUBLIC_NAMESPACE_OID);
        rows.push(row);
    }
    rows
}

/// pg_enum: every label of every enum type, with its sort order.
fn pg_enum(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for enum_type in &snapshot.enums {
        for label in &enum_type.labels {
            rows.push(vec![
                oid(super::enum_label_oid(enum_type.oid, label.number)),
                oid(enum_type.oid as i64),
                Value::Float(label.sort_order as f64),
                text(&label.label),
            ]);
        }
    }
    rows
}

const PG_INDEX_COLUMNS: &[(&str, DataType)] = &[
    ("indexrelid", OID),
    ("indrelid", OID),
    ("indnatts", INT2),
    ("indnkeyatts", INT2),
    ("indisunique", BOOL),
    ("indnullsnotdistinct", BOOL),
    ("indisprimary", BOOL),
    ("indisexclusion", BOOL),
    ("indimmediate", BOOL),
    ("indisclustered", BOOL),
    ("indisvalid", BOOL),
    ("indcheckxmin", BOOL),
    ("indisready", BOOL),
    ("indislive", BOOL),
    ("indisreplident", BOOL),
    ("indkey", TEXT),
    ("indcollation", TEXT),
    ("indclass", TEXT),
    ("indoption", TEXT),
    ("indexprs", TEXT),
    ("indpred", TEXT),
];

fn pg_index(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        for index in &table.indexes {
            let count = index.columns.len() as i64;
            rows.push(vec![
                oid(index.oid),
                oid(table.oid),
                int(count),
                int(count),
                bool(index.unique),
                bool(false),
                bool(index.primary),
                bool(false),
                bool(true),
                bool(false),
                bool(true),
                bool(false),
                bool(true),
                bool(true),
                bool(false),
                // An expression key is 0, its text in indexprs.
                text(&array::vector(index.columns.iter().map(|c| match *c {
                    EXPRESSION_KEY => 0,
                    c => c as i64 + 1,
                }))),
                text(&array::vector(index.columns.iter().map(|_| 0))),
                text(&array::vector(index.columns.iter().map(|_| 0))),
                text(&array::vector((0..index.columns.len()).map(|position| {
                    i64::from(index.options.get(position).copied().unwrap_or(0))
                }))),
                match index.expressions.is_empty() {
                    true => NULL,
                    false => text(
                        &(index.expressions.iter())
                            .map(|expression| expression.text.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    ),
                },
                index.predicate.as_deref().map_or(NULL, text),
            ]);
        }
    }
    rows
}

const PG_CONSTRAINT_COLUMNS: &[(&str, DataType)] = &[
    ("oid", OID),
    ("conname", NAME),
    ("connamespace", OID),
    ("contype", TEXT),
    ("condeferrable", BOOL),
    ("condeferred", BOOL),
    ("convalidated", BOOL),
    ("conrelid", OID),
    ("contypid", OID),
    ("conindid", OID),
    ("conparentid", OID),
    ("confrelid", OID),
    ("confupdtype", TEXT),
    ("confdeltype", TEXT),
    ("confmatchtype", TEXT),
    ("conislocal", BOOL),
    ("coninhcount", INT4),
    ("connoinherit", BOOL),
    ("conkey", DataType::Int2Array),
    ("confkey", DataType::Int2Array),
    ("conbin", TEXT),
];

fn pg_constraint(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        let def = &table.table.def;
        let attnums = |columns: &mut dyn Iterator<Item = usize>| {
            let attnums: Vec<Option<String>> = columns.map(|c| Some((c + 1).to_string())).collect();
            text(&array::format(&attnums))
        };
        for (position, check) in def.checks.iter().enumerate() {
            let mut read = (0..def.columns.len()).filter(|c| check.mentions(&def.columns[*c].name));
            rows.push(vec![
                oid(table.rule_oid(Rule::Check(position))),
                text(&check.name),
                oid(PUBLIC_NAMESPACE_OID),
                text("c"),
                bool(false),
                bool(false),
                bool(true),
                oid(table.oid),
                oid(0),
                oid(0),
                oid(0),
                oid(0),
                text(" "),
                text(" "),
                text(" "),
                bool(true),
                int(0),
                bool(false),
                attnums(&mut read),
                NULL,
                text(&check.expr),
            ]);
        }
        for (position, key) in def.foreign_keys.iter().enumerate() {
            let parent = snapshot.tables.iter().find(|t| t.name() == key.table);
            let (parent_oid, parent_key, parent_index) = match parent {
                Some(parent) => {
                    let referenced: Vec<usize> = key
                        .referenced
                        .iter()
                        .filter_map(|name| parent.table.def.column_index(name))
                        .collect();
                    let index = parent
                        .indexes
                        .iter()
                        .find(|index| {
                            index.unique
                                && index.predicate.is_none()
                                && index.columns.len() == referenced.len()
                                && index.columns.iter().all(|c| referenced.contains(c))
                        })
                        .map_or(0, |index| index.oid);
                    (parent.oid, attnums(&mut referenced.into_iter()), index)
                }
                None => (0, NULL, 0),
            };
            rows.push(vec![
                oid(table.rule_oid(Rule::ForeignKey(position))),
                text(&key.name),
                oid(PUBLIC_NAMESPACE_OID),
                text("f"),
                bool(key.deferral.deferrable()),
                bool(key.deferral == crate::catalog::Deferral::InitiallyDeferred),
                bool(true),
                oid(table.oid),
                oid(0),
                oid(parent_index),
                oid(0),
                oid(parent_oid),
                text(key.on_update.letter()),
                text(key.on_delete.letter()),
                text("s"),
                bool(true),
                int(0),
                bool(true),
                attnums(&mut key.columns.iter().copied()),
                parent_key,
                NULL,
            ]);
        }
        for index in &table.indexes {
            let Some(constraint) = index.constraint else {
                continue;
            };
            let key: Vec<Option<String>> = index
                .columns
                .iter()
                .map(|column| Some((column + 1).to_string()))
                .collect();
            rows.push(vec![
                oid(constraint),
                text(&index.name),
                oid(PUBLIC_NAMESPACE_OID),
                text(if index.primary { "p" } else { "u" }),
                bool(false),
                bool(false),
                bool(true),
                oid(table.oid),
                oid(0),
                oid(index.oid),
                oid(0),
                oid(0),
                text(" "),
                text(" "),
                text(" "),
                bool(true),
                int(0),
                bool(true),
                text(&array::format(&key)),
                NULL,
                NULL,
            ]);
        }
    }
    rows
}

fn pg_sequence(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    snapshot
        .sequences
        .iter()
        .map(|info| {
            let options = info.sequence.options();
            vec![
                oid(info.oid),
                oid(options.data_type.oid() as i64),
                int(options.start),
                int(options.increment),
                int(options.max),
                int(options.min),
                int(options.cache),
                bool(options.cycle),
            ]
        })
        .collect()
}

fn pg_attrdef(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        for position in 0..table.table.def.columns.len() {
            if let Some(default) = &table.table.def.default_shown(position) {
                let number = position as i64 + 1;
                rows.push(vec![
                    oid(table.oid << 16 | number),
                    oid(table.oid),
                    int(number),
                    text(default),
                ]);
            }
        }
    }
    rows
}

const PG_DATABASE_COLUMNS: &[(&str, DataType)] = &[
    ("oid", OID),
    ("datname", NAME),
    ("datdba", OID),
    ("encoding", INT4),
    ("datlocprovider", TEXT),
    ("datistemplate", BOOL),
    ("datallowconn", BOOL),
    ("datconnlimit", INT4),
    ("datfrozenxid", OID),
    ("datminmxid", OID),
    ("dattablespace", OID),
    ("datcollate", TEXT),
    ("datctype", TEXT),
    ("daticulocale", TEXT),
    ("datcollversion", TEXT),
    ("datacl", TEXT),
];

/// Every database of the data directory (`catalog::cluster`).
fn pg_database(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    snapshot
        .databases
        .iter()
        .map(|database| {
            vec![
                oid(database.oid as i64),
                text(&database.name),
                oid(OWNER_ROLE_OID),
                int(6),
                text("c"),
                bool(false),
                bool(true),
                int(-1),
                oid(0),
                oid(0),
                oid(1663),
                text("C.UTF-8"),
                text("C.UTF-8"),
                NULL,
                NULL,
                NULL,
            ]
        })
        .collect()
}

const PG_ROLES_COLUMNS: &[(&str, DataType)] = &[
    ("oid", OID),
    ("rolname", NAME),
    ("rolsuper", BOOL),
    ("rolinherit", BOOL),
    ("rolcreaterole", BOOL),
    ("rolcreatedb", BOOL),
    ("rolcanlogin", BOOL),
    ("rolreplication", BOOL),
    ("rolconnlimit", INT4),
    ("rolpassword", TEXT),
    ("rolvaliduntil", TEXT),
    ("rolbypassrls", BOOL),
    ("rolconfig", TEXT),
];

/// One role, the owner of everything, named as the session's user.
fn pg_roles(_: &Snapshot, names: &SessionNames) -> Rows {
    vec![vec![
        oid(OWNER_ROLE_OID),
        text(&names.user),
        bool(true),
        bool(true),
        bool(true),
        bool(true),
        bool(true),
        bool(true),
        int(-1),
        text("********"),
        NULL,
        bool(true),
        NULL,
    ]]
}

const PG_SETTINGS_COLUMNS: &[(&str, DataType)] = &[
    ("name", TEXT),
    ("setting", TEXT),
    ("unit", TEXT),
    ("category", TEXT),
    ("short_desc", TEXT),
    ("context", TEXT),
    ("vartype", TEXT),
    ("source", TEXT),
    ("boot_val", TEXT),
    ("reset_val", TEXT),
];

/// A log position as PostgreSQL writes an LSN (`X/Y`, the high and low 32 bits in hex).
fn lag(duration: std::time::Duration) -> Value {
    Value::Interval(crate::types::Interval {
        months: 0,
        days: 0,
        micros: duration.as_micros().min(i64::MAX as u128) as i64,
    })
}

fn lsn_text(lsn: u64) -> Value {
    text(&format!("{:X}/{:X}", lsn >> 32, lsn & 0xFFFF_FFFF))
}

/// The primary's standbys. Write and flush are the acknowledged (durable) position (a standby
/// writes and syncs in one step), replay what it applied; the lags as the primary measured
/// them (`replication::Primary`).
fn pg_stat_replication(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    snapshot
        .replication
        .iter()
        .map(|standby| {
            vec![
                NULL,
                NULL,
                NULL,
                text(&standby.application_name),
                text(&standby.client_addr),
                NULL,
                int(standby.client_port.into()),
                NULL,
                NULL,
                text("streaming"),
                lsn_text(standby.sent_lsn),
                lsn_text(standby.flush_lsn),
                lsn_text(standby.flush_lsn),
                standby.replay_lsn.map_or(NULL, lsn_text),
                standby.flush_lag.map_or(NULL, lag),
                standby.flush_lag.map_or(NULL, lag),
                standby.replay_lag.map_or(NULL, lag),
                int(i64::from(standby.sync_state == "sync")),
                text(standby.sync_state),
                NULL,
            ]
        })
        .collect()
}

/// The time zone database's zones with their abbreviation, offset and summer time now.
fn pg_timezone_names(_: &Snapshot, _: &SessionNames) -> Rows {
    crate::types::zone::database_zones()
        .into_iter()
        .map(|(name, abbreviation, seconds_east, dst)| {
            vec![
                text(&name),
                text(&abbreviation),
                Value::Interval(crate::types::Interval {
                    months: 0,
                    days: 0,
                    micros: i64::from(seconds_east) * 1_000_000,
                }),
                bool(dst),
            ]
        })
        .collect()
}

/// Every session of the cluster (`catalog::activity`), client backends only: a session over
/// a Unix-domain socket has no address and port -1, as in PostgreSQL.
fn pg_stat_activity(snapshot: &Snapshot, _: &SessionNames) -> Rows {
    let sessions = snapshot
        .activities
        .as_ref()
        .map(|activities| activities.list())
        .unwrap_or_default();
    sessions
        .iter()
        .map(|session| {
            let datid = snapshot
                .databases
                .iter()
                .find(|database| database.name == session.database)
                .map_or(NULL, |database| int(database.oid as i64));
            let (address, port) = match &session.client {
                Some((address, port)) => (text(address), int(*port as i64)),
                None => (NULL, int(-1)),
            };
            let time = |micros: Option<i64>| micros.map_or(NULL, Value::TimestampTz);
            vec![
                datid,
                text(&session.database),
                int(session.pid as i64),
                NULL,
                int(10),
                text(&session.user),
                text(&session.application_name),
                address,
                NULL,
                port,
                time(Some(session.backend_start)),
                time(session.xact_start),
                time(session.query_start),
                time(Some(session.state_change)),
                match session.state {
                    "active" => NULL,
                    _ => text("Client"),
                },
                match session.state {
                    "active" => NULL,
                    _ => text("ClientRead"),
                },
                text(session.state),
                NULL,
                NULL,
                NULL,
                text(&session.query),
                text("client backend"),
            ]
        })
        .collect()
}

/// The session's settings as SHOW ALL lists them, with their current values: who may
/// change each (`context`: internal, postmaster for those a restart changes, else user),
/// a type read off the value, `session` as the source of one changed from its default.
fn pg_settings(_: &Snapshot, names: &SessionNames) -> Rows {
    let defaults = crate::settings::default_settings(&names.user, &names.database);
    let defaults: std::collections::BTreeMap<&str, &str> =
        crate::settings::listed_settings(&defaults).collect();
    crate::settings::listed_settings(&names.settings)
        .map(|(name, setting)| {
            let context = match crate::plan::expr::fixed_setting(&name.to_ascii_lowercase()) {
                Some(why) if why.contains("restarting") => "postmaster",
                Some(_) => "internal",
                None => "user",
            };
            let vartype = match setting {
                "on" | "off" => "bool",
                _ if setting.parse::<i64>().is_ok() => "integer",
                _ => "string",
            };
            let default = defaults.get(name).copied().unwrap_or(setting);
            vec![
                text(name),
                text(setting),
                NULL,
                text("Hayate"),
                text(""),
                text(context),
                text(vartype),
                text(if setting == default {
                    "default"
                } else {
                    "session"
                }),
                text(default),
                text(default),
            ]
        })
        .collect()
}

/// The functions listed in pg_proc: the ones the catalog queries call (see `functions`).
fn pg_proc(_: &Snapshot, _: &SessionNames) -> Rows {
    super::functions::NAMES
        .iter()
        .enumerate()
        .map(|(position, name)| {
            vec![
                oid(8000 + position as i64),
                text(name),
                oid(PG_CATALOG_NAMESPACE_OID),
                oid(OWNER_ROLE_OID),
                text("f"),
                bool(false),
                oid(25),
                int(0),
                text(""),
                oid(12), // internal
                NULL,
            ]
        })
        .collect()
}

fn information_schema_tables(snapshot: &Snapshot, names: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    let mut push = |schema: &str, name: &str, kind: &str| {
        rows.push(vec![
            text(&names.database),
            text(schema),
            text(name),
            text(kind),
            NULL,
            NULL,
            NULL,
            NULL,
            NULL,
            text(if kind == "BASE TABLE" { "YES" } else { "NO" }),
            text("NO"),
            NULL,
        ]);
    };
    for table in &snapshot.tables {
        push(PUBLIC_SCHEMA, table.name(), "BASE TABLE");
    }
    for (_, view) in &snapshot.views {
        push(PUBLIC_SCHEMA, &view.def.name, "VIEW");
    }
    for system in all_tables() {
        push(system.schema, system.name, "VIEW");
    }
    rows
}

const INFORMATION_SCHEMA_COLUMNS_COLUMNS: &[(&str, DataType)] = &[
    ("table_catalog", NAME),
    ("table_schema", NAME),
    ("table_name", NAME),
    ("column_name", NAME),
    ("ordinal_position", INT4),
    ("column_default", TEXT),
    ("is_nullable", TEXT),
    ("data_type", TEXT),
    ("character_maximum_length", INT4),
    ("numeric_precision", INT4),
    ("numeric_scale", INT4),
    ("udt_catalog", NAME),
    ("udt_schema", NAME),
    ("udt_name", NAME),
    ("is_identity", TEXT),
    ("is_generated", TEXT),
    ("is_updatable", TEXT),
];

fn information_schema_columns(snapshot: &Snapshot, names: &SessionNames) -> Rows {
    let mut rows = Vec::new();
    for table in &snapshot.tables {
        for (position, column) in table.table.def.columns.iter().enumerate() {
            let (type_oid, _) = type_of(column.data_type);
            let enum_type = snapshot.enums.iter().find(|t| t.oid as i64 == type_oid);
            let (data_type, udt_schema, udt) = match enum_type {
                Some(enum_type) => ("USER-DEFINED", PUBLIC_SCHEMA, enum_type.name.as_str()),
                None if column.data_type.is_array() => {
                    let udt = builtin_types().into_iter().find(|t| t.oid == type_oid);
                    ("ARRAY", "pg_catalog", udt.map_or("unknown", |t| t.name))
                }
                None => (
                    column.data_type.name(),
                    "pg_catalog",
                    builtin_types()
                        .into_iter()
                        .find(|t| t.oid == type_oid)
                        .map_or("unknown", |t| t.name),
                ),
            };
            let length = match column.data_type {
                DataType::Varchar(Some(length)) => int(length as i64),
                _ => NULL,
            };
            let (precision, scale) = match column.data_type {
                DataType::Int2 => (int(16), int(0)),
                DataType::Int4 => (int(32), int(0)),
                DataType::Int8 => (int(64), int(0)),
                DataType::Float8 => (int(53), NULL),
                _ => (NULL, NULL),
            };
            rows.push(vec![
                text(&names.database),
                text(PUBLIC_SCHEMA),
                text(table.name()),
                text(&column.name),
                int(position as i64 + 1),
                table
                    .table
                    .def
                    .default_shown(position)
                    .map_or(NULL, |d| text(&d)),
                text(if column.not_null { "NO" } else { "YES" }),
                text(data_type),
                length,
                precision,
                scale,
                text(&names.database),
                text(udt_schema),
                text(udt),
                text("NO"),
                text("NEVER"),
                text("YES"),
            ]);
        }
    }
    rows
}
