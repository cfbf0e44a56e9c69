//! JOIN LATERAL: the right side is a query that reads the columns of the items before it,
//! so it runs once per left row, with that row pushed on the stack of enclosing rows that
//! `Expr::Outer` reads (as a correlated subquery runs per row). LEFT JOIN LATERAL pads a
//! left row whose right side yields no row passing `condition`.

use super::run::{Run, Sink};
use crate::error::SqlResult;
use crate::plan::expr::truth;
use crate::plan::{Expr, JoinKind, Relation};
use crate::types::Value;

pub(super) fn produce(
    run: &Run,
    left: &Relation,
    right: &Relation,
    kind: JoinKind,
    condition: Option<&Expr>,
    sink: &mut Sink,
) -> SqlResult<bool> {
    let right_width = right.width();
    run.produce(left, &mut |outer| {
        run.outer.borrow_mut().push(outer.clone());
        let rows = run.collect(right, None);
        run.outer.borrow_mut().pop();
        let mut matched = false;
        for row in rows? {
            let mut joined = outer.clone();
            joined.extend(row);
            if let Some(condition) = condition {
                if !truth(&condition.eval(&joined, &run.context())?)? {
                    continue;
                }
            }
            matched = true;
            if !sink(joined)? {
                return Ok(false);
            }
        }
        if matched || kind != JoinKind::Left {
            return Ok(true);
        }
        let mut padded = outer;
        padded.resize_with(padded.len() + right_width, || Value::Null);
        sink(padded)
    })
}
