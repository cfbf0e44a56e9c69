//! Hash aggregation: rows grouped by the GROUP BY values, aggregates accumulated per group.

use std::collections::HashMap;

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::{AggregateCall, AggregateFunction, Aggregation, EvalContext};
use crate::types::Value;

enum Accumulator {
    Count(i64),
    IntegerSum(Option<i128>),
    FloatSum(Option<f64>),
    Average { sum: f64, count: u64 },
    Min(Value),
    Max(Value),
}

impl Accumulator {
    fn new(call: &AggregateCall) -> Accumulator {
        match call.function {
            AggregateFunction::CountStar | AggregateFunction::Count => Accumulator::Count(0),
            AggregateFunction::Sum if call.data_type.is_integer() => Accumulator::IntegerSum(None),
            AggregateFunction::Sum => Accumulator::FloatSum(None),
            AggregateFunction::Avg => Accumulator::Average { sum: 0.0, count: 0 },
            AggregateFunction::Min => Accumulator::Min(Value::Null),
            AggregateFunction::Max => Accumulator::Max(Value::Null),
        }
    }

    /// Adds one input (None for count(*), which counts rows).
    fn add(&mut self, value: Option<Value>) -> SqlResult<()> {
        let Some(value) = value else {
            if let Accumulator::Count(count) = self {
                *count += 1;
            }
            return Ok(());
        };
        if value.is_null() {
            return Ok(());
        }
        match (self, value) {
            (Accumulator::Count(count), _) => *count += 1,
            (Accumulator::IntegerSum(sum), Value::Int(v)) => {
                *sum = Some(sum.unwrap_or(0) + v as i128)
            }
            (Accumulator::FloatSum(sum), Value::Int(v)) => {
                *sum = Some(sum.unwrap_or(0.0) + v as f64)
            }
            (Accumulator::FloatSum(sum), Value::Float(v)) => *sum = Some(sum.unwrap_or(0.0) + v),
            (Accumulator::Average { sum, count }, Value::Int(v)) => {
                *sum += v as f64;
                *count += 1;
            }
            (Accumulator::Average { sum, count }, Value::Float(v)) => {
                *sum += v;
                *count += 1;
            }
            (Accumulator::Min(current), value) => {
                if current.is_null() || value.compare(current)? == Some(std::cmp::Ordering::Less) {
                    *current = value;
                }
            }
            (Accumulator::Max(current), value) => {
                if current.is_null() || value.compare(current)? == Some(std::cmp::Ordering::Greater)
                {
                    *current = value;
                }
            }
            _ => {
                return Err(SqlError::mismatch(
                    "aggregate over a value of the wrong type",
                ))
            }
        }
        Ok(())
    }

    fn finish(self) -> SqlResult<Value> {
        Ok(match self {
            Accumulator::Count(count) => Value::Int(count),
            Accumulator::IntegerSum(None) | Accumulator::FloatSum(None) => Value::Null,
            Accumulator::IntegerSum(Some(sum)) => Value::Int(i64::try_from(sum).map_err(|_| {
                SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range")
            })?),
            Accumulator::FloatSum(Some(sum)) => Value::Float(sum),
            Accumulator::Average { count: 0, .. } => Value::Null,
            Accumulator::Average { sum, count } => Value::Float(sum / count as f64),
            Accumulator::Min(value) | Accumulator::Max(value) => value,
        })
    }
}

/// A hashable form of group values (floats by their bits, NULLs equal to each other, as
/// GROUP BY treats them).
fn group_key(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for value in values {
        match value {
            Value::Null => out.push(0),
            Value::Int(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Float(v) => {
                out.push(2);
                let v = if *v == 0.0 { 0.0f64 } else { *v };
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Value::Bool(v) => out.extend_from_slice(&[3, *v as u8]),
            Value::Text(text) => {
                out.push(4);
                out.extend_from_slice(&(text.len() as u64).to_le_bytes());
                out.extend_from_slice(text.as_bytes());
            }
        }
    }
    out
}

/// Groups `rows`; each output row is the group values followed by the aggregate values.
pub fn run(
    aggregation: &Aggregation,
    rows: Vec<Vec<Value>>,
    context: &EvalContext,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
    let mut groups: Vec<(Vec<Value>, Vec<Accumulator>)> = Vec::new();
    let new_accumulators = || {
        aggregation
            .aggregates
            .iter()
            .map(Accumulator::new)
            .collect()
    };
    if aggregation.group_by.is_empty() {
        groups.push((Vec::new(), new_accumulators()));
        index.insert(Vec::new(), 0);
    }
    for row in rows {
        let values: Vec<Value> = aggregation
            .group_by
            .iter()
            .map(|expr| expr.eval(&row, context))
            .collect::<SqlResult<_>>()?;
        let key = group_key(&values);
        let position = match index.get(&key) {
            Some(position) => *position,
            None => {
                groups.push((values, new_accumulators()));
                index.insert(key, groups.len() - 1);
                groups.len() - 1
            }
        };
        let accumulators = &mut groups[position].1;
        for (call, accumulator) in aggregation.aggregates.iter().zip(accumulators.iter_mut()) {
            let input = call
                .arg
                .as_ref()
                .map(|arg| arg.eval(&row, context))
                .transpose()?;
            accumulator.add(input)?;
        }
    }
    groups
        .into_iter()
        .map(|(mut values, accumulators)| {
            for accumulator in accumulators {
                values.push(accumulator.finish()?);
            }
            Ok(values)
        })
        .collect()
}
