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

use crate::catalog::{Table, TableDef};
use crate::types::DataType;
pub use access::Access;
pub use expr::{BinaryOp, EvalContext, Expr, ScalarFunction};

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
}

#[derive(Debug, Clone, PartialEq)]
pub struct AggregateCall {
    pub function: AggregateFunction,
    pub arg: Option<Expr>,
    pub data_type: DataType,
}

/// GROUP BY and aggregates. After it, a row is the group's key values followed by the
/// aggregates' values.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregation {
    pub group_by: Vec<Expr>,
    pub aggregates: Vec<AggregateCall>,
}

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
}

#[derive(Debug, Clone)]
pub struct SelectPlan {
    /// None: one row without columns (SELECT without FROM).
    pub source: Option<TableRead>,
    pub aggregation: Option<Aggregation>,
    pub having: Option<Expr>,
    pub projection: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
    pub order_by: Vec<SortKey>,
    /// The rows come from the access path already in ORDER BY order.
    pub ordered_by_key: bool,
    pub limit: Option<Expr>,
    pub offset: Option<Expr>,
}

/// RETURNING: expressions over the written row.
#[derive(Debug, Clone)]
pub struct Returning {
    pub projection: Vec<Expr>,
    pub columns: Vec<OutputColumn>,
}

#[derive(Debug, Clone)]
pub enum TransactionControl {
    Begin,
    Commit,
    Rollback,
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
    },
    CreateIndex {
        table: String,
        name: Option<String>,
        columns: Vec<String>,
        unique: bool,
        if_not_exists: bool,
    },
    DropIndex {
        names: Vec<String>,
        if_exists: bool,
    },
    AlterTable {
        table: String,
        actions: Vec<write::AlterAction>,
    },
    /// Outside a transaction block: fresh engine trees; inside: deletes the rows.
    Truncate {
        tables: Vec<Arc<Table>>,
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
    Select(SelectPlan),
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
    Set {
        name: String,
        value: String,
    },
    Show {
        name: String,
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
                | Plan::AlterTable { .. }
        )
    }

    /// Statements that only read (autocommit runs them in a read-only transaction).
    pub fn is_read_only(&self) -> bool {
        matches!(self, Plan::Select(_))
    }
}
