//! SQL-level cursors: DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH HOLD] FOR query, FETCH
//! [FORWARD] [n | ALL | NEXT] [FROM] name, CLOSE name | ALL (Django's QuerySet.iterator(),
//! dumpdata and its test runner use them).
//!
//! DECLARE runs the query to its end and keeps the rows in the session (no incremental
//! portal: a cursor over a large result holds it in memory); FETCH hands them out in order.
//! A cursor without HOLD belongs to its transaction block (DECLARE outside one is 25P01)
//! and is gone when the block ends; one WITH HOLD lives until CLOSE or the session's end
//! (unless the block that declared it rolls back), and sees the rows as of its DECLARE, as
//! in PostgreSQL.

use std::collections::VecDeque;

use super::{command, Session, State};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;
use crate::plan::{OutputColumn, Plan, QueryPlan};
use crate::types::Value;

/// An open cursor: its columns and the rows not fetched yet.
pub(super) struct Cursor {
    columns: Vec<OutputColumn>,
    rows: VecDeque<Vec<Value>>,
    hold: bool,
    /// Declared in the open block: gone if it rolls back.
    in_block: bool,
}

fn no_cursor(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_CURSOR_NAME,
        format!("cursor \"{name}\" does not exist"),
    )
}

impl Session {
    pub(super) fn declare_cursor(
        &mut self,
        name: &str,
        query: &QueryPlan,
        hold: bool,
        params: &[Value],
    ) -> SqlResult<Outcome> {
        if !hold && matches!(self.state, State::Idle) {
            return Err(SqlError::new(
                sqlstate::NO_ACTIVE_SQL_TRANSACTION,
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        if self.cursors.contains_key(name) {
            return Err(SqlError::new(
                "42P03",
                format!("cursor \"{name}\" already exists"),
            ));
        }
        let Outcome::Rows { columns, rows, .. } =
            self.run_data(&Plan::Select(query.clone()), params)?
        else {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "a cursor's query returned no rows outcome",
            ));
        };
        let cursor = Cursor {
            columns,
            rows: rows.into(),
            hold,
            in_block: !matches!(self.state, State::Idle),
        };
        self.cursors.insert(name.to_string(), cursor);
        Ok(command("DECLARE CURSOR"))
    }

    /// FETCH `count` rows (None: all that are left).
    pub(super) fn fetch(&mut self, name: &str, count: Option<u64>) -> SqlResult<Outcome> {
        let cursor = self.cursors.get_mut(name).ok_or_else(|| no_cursor(name))?;
        let take = count.map_or(cursor.rows.len(), |count| {
            usize::try_from(count)
                .unwrap_or(usize::MAX)
                .min(cursor.rows.len())
        });
        let rows: Vec<Vec<Value>> = cursor.rows.drain(..take).collect();
        Ok(Outcome::Rows {
            columns: cursor.columns.clone(),
            command: "FETCH".into(),
            rows,
        })
    }

    /// CLOSE `name` (None: ALL).
    pub(super) fn close_cursor(&mut self, name: Option<&str>) -> SqlResult<Outcome> {
        match name {
            Some(name) => {
                self.cursors.remove(name).ok_or_else(|| no_cursor(name))?;
            }
            None => self.cursors.clear(),
        }
        Ok(command("CLOSE CURSOR"))
    }

    /// The end of a transaction block: its cursors without HOLD close, and so do those it
    /// declared WITH HOLD when it rolls back.
    pub(super) fn close_block_cursors(&mut self, committed: bool) {
        self.cursors
            .retain(|_, cursor| cursor.hold && (committed || !cursor.in_block));
        for cursor in self.cursors.values_mut() {
            cursor.in_block = false;
        }
    }
}
