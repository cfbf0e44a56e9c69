//! The parts of write and DDL plans beyond plain rows: sequences feeding identity columns,
//! INSERT ... ON CONFLICT, ALTER TABLE actions.

use std::sync::Arc;

use crate::catalog::{CheckDef, ColumnDef, ForeignKeyDef, Sequence};
use crate::plan::expr::Expr;
use crate::types::DataType;

/// An identity column of an INSERT: rows without a value for it take the sequence's next.
#[derive(Debug, Clone)]
pub struct SequenceFill {
    pub column: usize,
    pub sequence: Arc<Sequence>,
    /// Per row of the INSERT: true where the column takes the next value.
    pub rows: Vec<bool>,
}

/// A unique constraint an ON CONFLICT clause arbitrates on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arbiter {
    PrimaryKey,
    /// Position in `TableDef::indexes` of a unique index.
    Index(usize),
}

#[derive(Debug, Clone)]
pub struct OnConflict {
    /// The constraints whose conflict triggers the action (empty: the table has none, so
    /// nothing conflicts).
    pub arbiters: Vec<Arbiter>,
    pub action: ConflictAction,
}

#[derive(Debug, Clone)]
pub enum ConflictAction {
    Nothing,
    /// DO UPDATE SET ... [WHERE ...]: expressions over the existing row followed by the
    /// proposed row (EXCLUDED), so EXCLUDED.c is column `columns + c`.
    Update {
        assignments: Vec<(usize, Expr)>,
        filter: Option<Expr>,
    },
}

#[derive(Debug, Clone)]
pub enum AlterAction {
    /// ADD [CONSTRAINT name] PRIMARY KEY (columns).
    AddPrimaryKey {
        columns: Vec<String>,
        name: Option<String>,
    },
    AddColumn {
        column: ColumnDef,
        /// The value of the new column in existing rows (the DEFAULT, or NULL).
        fill: Expr,
        if_not_exists: bool,
    },
    DropColumn {
        name: String,
        if_exists: bool,
    },
    /// ALTER COLUMN SET/DROP DEFAULT (`default`: Some(new default or None)), SET/DROP NOT
    /// NULL (`not_null`): the definition changes, the rows stay (SET NOT NULL checks them).
    AlterColumn {
        name: String,
        default: Option<Option<String>>,
        not_null: Option<bool>,
    },
    /// ADD/DROP CONSTRAINT (CHECK, FOREIGN KEY): the table's constraints afterwards (the rows
    /// are checked against added ones).
    SetConstraints {
        checks: Vec<CheckDef>,
        foreign_keys: Vec<ForeignKeyDef>,
    },
    /// ADD CONSTRAINT ... UNIQUE (columns): a unique index of that name.
    AddUnique {
        name: String,
        columns: Vec<String>,
    },
    /// DROP CONSTRAINT of a UNIQUE constraint: its index.
    DropUnique(String),
    /// RENAME COLUMN: the definition, its CHECKs' texts, the foreign keys naming it and the
    /// sequence OWNED BY it follow.
    RenameColumn {
        from: String,
        to: String,
    },
    /// RENAME TO: the table's new name (its indexes, trees and sequences keep theirs).
    RenameTable(String),
    /// RENAME CONSTRAINT of a CHECK, a FOREIGN KEY or a UNIQUE constraint (with its index).
    RenameConstraint {
        from: String,
        to: String,
    },
    /// ALTER COLUMN ... TYPE where the stored form stays (between integer widths, between
    /// text and varchar(n)): the rows are checked against a narrower type, not rewritten.
    SetType {
        name: String,
        data_type: DataType,
    },
}
