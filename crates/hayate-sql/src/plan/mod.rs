//! Plans: what a statement does, bound to the catalog and ready to execute.
//!
//! 1. `bind` turns a parsed statement into a `Plan`: names resolved, types checked and
//!    parameter types inferred from where the parameters are used.
//! 2. `access` picks how a table is read from its WHERE clause: a point lookup when every
//!    primary key column is fixed by an equality, a range scan when the first key column is
//!    bounded, a full scan otherwise. The whole WHERE clause is checked on every row read
//!    in all three cases, so the access path only has to narrow, never to decide.

pub mod access;
pub mod bind;
pub mod expr;
pub mod write;

use std::sync::Arc;

use crate::catalog::{IndexKey, Table, TableDef};
use crate::types::DataType;
pub use access::Access;
use access::{IndexAccess, IndexLookup};
pub use expr::{BinaryOp, EvalContext, Expr, ScalarFunction, Subquery, SubqueryKind};

/// A column of a result.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputColumn {
    pub name: String,
    pub data_type: DataType,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AggregateFunction {
    CountStar,
    Count,
    Sum,
    Min,
    Max,
    Avg,
    /// string_agg(value, delimiter): its argument is the array text `{value,delimiter}`.
    StringAgg,
    /// array_agg(value): the values in input order, NULLs included, as array text.
    ArrayAgg,
    /// json_agg / jsonb_agg(value): the values (converted as to_json does) in input order,
    /// NULLs as `null`, as one JSON array; jsonb's is normalized.
    JsonAgg {
        binary: bool,
        /// The inputs are rows (`json_agg(t)`): json's text puts each after the first on a
        /// new line, as PostgreSQL does for records.
        rows: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct AggregateCall {
    pub function: AggregateFunction,
    pub arg: Option<Expr>,
    pub data_type: DataType,
    /// `count(DISTINCT x)`: each distinct non-NULL input counts once.
    pub distinct: bool,
    /// `FILTER (WHERE ...)`: only rows for which it is true are aggregated.
    pub filter: Option<Expr>,
    /// `array_agg(x ORDER BY ...)`, `string_agg(..., ORDER BY ...)`, `json_agg(...)`: the order the inputs
    /// are aggregated in (empty for the aggregates whose result does not depend on it).
    pub order_by: Vec<SortKey>,
}

/// GROUP BY and aggregates. After it, a row is the group's key values followed by the
/// aggregates' values.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    pub group_by: Vec<Expr>,
    pub aggregates: Vec<AggregateCall>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowFunction {
    RowNumber,
    Rank,
    DenseRank,
}

/// A window function call: `function() OVER (PARTITION BY ... ORDER BY ...)`, over the rows
/// below the Window operator.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCall {
    pub function: WindowFunction,
    pub partition_by: Vec<Expr>,
    pub order_by: Vec<SortKey>,
}

/// A set-returning function in a SELECT list (`unnest(ix.indkey)`): the ProjectSet
/// operator emits one row per value, the calls of one list side by side (the shorter ones
/// padded with NULLs), as PostgreSQL does.
#[derive(Debug, Clone, PartialEq)]
pub struct SetCall {
    pub function: SetFunction,
    pub args: Vec<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetFunction {
    /// unnest(array): its elements, as integers when `integers` (the catalog's int2vector
    /// and int2[] columns), else as text.
    Unnest { integers: bool },
    /// generate_subscripts(array, dimension): 1 to its length.
    Subscripts,
    /// generate_series(start, stop [, step]) over integers.
    Series,
    /// information_schema._pg_expandarray(array): records `(element, position)` as text.
    ExpandArray,
    /// json(b)_array_elements(doc): the array's elements as documents, or (`text`, the
    /// `_text` forms) as `->>` gives them; `binary` for the jsonb forms (their errors).
    JsonElements { text: bool, binary: bool },
    /// json(b)_object_keys(doc): the object's keys.
    JsonKeys { binary: bool },
    /// json(b)_each(doc) and json(b)_each_text(doc) in a SELECT list: records `(key,value)`
    /// as text, the value a document, or (`text`) as `->>` gives it.
    JsonEach { text: bool, binary: bool },
}

/// The json(b) set-returning functions of a SELECT list (`SetFunction::JsonElements`,
/// `JsonKeys`, `JsonEach`).
pub(crate) const JSON_SET_FUNCTIONS: [&str; 10] = [
    "jsonb_array_elements",
    "json_array_elements",
    "jsonb_array_elements_text",
    "json_array_elements_text",
    "jsonb_object_keys",
    "json_object_keys",
    "jsonb_each",
    "json_each",
    "jsonb_each_text",
    "json_each_text",
];

#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub expr: Expr,
    pub descending: bool,
    pub nulls_first: bool,
}

/// Rows of one table read through an access path and filtered.
#[derive(Debug, Clone)]
pub struct TableRead {
    pub table: Arc<Table>,
    pub access: Access,
    pub filter: Option<Expr>,
    /// Rows in descending order (an ORDER BY the key DESC; full and range scans read
    /// backward, `Transaction::scan_reverse`; with `index_order`, the index's entries).
    pub descending: bool,
    /// An index path returns rows in the index's entry order, not primary key order (an
    /// ORDER BY the index gives: `access::ordered_index`), read lazily.
    pub index_order: bool,
    /// The table's partial indexes' predicates and expression indexes' keys, bound over the
    /// table's row: a path uses a partial index only where the filter implies its predicate
    /// (`access::usable_indexes`), an expression key where the filter compares it.
    pub index_terms: access::IndexBindings,
    /// The columns the plan above reads of each row (None: all): the others are not decoded
    /// and read as NULL (`count(*)` decodes none).
    pub columns: Option<Vec<bool>>,
}

/// A query: a tree of relations whose root yields the result rows.
#[derive(Debug, Clone)]
pub struct QueryPlan {
    pub root: Relation,
    pub columns: Vec<OutputColumn>,
    /// SELECT ... FOR UPDATE: the rows read from user tables are locked.
    pub locks: bool,
}

impl QueryPlan {
    /// Every user-table read of the query (not of its subqueries), leaves first to last.
    pub fn table_reads(&self) -> Vec<&TableRead> {
        let mut out = Vec::new();
        self.root.table_reads(&mut out);
        out
    }

    /// The plan as indented text, one operator a line (EXPLAIN).
    pub fn explain(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.root.explain(0, &mut out);
        out
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// INNER, CROSS and comma joins.
    Inner,
    /// LEFT [OUTER]: a left row without a match is kept, padded with NULLs.
    Left,
}

/// A locking read's rows (SELECT ... FOR UPDATE / FOR SHARE): the lock it takes and what it
/// does about a row another transaction holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLock {
    /// FOR SHARE: other FOR SHARE readers (and foreign key checks) may hold the row too (at
    /// READ COMMITTED; REPEATABLE READ locks as FOR UPDATE does).
    pub shared: bool,
    pub wait: LockWait,
}

/// What a locking read does about a row another transaction holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockWait {
    /// Waits until the holder ends.
    Wait,
    /// NOWAIT: fails at once (55P03).
    NoWait,
    /// SKIP LOCKED: leaves the row out (a queue's consumers each taking rows nobody else has).
    SkipLocked,
}

impl RowLock {
    /// The lock of UPDATE and DELETE (FOR UPDATE, waiting).
    pub const UPDATE: RowLock = RowLock {
        shared: false,
        wait: LockWait::Wait,
    };

    /// What EXPLAIN adds to a locking read.
    pub fn explain(lock: Option<RowLock>) -> String {
        let Some(lock) = lock else {
            return String::new();
        };
        let mut text = String::from(" (locking rows");
        if lock.shared {
            text.push_str(", shared");
        }
        match lock.wait {
            LockWait::Wait => {}
            LockWait::NoWait => text.push_str(", nowait"),
            LockWait::SkipLocked => text.push_str(", skip locked"),
        }
        text.push(')');
        text
    }
}

/// An operator of a query plan. Rows of a join are the left row followed by the right row,
/// so an expression bound against the whole FROM list reads any left-deep prefix of it.
#[derive(Debug, Clone)]
pub enum Relation {
    /// Rows of expressions (SELECT without FROM is one row without columns).
    Values(Vec<Vec<Expr>>),
    /// A user table through an access path; `lock`: FOR UPDATE / FOR SHARE.
    Table {
        read: TableRead,
        lock: Option<RowLock>,
    },
    /// A pg_catalog / information_schema table, computed from the catalog.
    System(crate::system::SystemTable),
    /// generate_series(start, stop, step) over integers.
    Series {
        start: Expr,
        stop: Expr,
        step: Option<Expr>,
    },
    Filter {
        input: Box<Relation>,
        predicate: Expr,
    },
    Project {
        input: Box<Relation>,
        exprs: Vec<Expr>,
    },
    /// For each left row, every right row (the right side is read once).
    NestedLoopJoin {
        left: Box<Relation>,
        right: Box<Relation>,
        kind: JoinKind,
        condition: Option<Expr>,
    },
    /// Equi-join: the right side is built into a hash table on `right_keys` (over right rows),
    /// each left row probes it with `left_keys`; `condition` is checked on the joined row.
    HashJoin {
        left: Box<Relation>,
        right: Box<Relation>,
        kind: JoinKind,
        left_keys: Vec<Expr>,
        right_keys: Vec<Expr>,
        condition: Option<Expr>,
    },
    /// For each left row, a lookup in `right`, whose access is a primary key point lookup or
    /// a secondary index's lookup (`access::join_lookup`) with expressions over the left row;
    /// `right.filter` reads the right row alone.
    IndexJoin {
        left: Box<Relation>,
        right: TableRead,
        lock: Option<RowLock>,
        kind: JoinKind,
        condition: Option<Expr>,
    },
    /// A locking read of a table whose rows must be sorted first: each row is locked as it
    /// leaves `input` (a Sort over the table's read, whose own read does not lock), so that
    /// with a LIMIT only the rows returned are locked, as PostgreSQL's LockRows does.
    /// `read` gives the table and the filter a newer version is checked against.
    LockRows {
        input: Box<Relation>,
        read: TableRead,
        lock: RowLock,
    },
    /// Both sides sorted on their keys, then merged (equi-join on sort-compatible keys).
    MergeJoin {
        left: Box<Relation>,
        right: Box<Relation>,
        kind: JoinKind,
        left_keys: Vec<Expr>,
        right_keys: Vec<Expr>,
        condition: Option<Expr>,
    },
    /// JOIN LATERAL (`exec/lateral.rs`): for each left row, `right` runs with that row as
    /// its enclosing row (`Expr::Outer { depth: 1 }` reads the left columns).
    LateralJoin {
        left: Box<Relation>,
        right: Box<Relation>,
        kind: JoinKind,
        condition: Option<Expr>,
    },
    /// FULL [OUTER] JOIN (`exec/full_join.rs`): the right side is held, hashed on
    /// `right_keys` when there are equalities (else every pair is tested).
    FullJoin {
        left: Box<Relation>,
        right: Box<Relation>,
        left_keys: Vec<Expr>,
        right_keys: Vec<Expr>,
        condition: Option<Expr>,
    },
    Aggregate {
        input: Box<Relation>,
        aggregation: Aggregation,
    },
    /// Window functions (`exec/window.rs`): each input row followed by one value per call.
    Window {
        input: Box<Relation>,
        calls: Vec<WindowCall>,
    },
    /// Set-returning functions of a SELECT list, their values appended to the input row.
    ProjectSet {
        input: Box<Relation>,
        calls: Vec<SetCall>,
    },
    Sort {
        input: Box<Relation>,
        keys: Vec<SortKey>,
    },
    /// Drops rows equal to an earlier one: on all columns, or on `on` (DISTINCT ON).
    Distinct {
        input: Box<Relation>,
        on: Option<Vec<Expr>>,
    },
    Limit {
        input: Box<Relation>,
        limit: Option<Expr>,
        offset: Option<Expr>,
    },
    /// UNION [ALL]: the left rows, then the right rows (without duplicates unless `all`).
    Union {
        left: Box<Relation>,
        right: Box<Relation>,
        all: bool,
    },
    /// A recursive WITH query: the `base` rows, then `step` run again and again over the
    /// rows the last run added (its work table `work`), until a run adds none; without
    /// `all`, rows seen before are not added again.
    RecursiveUnion {
        base: Box<Relation>,
        step: Box<Relation>,
        work: usize,
        all: bool,
    },
    /// The rows the last run of a `RecursiveUnion`'s step added (in its step only).
    WorkTable { work: usize, width: usize },
    /// INTERSECT / EXCEPT [ALL]: left rows by how often they occur on the right
    /// (`exec/set_operation.rs`).
    SetOperation {
        left: Box<Relation>,
        right: Box<Relation>,
        operator: SetOperator,
        all: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOperator {
    Intersect,
    Except,
}

impl Relation {
    /// The number of columns of its rows.
    pub fn width(&self) -> usize {
        match self {
            Relation::Values(rows) => rows.first().map_or(0, Vec::len),
            Relation::Table { read, .. } => read.table.def.columns.len(),
            // Its columns, then `tableoid`.
            Relation::System(table) => table.columns.len() + 1,
            Relation::Series { .. } => 1,
            Relation::Project { exprs, .. } => exprs.len(),
            Relation::NestedLoopJoin { left, right, .. }
            | Relation::HashJoin { left, right, .. }
            | Relation::MergeJoin { left, right, .. }
            | Relation::FullJoin { left, right, .. }
            | Relation::LateralJoin { left, right, .. } => left.width() + right.width(),
            Relation::IndexJoin { left, right, .. } => left.width() + right.table.def.columns.len(),
            Relation::Aggregate { aggregation, .. } => {
                aggregation.group_by.len() + aggregation.aggregates.len()
            }
            Relation::Window { input, calls } => input.width() + calls.len(),
            Relation::ProjectSet { input, calls } => input.width() + calls.len(),
            Relation::Filter { input, .. }
            | Relation::Sort { input, .. }
            | Relation::LockRows { input, .. }
            | Relation::Distinct { input, .. }
            | Relation::Limit { input, .. } => input.width(),
            Relation::Union { left, .. } | Relation::SetOperation { left, .. } => left.width(),
            Relation::RecursiveUnion { base, .. } => base.width(),
            Relation::WorkTable { width, .. } => *width,
        }
    }

    fn inputs(&self) -> Vec<&Relation> {
        match self {
            Relation::Values(_)
            | Relation::Table { .. }
            | Relation::System(_)
            | Relation::WorkTable { .. }
            | Relation::Series { .. } => Vec::new(),
            Relation::Filter { input, .. }
            | Relation::Project { input, .. }
            | Relation::Aggregate { input, .. }
            | Relation::Window { input, .. }
            | Relation::ProjectSet { input, .. }
            | Relation::Sort { input, .. }
            | Relation::LockRows { input, .. }
            | Relation::Distinct { input, .. }
            | Relation::Limit { input, .. } => vec![input],
            Relation::IndexJoin { left, .. } => vec![left],
            Relation::NestedLoopJoin { left, right, .. }
            | Relation::HashJoin { left, right, .. }
            | Relation::MergeJoin { left, right, .. }
            | Relation::FullJoin { left, right, .. }
            | Relation::LateralJoin { left, right, .. }
            | Relation::Union { left, right, .. }
            | Relation::SetOperation { left, right, .. } => vec![left, right],
            Relation::RecursiveUnion { base, step, .. } => vec![base, step],
        }
    }

    /// Whether a read of the tree locks rows (FOR UPDATE in it or in a derived table of it).
    pub fn locks(&self) -> bool {
        match self {
            Relation::Table { lock, .. } | Relation::IndexJoin { lock, .. } if lock.is_some() => {
                true
            }
            Relation::LockRows { .. } => true,
            other => other.inputs().iter().any(|input| input.locks()),
        }
    }

    fn table_reads<'a>(&'a self, out: &mut Vec<&'a TableRead>) {
        match self {
            Relation::Table { read, .. } => out.push(read),
            Relation::IndexJoin { left, right, .. } => {
                left.table_reads(out);
                out.push(right);
            }
            other => {
                for input in other.inputs() {
                    input.table_reads(out);
                }
            }
        }
    }

    fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let kind = |kind: &JoinKind| match kind {
            JoinKind::Inner => "Inner",
            JoinKind::Left => "Left",
        };
        let line = match self {
            Relation::Values(rows) => format!("Values ({} rows)", rows.len()),
            Relation::Table { read, lock } => {
                format!("{}{}", describe_read(read), RowLock::explain(*lock))
            }
            Relation::System(table) => format!("System Table {}.{}", table.schema, table.name),
            Relation::Series { .. } => "Function Scan on generate_series".into(),
            Relation::Filter { .. } => "Filter".into(),
            Relation::Project { exprs, .. } => format!("Project ({} columns)", exprs.len()),
            Relation::NestedLoopJoin { kind: k, .. } => format!("Nested Loop {} Join", kind(k)),
            Relation::HashJoin {
                kind: k, left_keys, ..
            } => format!("Hash {} Join ({} keys)", kind(k), left_keys.len()),
            Relation::MergeJoin {
                kind: k, left_keys, ..
            } => format!("Merge {} Join ({} keys)", kind(k), left_keys.len()),
            Relation::IndexJoin {
                kind: k,
                right,
                lock,
                ..
            } => {
                let table = &right.table.def;
                let lookup = match &right.access {
                    Access::Index(path) => {
                        format!(
                            "lookup on {} using {}",
                            table.name, table.indexes[path.index].name
                        )
                    }
                    _ => format!("primary key lookup on {}", table.name),
                };
                format!(
                    "Index Nested Loop {} Join: {lookup}{}",
                    kind(k),
                    RowLock::explain(*lock)
                )
            }
            Relation::LateralJoin { kind: k, .. } => {
                format!("Nested Loop {} Join (lateral)", kind(k))
            }
            Relation::FullJoin { left_keys, .. } if left_keys.is_empty() => {
                "Nested Loop Full Join".into()
            }
            Relation::FullJoin { left_keys, .. } => {
                format!("Hash Full Join ({} keys)", left_keys.len())
            }
            Relation::Aggregate { aggregation, .. } => format!(
                "Hash Aggregate ({} groups keys, {} aggregates)",
                aggregation.group_by.len(),
                aggregation.aggregates.len()
            ),
            Relation::Window { calls, .. } => format!("WindowAgg ({} functions)", calls.len()),
            Relation::ProjectSet { calls, .. } => format!("ProjectSet ({} functions)", calls.len()),
            Relation::Sort { keys, .. } => format!("Sort ({} keys)", keys.len()),
            Relation::LockRows { read, lock, .. } => {
                format!(
                    "Lock Rows of {}{}",
                    read.table.def.name,
                    RowLock::explain(Some(*lock))
                )
            }
            Relation::Distinct { on: None, .. } => "Hash Distinct".into(),
            Relation::Distinct { on: Some(_), .. } => "Distinct On".into(),
            Relation::Limit { .. } => "Limit".into(),
            Relation::Union { all: true, .. } => "Union All".into(),
            Relation::Union { all: false, .. } => "Union".into(),
            Relation::RecursiveUnion { .. } => "Recursive Union".into(),
            Relation::WorkTable { .. } => "WorkTable Scan".into(),
            Relation::SetOperation { operator, all, .. } => {
                format!("Hash {operator:?}{}", if *all { " All" } else { "" })
            }
        };
        out.push(format!("{}{line}", "  ".repeat(depth)));
        for input in self.inputs() {
            input.explain(depth + 1, out);
        }
    }
}

/// A table read as EXPLAIN shows it: the access path.
fn describe_read(read: &TableRead) -> String {
    let access = describe_access(read, &read.access);
    let backward = match read.access {
        Access::Range { .. } | Access::Full => read.descending,
        Access::Index(_) => read.descending && read.index_order,
        _ => false,
    };
    let access = match backward {
        true => format!("{access} Backward"),
        false => access,
    };
    // What the table's statistics (ANALYZE) say the read returns, its filter applied.
    match access::estimated_rows(&read.table, read.filter.as_ref(), &read.index_terms) {
        Some(rows) => format!("{access} (estimated {rows} rows)"),
        None => access,
    }
}

fn describe_access(read: &TableRead, access: &Access) -> String {
    let name = &read.table.def.name;
    match access {
        Access::Union(branches) => {
            let mut kinds: Vec<String> = Vec::new();
            for branch in branches {
                let kind = describe_access(read, branch);
                if !kinds.contains(&kind) {
                    kinds.push(kind);
                }
            }
            format!("Union of {} Reads: {}", branches.len(), kinds.join(", "))
        }
        Access::Point(_) => format!("Point Lookup on {name} (primary key)"),
        Access::Range { .. } => format!("Range Scan on {name} (primary key)"),
        Access::Full => format!("Full Scan on {name}"),
        Access::Index(IndexAccess {
            index,
            lookup,
            narrowed_by,
        }) => {
            let indexes = &read.table.def.indexes;
            let index = indexes[*index].explained();
            let path = match lookup {
                IndexLookup::Point(_) => format!("Index Lookup on {name} using {index}"),
                IndexLookup::Range { .. } => format!("Index Range Scan on {name} using {index}"),
            };
            // A read in the index's order reads each row as its entry comes: no narrowing.
            match narrowed_by.is_empty() || read.index_order {
                true => path,
                false => {
                    let names: Vec<String> = (narrowed_by.iter())
                        .map(|narrowing| indexes[narrowing.index].explained())
                        .collect();
                    format!("{path} narrowed by {}", names.join(", "))
                }
            }
        }
    }
}

/// INSERT ... SELECT: the query's columns go to `targets`; the other columns get `defaults`.
#[derive(Debug, Clone)]
pub struct InsertSelect {
    pub table: Arc<Table>,
    pub query: QueryPlan,
    pub targets: Vec<usize>,
    /// One expression per table column (used for columns not in `targets`).
    pub defaults: Vec<Expr>,
    pub returning: Option<Returning>,
    pub on_conflict: Option<write::OnConflict>,
}

/// RETURNING: expressions over the written row.
#[derive(Debug, Clone)]
pub struct Returning {
    pub projection: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
}

/// Isolation levels, mapped to what the engine provides: READ COMMITTED is a snapshot per
/// statement plus locking reads of the newest version for UPDATE/DELETE (as PostgreSQL);
/// REPEATABLE READ is snapshot isolation; SERIALIZABLE is snapshot isolation whose commit
/// validates its reads (`Database::begin_serializable`). READ UNCOMMITTED is READ COMMITTED,
/// as in PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    /// The name SHOW transaction_isolation gives.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read committed",
            Isolation::RepeatableRead => "repeatable read",
            Isolation::Serializable => "serializable",
        }
    }

    /// The level a setting's value names (`default_transaction_isolation`), any case.
    pub fn parse(value: &str) -> Option<Isolation> {
        let words: Vec<String> = value
            .split_whitespace()
            .map(|word| word.to_ascii_lowercase())
            .collect();
        match words.join(" ").as_str() {
            "read committed" | "read uncommitted" => Some(Isolation::ReadCommitted),
            "repeatable read" => Some(Isolation::RepeatableRead),
            "serializable" => Some(Isolation::Serializable),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum TransactionControl {
    /// BEGIN / START TRANSACTION, with the isolation level it names (None: the session's
    /// default_transaction_isolation).
    Begin(Option<Isolation>),
    Commit,
    Rollback,
    Savepoint(String),
    /// RELEASE [SAVEPOINT] name.
    Release(String),
    /// ROLLBACK TO [SAVEPOINT] name.
    RollbackTo(String),
}

#[derive(Debug, Clone)]
pub enum Plan {
    CreateTable {
        def: TableDef,
        if_not_exists: bool,
    },
    DropTable {
        names: Vec<String>,
        if_exists: bool,
        /// CASCADE: foreign keys of other tables referencing these are dropped too.
        cascade: bool,
    },
    CreateIndex {
        table: String,
        name: Option<String>,
        /// Columns and key expressions.
        keys: Vec<IndexKey>,
        unique: bool,
        if_not_exists: bool,
        /// A partial index's WHERE, as SQL text.
        predicate: Option<String>,
        /// Per column, DESC and NULLS FIRST as indoption bits (`IndexDef::options`).
        options: Vec<u8>,
    },
    DropIndex {
        names: Vec<String>,
        if_exists: bool,
    },
    /// ALTER INDEX `from` RENAME TO `to` (an index of `table`).
    RenameIndex {
        table: String,
        from: String,
        to: String,
    },
    /// CREATE SEQUENCE: committed on its own, also inside a transaction block.
    CreateSequence {
        name: String,
        options: crate::catalog::SequenceOptions,
        if_not_exists: bool,
        /// OWNED BY (table, column).
        owner: Option<(String, String)>,
    },
    /// DROP SEQUENCE: committed on its own, also inside a transaction block.
    DropSequence {
        names: Vec<String>,
        if_exists: bool,
    },
    AlterTable {
        table: String,
        actions: Vec<write::AlterAction>,
    },
    /// LOCK TABLE, inside a transaction block: the table lock (`table_lock`) until the block
    /// ends; `exclusive` for the modes that hold off writers (SHARE and stronger).
    LockTables {
        tables: Vec<String>,
        exclusive: bool,
    },
    /// CREATE [OR REPLACE] VIEW.
    CreateView {
        def: crate::catalog::ViewDef,
        or_replace: bool,
    },
    DropView {
        names: Vec<String>,
        if_exists: bool,
    },
    /// CREATE TYPE name AS ENUM (labels).
    CreateEnum(crate::types::enums::EnumType),
    /// ALTER TYPE name ADD VALUE / RENAME TO.
    AlterEnum {
        name: String,
        change: crate::catalog::enum_type::EnumChange,
    },
    DropEnum {
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    },
    /// CREATE DATABASE, outside a transaction block.
    CreateDatabase {
        name: String,
        if_not_exists: bool,
    },
    /// DROP DATABASE, outside a transaction block.
    DropDatabase {
        name: String,
        if_exists: bool,
        /// WITH (FORCE): the sessions using it are ended first.
        force: bool,
    },
    /// Outside a transaction block: fresh engine trees; inside: deletes the rows.
    Truncate {
        tables: Vec<Arc<Table>>,
        /// RESTART IDENTITY: the tables' column sequences (SERIAL, identity, OWNED BY)
        /// start again: after the truncation outside a block, when the block commits inside
        /// one (a rollback keeps them where they were).
        restart_identity: bool,
    },
    Insert {
        table: Arc<Table>,
        /// One expression per table column, defaults filled in.
        rows: Vec<Vec<Expr>>,
        returning: Option<Returning>,
        /// Identity columns the rows take from their sequence.
        sequences: Vec<write::SequenceFill>,
        on_conflict: Option<write::OnConflict>,
    },
    Select(QueryPlan),
    InsertSelect(Box<InsertSelect>),
    /// EXPLAIN of a query: its plan as text, not run.
    Explain(QueryPlan),
    Update {
        read: TableRead,
        /// (column index, new value over the old row).
        assignments: Vec<(usize, Expr)>,
        returning: Option<Returning>,
    },
    Delete {
        read: TableRead,
        returning: Option<Returning>,
    },
    Transaction(TransactionControl),
    /// SQL-level PREPARE name [(types)] AS statement: bound when it runs, kept by the session.
    Prepare {
        name: String,
        declared: Vec<DataType>,
        statement: Box<sqlparser::ast::Statement>,
    },
    /// EXECUTE name [(arguments)]: the arguments are bound against the prepared statement's
    /// parameter types when it runs.
    Execute {
        name: String,
        arguments: Vec<sqlparser::ast::Expr>,
    },
    /// DECLARE name CURSOR [WITH HOLD] FOR query (`session::cursor`).
    DeclareCursor {
        name: String,
        query: QueryPlan,
        hold: bool,
    },
    /// FETCH [FORWARD] count (None: ALL) FROM name.
    Fetch {
        name: String,
        count: Option<u64>,
    },
    /// CLOSE name (None: ALL).
    CloseCursor {
        name: Option<String>,
    },
    /// DEALLOCATE [PREPARE] name (None: ALL).
    Deallocate {
        name: Option<String>,
    },
    /// SET [LOCAL] name = value (`local`: until the block ends).
    Set {
        name: String,
        value: String,
        local: bool,
    },
    /// RESET name (None: ALL): back to the session's starting value.
    Reset {
        name: Option<String>,
    },
    /// SET TRANSACTION (`session`: SET SESSION CHARACTERISTICS AS TRANSACTION) with the
    /// isolation level it names, if any.
    SetTransaction {
        isolation: Option<Isolation>,
        session: bool,
    },
    /// SET CONSTRAINTS { ALL | names } { IMMEDIATE | DEFERRED } (`names` empty: ALL).
    SetConstraints {
        names: Vec<String>,
        deferred: bool,
    },
    Show {
        name: String,
    },
    /// ANALYZE (VACUUM ANALYZE: `tag`) of these tables, every table if none.
    Analyze {
        tables: Vec<String>,
        tag: &'static str,
    },
    /// Accepted and ignored (e.g. SET of a parameter we do not model, VACUUM).
    NoOp {
        tag: &'static str,
    },
}

impl Plan {
    /// The columns of the rows the plan returns (empty: it returns none).
    pub fn columns(&self) -> Vec<OutputColumn> {
        match self {
            Plan::Select(select) => select.columns.clone(),
            Plan::Insert { returning, .. }
            | Plan::Update { returning, .. }
            | Plan::Delete { returning, .. } => returning
                .as_ref()
                .map(|returning| returning.columns.clone())
                .unwrap_or_default(),
            Plan::InsertSelect(insert) => insert
                .returning
                .as_ref()
                .map(|returning| returning.columns.clone())
                .unwrap_or_default(),
            Plan::Explain(_) => vec![OutputColumn {
                name: "QUERY PLAN".into(),
                data_type: DataType::Text,
            }],
            Plan::Show { name } if name == "all" => ["name", "setting", "description"]
                .into_iter()
                .map(|name| OutputColumn {
                    name: name.into(),
                    data_type: DataType::Text,
                })
                .collect(),
            Plan::Show { name } => vec![OutputColumn {
                name: name.clone(),
                data_type: DataType::Text,
            }],
            _ => Vec::new(),
        }
    }

    pub fn is_ddl(&self) -> bool {
        matches!(
            self,
            Plan::CreateTable { .. }
                | Plan::DropTable { .. }
                | Plan::CreateIndex { .. }
                | Plan::DropIndex { .. }
                | Plan::RenameIndex { .. }
                | Plan::AlterTable { .. }
                | Plan::CreateView { .. }
                | Plan::DropView { .. }
                | Plan::CreateEnum(_)
                | Plan::AlterEnum { .. }
                | Plan::DropEnum { .. }
                | Plan::CreateDatabase { .. }
                | Plan::DropDatabase { .. }
        )
    }

    /// Statements that only read (autocommit runs them in a read-only transaction).
    pub fn is_read_only(&self) -> bool {
        match self {
            Plan::Select(query) => !query.locks,
            Plan::Explain(_) => true,
            _ => false,
        }
    }
}
