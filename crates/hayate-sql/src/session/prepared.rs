//! Prepared statements: SQL-level PREPARE/EXECUTE/DEALLOCATE, and the names of the
//! protocol-level (Parse) statements, which share one namespace with them.
//!
//! 1. PREPARE binds a statement and keeps it by name (`prepare_named`); the server reports
//!    the protocol-level names (`protocol_statement_parsed`, `..._closed`).
//! 2. EXECUTE runs a kept statement with its parameters (`execute_named`).
//! 3. DEALLOCATE (ALL) drops kept statements, protocol-level ones too: the server collects
//!    their names (`take_deallocated`) to forget them.

use sqlparser::ast::Statement;

use super::{command, Session};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;
use crate::plan::bind::Binder;
use crate::types::{DataType, Value};

impl Session {
    /// The server parsed a named protocol-level statement: DEALLOCATE knows its name.
    pub fn protocol_statement_parsed(&mut self, name: &str) {
        if !name.is_empty() {
            self.protocol_statements.insert(name.to_string());
        }
    }

    /// The server closed a named protocol-level statement.
    pub fn protocol_statement_closed(&mut self, name: &str) {
        self.protocol_statements.remove(name);
    }

    /// The protocol-level statements DEALLOCATE dropped since the last call: the server
    /// removes them from its statement store.
    pub fn take_deallocated(&mut self) -> Vec<String> {
        std::mem::take(&mut self.deallocated)
    }

    /// PREPARE name AS statement.
    pub(super) fn prepare_named(
        &mut self,
        name: &str,
        declared: &[DataType],
        statement: &Statement,
    ) -> SqlResult<Outcome> {
        if self.prepared.contains_key(name) || self.protocol_statements.contains(name) {
            return Err(SqlError::new(
                sqlstate::DUPLICATE_PREPARED_STATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        let prepared = self.prepare(statement.clone(), declared)?;
        self.prepared.insert(name.to_string(), prepared);
        Ok(command("PREPARE"))
    }

    /// EXECUTE name (arguments): the arguments are constant expressions of the parameters'
    /// types.
    pub(super) fn execute_named(
        &mut self,
        name: &str,
        arguments: &[sqlparser::ast::Expr],
    ) -> SqlResult<Outcome> {
        let prepared = self.prepared.get(name).cloned().ok_or_else(|| {
            SqlError::new(
                sqlstate::INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            )
        })?;
        if arguments.len() != prepared.param_types.len() {
            return Err(SqlError::new(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "wrong number of parameters for prepared statement \"{name}\": expected {}, got {}",
                    prepared.param_types.len(),
                    arguments.len()
                ),
            ));
        }
        let context = self.standalone_context();
        let params = arguments
            .iter()
            .zip(&prepared.param_types)
            .map(|(argument, data_type)| {
                let expr = Binder::new(&self.catalog, &[]).bind_typed(argument, *data_type)?;
                expr.eval(&[], &context)?.cast(*data_type)
            })
            .collect::<SqlResult<Vec<Value>>>()?;
        self.execute_params_listed(&prepared, &params)
    }

    /// DEALLOCATE name, or ALL (None): SQL-level and protocol-level statements alike.
    pub(super) fn deallocate(&mut self, name: Option<&str>) -> SqlResult<Outcome> {
        let Some(name) = name else {
            self.prepared.clear();
            self.deallocated.extend(self.protocol_statements.drain());
            return Ok(command("DEALLOCATE ALL"));
        };
        if self.prepared.remove(name).is_none() {
            if !self.protocol_statements.remove(name) {
                return Err(SqlError::new(
                    sqlstate::INVALID_SQL_STATEMENT_NAME,
                    format!("prepared statement \"{name}\" does not exist"),
                ));
            }
            self.deallocated.push(name.to_string());
        }
        Ok(command("DEALLOCATE"))
    }
}
