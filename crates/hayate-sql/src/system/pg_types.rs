//! The built-in types pg_type lists: the ones Hayate stores plus the ones drivers and psql
//! ask for by oid or name. Oids and names are PostgreSQL's.

use crate::types::DataType;

/// One built-in type.
pub(super) struct BuiltinType {
    pub oid: i64,
    pub name: &'static str,
    pub length: i64,
    pub by_value: bool,
    /// typtype: b base, p pseudo.
    pub kind: &'static str,
    pub category: &'static str,
    /// The oid of its array type (0: none).
    pub array: i64,
    /// For an array type: its element type.
    pub element: i64,
    pub collation: i64,
}

/// (oid, name, length, by value, typtype, category, array oid, collation)
type BaseType = (
    i64,
    &'static str,
    i64,
    bool,
    &'static str,
    &'static str,
    i64,
    i64,
);

const BASE: &[BaseType] = &[
    (16, "bool", 1, true, "b", "B", 1000, 0),
    (17, "bytea", -1, false, "b", "U", 1001, 0),
    (18, "char", 1, true, "b", "Z", 1002, 0),
    (19, "name", 64, false, "b", "S", 1003, 950),
    (20, "int8", 8, true, "b", "N", 1016, 0),
    (21, "int2", 2, true, "b", "N", 1005, 0),
    (23, "int4", 4, true, "b", "N", 1007, 0),
    (24, "regproc", 4, true, "b", "N", 1008, 0),
    (25, "text", -1, false, "b", "S", 1009, 100),
    (26, "oid", 4, true, "b", "N", 1028, 0),
    (114, "json", -1, false, "b", "U", 199, 0),
    (194, "pg_node_tree", -1, false, "b", "Z", 0, 100),
    (700, "float4", 4, true, "b", "N", 1021, 0),
    (701, "float8", 8, true, "b", "N", 1022, 0),
    (705, "unknown", -2, false, "p", "X", 0, 0),
    (1042, "bpchar", -1, false, "b", "S", 1014, 100),
    (1043, "varchar", -1, false, "b", "S", 1015, 100),
    (1082, "date", 4, true, "b", "D", 1182, 0),
    (1083, "time", 8, true, "b", "D", 1183, 0),
    (1114, "timestamp", 8, true, "b", "D", 1115, 0),
    (1184, "timestamptz", 8, true, "b", "D", 1185, 0),
    (1186, "interval", 16, false, "b", "T", 1187, 0),
    (1700, "numeric", -1, false, "b", "N", 1231, 0),
    (2205, "regclass", 4, true, "b", "N", 2210, 0),
    (2206, "regtype", 4, true, "b", "N", 2211, 0),
    (2249, "record", -1, false, "p", "P", 2287, 0),
    (2278, "void", 4, true, "p", "P", 0, 0),
    (2950, "uuid", 16, false, "b", "U", 2951, 0),
    (3802, "jsonb", -1, false, "b", "U", 3807, 0),
    (4089, "regnamespace", 4, true, "b", "N", 4090, 0),
];

/// (oid, name, element) of the vector types that are not arrays of a listed type.
const VECTORS: &[(i64, &str, i64)] = &[(22, "int2vector", 21), (30, "oidvector", 26)];

/// Every built-in type: the base types, their array types and the vector types.
pub(super) fn builtin_types() -> Vec<BuiltinType> {
    let mut types = Vec::new();
    for &(oid, name, length, by_value, kind, category, array, collation) in BASE {
        types.push(BuiltinType {
            oid,
            name,
            length,
            by_value,
            kind,
            category,
            array,
            element: 0,
            collation,
        });
    }
    for &(oid, name, _, _, _, _, array, collation) in BASE {
        if array != 0 {
            types.push(BuiltinType {
                oid: array,
                name: array_name(name),
                length: -1,
                by_value: false,
                kind: "b",
                category: "A",
                array: 0,
                element: oid,
                collation,
            });
        }
    }
    for &(oid, name, element) in VECTORS {
        types.push(BuiltinType {
            oid,
            name,
            length: -1,
            by_value: false,
            kind: "b",
            category: "A",
            array: 0,
            element,
            collation: 0,
        });
    }
    types
}

/// The name of the array type of `name` (PostgreSQL prefixes an underscore).
fn array_name(name: &str) -> &'static str {
    match name {
        "bool" => "_bool",
        "bytea" => "_bytea",
        "char" => "_char",
        "name" => "_name",
        "int8" => "_int8",
        "int2" => "_int2",
        "int4" => "_int4",
        "regproc" => "_regproc",
        "text" => "_text",
        "oid" => "_oid",
        "json" => "_json",
        "float4" => "_float4",
        "float8" => "_float8",
        "bpchar" => "_bpchar",
        "varchar" => "_varchar",
        "date" => "_date",
        "time" => "_time",
        "timestamp" => "_timestamp",
        "timestamptz" => "_timestamptz",
        "interval" => "_interval",
        "numeric" => "_numeric",
        "regclass" => "_regclass",
        "regtype" => "_regtype",
        "record" => "_record",
        "uuid" => "_uuid",
        "jsonb" => "_jsonb",
        "regnamespace" => "_regnamespace",
        _ => "_unknown",
    }
}

/// The PostgreSQL type oid and type modifier (atttypmod) of a Hayate type.
///
/// Exhaustive on purpose: a new `DataType` must say here what pg_type/pg_attribute show.
pub fn type_of(data_type: DataType) -> (i64, i64) {
    match data_type {
        DataType::Int2 => (21, -1),
        DataType::Int4 => (23, -1),
        DataType::Int8 => (20, -1),
        DataType::Float8 => (701, -1),
        DataType::Bool => (16, -1),
        DataType::Text => (25, -1),
        // PostgreSQL's varchar typmod is the length plus the 4-byte header.
        DataType::Varchar(Some(length)) => (1043, length as i64 + 4),
        DataType::Varchar(None) => (1043, -1),
        DataType::Float4 => (700, -1),
        // numeric's typmod is ((precision << 16) | scale) plus the header, as in PostgreSQL.
        DataType::Numeric(Some((precision, scale))) => {
            (1700, ((precision as i64) << 16 | scale as i64) + 4)
        }
        DataType::Numeric(None) => (1700, -1),
        DataType::Char(Some(length)) => (1042, length as i64 + 4),
        DataType::Char(None) => (1042, -1),
        DataType::Bytea => (17, -1),
        DataType::Date => (1082, -1),
        DataType::Timestamp => (1114, -1),
        DataType::TimestampTz => (1184, -1),
        DataType::Int2Array => (1005, -1),
        DataType::Uuid => (2950, -1),
        DataType::Json => (114, -1),
        DataType::Jsonb => (3802, -1),
        DataType::Interval => (1186, -1),
        DataType::TextArray => (1009, -1),
        DataType::Int4Array => (1007, -1),
        DataType::Int8Array => (1016, -1),
        DataType::Enum(oid) => (oid as i64, -1),
        DataType::Unknown => (705, -1),
    }
}

/// The type oid's name as `format_type(oid, typmod)` writes it (None: unknown oid).
pub fn format_type(oid: i64, typmod: Option<i64>) -> Option<String> {
    let typmod = typmod.filter(|typmod| *typmod >= 0);
    let sql_name = match oid {
        16 => "boolean",
        20 => "bigint",
        21 => "smallint",
        23 => "integer",
        18 => "\"char\"",
        700 => "real",
        701 => "double precision",
        1043 => "character varying",
        1042 if typmod.is_some() => "character",
        1083 => "time without time zone",
        1114 => "timestamp without time zone",
        1184 => "timestamp with time zone",
        _ => {
            let builtin = builtin_types().into_iter().find(|t| t.oid == oid)?;
            if builtin.element != 0 && builtin.category == "A" && builtin.name.starts_with('_') {
                return Some(format!("{}[]", format_type(builtin.element, typmod)?));
            }
            builtin.name
        }
    };
    Some(match (oid, typmod) {
        (1043 | 1042, Some(typmod)) => format!("{sql_name}({})", typmod - 4),
        (1700, Some(typmod)) => {
            let typmod = typmod - 4;
            format!("numeric({},{})", typmod >> 16, typmod & 0xffff)
        }
        _ => sql_name.to_string(),
    })
}

/// The type oid a type name means (`int4`, `integer`, `pg_catalog.text`, `text[]`...).
pub fn type_oid_by_name(text: &str) -> Option<i64> {
    let text = text.trim().to_lowercase();
    let text = text.strip_prefix("pg_catalog.").unwrap_or(&text);
    if let Some(element) = text.strip_suffix("[]") {
        let element = type_oid_by_name(element)?;
        return builtin_types()
            .into_iter()
            .find(|t| t.oid == element)
            .map(|t| t.array)
            .filter(|array| *array != 0);
    }
    let base = text.split('(').next().unwrap_or_default().trim();
    let alias = match base {
        "boolean" => "bool",
        "bigint" => "int8",
        "smallint" => "int2",
        "integer" | "int" => "int4",
        "real" => "float4",
        "double precision" => "float8",
        "character varying" => "varchar",
        "character" | "char" => "bpchar",
        "\"char\"" => "char",
        "decimal" => "numeric",
        "timestamp without time zone" => "timestamp",
        "timestamp with time zone" => "timestamptz",
        "time without time zone" => "time",
        other => other,
    };
    builtin_types()
        .into_iter()
        .find(|t| t.name == alias)
        .map(|t| t.oid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_types_as_postgres_does() {
        assert_eq!(format_type(23, Some(-1)).as_deref(), Some("integer"));
        assert_eq!(
            format_type(1043, Some(24)).as_deref(),
            Some("character varying(20)")
        );
        assert_eq!(format_type(1009, None).as_deref(), Some("text[]"));
        assert_eq!(format_type(1007, None).as_deref(), Some("integer[]"));
        assert_eq!(format_type(424242, None), None);
        let (oid, typmod) = type_of(DataType::Varchar(Some(20)));
        assert_eq!(
            format_type(oid, Some(typmod)).as_deref(),
            Some("character varying(20)")
        );
    }

    #[test]
    fn type_names_resolve() {
        assert_eq!(type_oid_by_name("text"), Some(25));
        assert_eq!(type_oid_by_name("integer"), Some(23));
        assert_eq!(type_oid_by_name("pg_catalog.int8"), Some(20));
        assert_eq!(type_oid_by_name("text[]"), Some(1009));
        assert_eq!(type_oid_by_name("character varying(10)"), Some(1043));
        assert_eq!(type_oid_by_name("nope"), None);
    }
}
