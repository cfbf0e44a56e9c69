//! DECLARE ... CURSOR and FETCH (`session::cursor` runs them).

use sqlparser::ast;

use super::{ident_name, Binder};
use crate::error::{SqlError, SqlResult};
use crate::plan::Plan;

impl Binder<'_> {
    /// DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD] FOR query.
    pub(super) fn bind_declare(&mut self, declares: &[ast::Declare]) -> SqlResult<Plan> {
        let [declare] = declares else {
            return Err(SqlError::unsupported("DECLARE of several cursors"));
        };
        let (Some(query), [name]) = (&declare.for_query, declare.names.as_slice()) else {
            return Err(SqlError::unsupported(
                "DECLARE other than one cursor FOR a query",
            ));
        };
        if declare.binary == Some(true) {
            return Err(SqlError::unsupported("DECLARE BINARY CURSOR"));
        }
        if declare.scroll == Some(true) {
            return Err(SqlError::unsupported(
                "DECLARE SCROLL CURSOR (cursors go forward only)",
            ));
        }
        Ok(Plan::DeclareCursor {
            name: ident_name(name),
            query: self.bind_query(query)?,
            hold: declare.hold == Some(true),
        })
    }
}

/// The rows a FETCH asks for (None: ALL); forward only.
pub(super) fn fetch_count(direction: &ast::FetchDirection) -> SqlResult<Option<u64>> {
    use ast::FetchDirection as D;
    let number = |limit: &ast::ValueWithSpan| match &limit.value {
        ast::Value::Number(text, _) => text
            .parse::<u64>()
            .map_err(|_| SqlError::unsupported(format!("FETCH {text} (backward)"))),
        other => Err(SqlError::syntax(format!("FETCH count {other}"))),
    };
    Ok(match direction {
        D::Next => Some(1),
        D::Count { limit } => Some(number(limit)?),
        D::Forward { limit: None } => Some(1),
        D::Forward { limit: Some(limit) } => Some(number(limit)?),
        D::All | D::ForwardAll => None,
        other => {
            return Err(SqlError::unsupported(format!(
                "FETCH {other} (cursors go forward only)"
            )))
        }
    })
}
