//! hayate-sql's integration tests, one module per file (described in the README's test table).

mod access_paths;
mod array_columns;
mod catalog_queries;
mod common;
mod constraints;
mod databases;
mod ddl;
mod dump_sql;
mod enum_types;
mod indexes;
mod isolation_levels;
mod joins;
mod model;
mod multi_lookups;
mod prepared_statements;
mod query_features;
mod savepoints;
mod scan_filters;
mod sequences;
mod spill;
mod string_functions;
mod subqueries;
mod table_locks;
mod transactional_ddl;
mod types;
mod views;
