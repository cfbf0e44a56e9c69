//! Binding CREATE SEQUENCE, the options of ALTER SEQUENCE, and DROP SEQUENCE.

use sqlparser::ast;

use super::{data_type, object_name, Binder};
use crate::catalog::{SequenceChanges, SequenceOptions};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::EvalContext;
use crate::plan::Plan;
use crate::types::{DataType, Value};

impl Binder<'_> {
    pub(super) fn bind_create_sequence(
        &mut self,
        if_not_exists: bool,
        name: &ast::ObjectName,
        as_type: Option<&ast::DataType>,
        options: &[ast::SequenceOptions],
        owned_by: Option<&ast::ObjectName>,
    ) -> SqlResult<Plan> {
        let owner = match owned_by {
            None => None,
            Some(owned_by) => {
                let mut parts: Vec<String> = owned_by
                    .0
                    .iter()
                    .filter_map(|part| part.as_ident().map(super::ident_name))
                    .collect();
                if parts.len() == 1 && parts[0] == "none" {
                    None
                } else {
                    let column = parts
                        .pop()
                        .filter(|_| !parts.is_empty())
                        .ok_or_else(|| SqlError::syntax("OWNED BY takes table.column or NONE"))?;
                    let table = parts.pop().expect("checked above");
                    let found = self.catalog.table(&table)?;
                    if found.def.column_index(&column).is_none() {
                        return Err(super::undefined_column(&column));
                    }
                    Some((table, column))
                }
            }
        };
        Ok(Plan::CreateSequence {
            name: object_name(name)?,
            options: SequenceOptions::new(self.bind_sequence_changes(as_type, options)?)?,
            if_not_exists,
            owner,
        })
    }

    /// The options a CREATE or ALTER SEQUENCE names, their values constant integers.
    pub(crate) fn bind_sequence_changes(
        &mut self,
        as_type: Option<&ast::DataType>,
        options: &[ast::SequenceOptions],
    ) -> SqlResult<SequenceChanges> {
        let data_type = match as_type.map(data_type).transpose()? {
            None => None,
            Some(integer) if integer.is_integer() => Some(integer),
            Some(other) => {
                return Err(SqlError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    "sequence type must be smallint, integer, or bigint",
                )
                .with_detail(format!("The type was {other}.")))
            }
        };
        let mut changes = SequenceChanges {
            data_type,
            ..SequenceChanges::default()
        };
        for option in options {
            use ast::SequenceOptions as O;
            match option {
                O::IncrementBy(value, _) => changes.increment = Some(self.constant_int(value)?),
                O::MinValue(value) => {
                    changes.min = Some(value.as_ref().map(|v| self.constant_int(v)).transpose()?)
                }
                O::MaxValue(value) => {
                    changes.max = Some(value.as_ref().map(|v| self.constant_int(v)).transpose()?)
                }
                O::StartWith(value, _) => changes.start = Some(self.constant_int(value)?),
                O::Cache(value) => changes.cache = Some(self.constant_int(value)?),
                // sqlparser's Cycle(true) is NO CYCLE.
                O::Cycle(no_cycle) => changes.cycle = Some(!no_cycle),
            }
        }
        Ok(changes)
    }

    /// A constant integer of a sequence option.
    fn constant_int(&mut self, expr: &ast::Expr) -> SqlResult<i64> {
        let bound = self.bind_typed(expr, DataType::Int8)?;
        match bound.eval(&[], &EvalContext::constant())? {
            Value::Int(value) => Ok(value),
            other => Err(SqlError::syntax(format!(
                "a sequence option must be an integer constant, not {other:?}"
            ))),
        }
    }
}
