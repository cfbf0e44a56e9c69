//! The plumbing every query operator shares: one statement's `Run` (its transaction, its
//! outer rows and its subquery results), the `Sink` an operator pushes its rows into, and the
//! hashable form of values that grouping, DISTINCT, set operations and hash joins key by.
//!
//! A query's life:
//! 1. The executor makes a `Run` for the statement's transaction (`Run::new`).
//! 2. `Run::produce` (in `query`) walks the plan from the root: each operator file takes the
//!    `Run`, asks it for its inputs' rows and pushes its own rows into its parent's `Sink`.
//! 3. The run ends with the statement; its subquery results go with it.
//!
//! This file imports no operator, so every operator can import it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use hayate_engine::{TempSpace, Transaction};

use super::Executor;
use crate::error::SqlResult;
use crate::plan::expr::truth;
use crate::plan::{EvalContext, Expr};
use crate::types::Value;

/// Where an operator sends its rows; returns false to stop the producer.
pub(super) type Sink<'s> = dyn FnMut(Vec<Value>) -> SqlResult<bool> + 's;

/// One statement's run: the transaction and the state of its subqueries.
pub(super) struct Run<'r, 'e> {
    pub exec: &'r Executor<'e>,
    pub txn: RefCell<&'r mut Transaction>,
    pub(super) outer: RefCell<Vec<Vec<Value>>>,
    pub(super) cache: RefCell<HashMap<usize, Rc<Vec<Vec<Value>>>>>,
    /// The rows of each recursive WITH query's work table (`Relation::WorkTable`).
    pub(super) work_tables: RefCell<HashMap<usize, Rc<Vec<Vec<Value>>>>>,
}

impl<'r, 'e> Run<'r, 'e> {
    pub fn new(exec: &'r Executor<'e>, txn: &'r mut Transaction) -> Run<'r, 'e> {
        Run {
            exec,
            txn: RefCell::new(txn),
            outer: RefCell::new(Vec::new()),
            cache: RefCell::new(HashMap::new()),
            work_tables: RefCell::new(HashMap::new()),
        }
    }

    pub fn context(&self) -> EvalContext<'_> {
        EvalContext {
            params: self.exec.context.params,
            database_name: self.exec.context.database_name,
            user_name: self.exec.context.user_name,
            transaction_timestamp: self.exec.context.transaction_timestamp,
            subqueries: Some(self),
            sequences: self.exec.context.sequences,
            settings: self.exec.context.settings,
            setting_changes: self.exec.context.setting_changes,
        }
    }

    pub(super) fn eval(&self, expr: &Expr, row: &[Value]) -> SqlResult<Value> {
        expr.eval(row, &self.context())
    }

    pub(super) fn holds(&self, predicate: &Expr, row: &[Value]) -> SqlResult<bool> {
        truth(&self.eval(predicate, row)?)
    }

    /// Where this statement's operators spill.
    pub(super) fn space(&self) -> &TempSpace {
        self.exec.db.temp()
    }

    /// The memory an operator may hold before it spills (`work_mem`).
    pub(super) fn work_mem(&self) -> usize {
        self.exec.work_mem_bytes
    }
}

/// A hashable form of values, equal exactly when the values are equal as SQL compares them
/// (an integral float equals the integer; NULLs are equal to each other, as DISTINCT and
/// UNION treat them; joins drop NULL keys before).
pub(super) fn hash_key(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        match value {
            Value::Null => out.push(0),
            Value::Int(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Float(v) if v.fract() == 0.0 && v.abs() < 9.2e18 => {
                out.push(1);
                out.extend_from_slice(&(*v as i64).to_le_bytes());
            }
            Value::Float(v) => {
                out.push(2);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Value::Bool(v) => out.extend_from_slice(&[3, *v as u8]),
            Value::Text(text) => {
                out.push(4);
                out.extend_from_slice(&(text.len() as u64).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
            // Equal spans are equal intervals ('1 mon' = '30 days').
            Value::Interval(v) => {
                out.push(6);
                out.extend_from_slice(&v.span().to_le_bytes());
            }
            #[allow(unreachable_patterns)]
            other => {
                let text = format!("{other:?}");
                out.push(5);
                out.extend_from_slice(&(text.len() as u64).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
    out
}
