//! Window functions: row_number(), rank() and dense_rank() OVER (PARTITION BY ... ORDER BY
//! ...). The input is held in memory; for each call in turn:
//!
//! 1. each row's partition values and ORDER BY values are evaluated;
//! 2. the rows are sorted on the partition values, then the ORDER BY (stable, so rows equal
//!    on both keep their input order);
//! 3. a walk over the sorted rows numbers them within each partition (rank: peers, rows
//!    equal on the ORDER BY values, share the number) and appends the number to the row.
//!
//! The rows leave in the order of the last call's sort.

use super::run::hash_key;
use super::sort_output;
use crate::error::SqlResult;
use crate::plan::{EvalContext, SortKey, WindowCall, WindowFunction};
use crate::types::Value;

pub(super) fn run(
    calls: &[WindowCall],
    mut rows: Vec<Vec<Value>>,
    context: &EvalContext,
) -> SqlResult<Vec<Vec<Value>>> {
    for call in calls {
        // Partition values first (in any fixed order), then the call's ORDER BY.
        let mut keys: Vec<SortKey> = call
            .partition_by
            .iter()
            .map(|expr| SortKey {
                expr: expr.clone(),
                descending: false,
                nulls_first: false,
            })
            .collect();
        keys.extend(call.order_by.iter().cloned());
        let mut keyed = Vec::with_capacity(rows.len());
        for row in rows {
            let values = keys
                .iter()
                .map(|key| key.expr.eval(&row, context))
                .collect::<SqlResult<Vec<_>>>()?;
            keyed.push((values, row));
        }
        sort_output(&mut keyed, &keys);
        let partition_width = call.partition_by.len();
        let mut previous: Option<(Vec<u8>, Vec<u8>)> = None;
        let (mut row_number, mut rank, mut dense_rank) = (0i64, 0i64, 0i64);
        rows = Vec::with_capacity(keyed.len());
        for (values, mut row) in keyed {
            let partition = hash_key(&values[..partition_width]);
            let order = hash_key(&values[partition_width..]);
            match &previous {
                Some((p, o)) if *p == partition => {
                    row_number += 1;
                    if *o != order {
                        rank = row_number;
                        dense_rank += 1;
                    }
                }
                _ => (row_number, rank, dense_rank) = (1, 1, 1),
            }
            previous = Some((partition, order));
            row.push(Value::Int(match call.function {
                WindowFunction::RowNumber => row_number,
                WindowFunction::Rank => rank,
                WindowFunction::DenseRank => dense_rank,
            }));
            rows.push(row);
        }
    }
    Ok(rows)
}
