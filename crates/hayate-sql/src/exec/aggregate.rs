//! Hash aggregation: rows grouped by the GROUP BY values, aggregates accumulated per group.

use std::collections::{HashMap, HashSet};

use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::{AggregateCall, AggregateFunction, Aggregation, EvalContext};
use crate::types::{numeric, DataType, Decimal, Interval, Value};

/// The running state of one aggregate of one group. Result types are PostgreSQL's: count is
/// int8, sum(int2/int4) int8, sum(int8) and sum/avg of integers and numerics numeric,
/// sum(float4) float4, sum(float8) and avg of floats float8 (`AggregateCall::data_type`).
enum Accumulator {
    Count(i64),
    /// Sums of integers and numerics, exact: integers in an i128, numerics in a decimal.
    ExactSum {
        integers: i128,
        decimals: Decimal,
        count: u64,
        average: bool,
        data_type: DataType,
    },
    FloatSum {
        sum: f64,
        count: u64,
        average: bool,
        data_type: DataType,
    },
    /// sum/avg of intervals, field by field (avg divides as interval / number does).
    IntervalSum {
        sum: Interval,
        count: u64,
        average: bool,
    },
    Min(Value),
    Max(Value),
    /// string_agg: the text so far (None before the first non-NULL value).
    StringAgg(Option<String>),
    /// array_agg: the elements so far.
    ArrayAgg(Vec<Option<String>>),
    /// json_agg / jsonb_agg: each element's JSON text so far.
    JsonAgg {
        elements: Vec<String>,
        binary: bool,
        rows: bool,
    },
    /// min/max of values compared by sort keys (enums, arrays: the call's one ORDER BY key,
    /// an expression over column 0 evaluated on each input value): the best input so far
    /// with its key.
    ExtremeByKey {
        best: Option<(Vec<Value>, Value)>,
        greatest: bool,
    },
    /// An aggregate with ORDER BY: its inputs with their sort keys, aggregated in order by
    /// `inner` when the group is finished.
    Ordered {
        inputs: Vec<(Vec<Value>, Option<Value>)>,
        inner: Box<Accumulator>,
    },
}

impl Accumulator {
    fn new(call: &AggregateCall) -> Accumulator {
        let min_or_max = matches!(
            call.function,
            AggregateFunction::Min | AggregateFunction::Max
        );
        if min_or_max && !call.order_by.is_empty() {
            return Accumulator::ExtremeByKey {
                best: None,
                greatest: call.function == AggregateFunction::Max,
            };
        }
        if !call.order_by.is_empty() {
            let plain = AggregateCall {
                order_by: Vec::new(),
                ..call.clone()
            };
            return Accumulator::Ordered {
                inputs: Vec::new(),
                inner: Box::new(Accumulator::new(&plain)),
            };
        }
        let average = call.function == AggregateFunction::Avg;
        let float_input = call.data_type.is_float();
        match call.function {
            AggregateFunction::CountStar | AggregateFunction::Count => Accumulator::Count(0),
            AggregateFunction::Sum | AggregateFunction::Avg
                if call.data_type == DataType::Interval =>
            {
                Accumulator::IntervalSum {
                    sum: Interval::default(),
                    count: 0,
                    average,
                }
            }
            AggregateFunction::Sum | AggregateFunction::Avg if float_input => {
                Accumulator::FloatSum {
                    sum: 0.0,
                    count: 0,
                    average,
                    data_type: call.data_type,
                }
            }
            AggregateFunction::Sum | AggregateFunction::Avg => Accumulator::ExactSum {
                integers: 0,
                decimals: Decimal::ZERO,
                count: 0,
                average,
                data_type: call.data_type,
            },
            AggregateFunction::Min => Accumulator::Min(Value::Null),
            AggregateFunction::Max => Accumulator::Max(Value::Null),
            AggregateFunction::StringAgg => Accumulator::StringAgg(None),
            AggregateFunction::ArrayAgg => Accumulator::ArrayAgg(Vec::new()),
            AggregateFunction::JsonAgg { binary, rows } => Accumulator::JsonAgg {
                elements: Vec::new(),
                binary,
                rows,
            },
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
        if let Accumulator::ArrayAgg(elements) = self {
            elements.push(value.to_text());
            return Ok(());
        }
        if let Accumulator::JsonAgg { elements, .. } = self {
            elements.push(value.to_text().unwrap_or_else(|| "null".into()));
            return Ok(());
        }
        if value.is_null() {
            return Ok(());
        }
        match (self, value) {
            (Accumulator::Count(count), _) => *count += 1,
            (
                Accumulator::ExactSum {
                    integers, count, ..
                },
                Value::Int(v),
            ) => {
                *integers += v as i128;
                *count += 1;
            }
            (
                Accumulator::ExactSum {
                    decimals, count, ..
                },
                Value::Numeric(v),
            ) => {
                *decimals = numeric::add(decimals, &v)?;
                *count += 1;
            }
            (Accumulator::IntervalSum { sum, count, .. }, Value::Interval(v)) => {
                *sum = sum.checked_add(v)?;
                *count += 1;
            }
            (Accumulator::FloatSum { sum, count, .. }, value) if value.as_f64().is_some() => {
                *sum += value.as_f64().unwrap_or(0.0);
                *count += 1;
            }
            (Accumulator::StringAgg(text), Value::Text(pair)) => {
                let parsed = crate::system::array::parse(&pair);
                if let Some([Some(value), delimiter]) = parsed.as_deref() {
                    match text {
                        // A NULL delimiter is an empty one, as in PostgreSQL.
                        Some(text) => {
                            text.push_str(delimiter.as_deref().unwrap_or(""));
                            text.push_str(value);
                        }
                        None => *text = Some(value.clone()),
                    }
                }
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

    fn finish(self, call: &AggregateCall) -> SqlResult<Value> {
        Ok(match self {
            Accumulator::Ordered {
                mut inputs,
                mut inner,
            } => {
                inputs.sort_by(|(a, _), (b, _)| super::compare_sort_keys(a, b, &call.order_by));
                for (_, input) in inputs {
                    inner.add(input)?;
                }
                return inner.finish(call);
            }
            Accumulator::Count(count) => Value::Int(count),
            Accumulator::ExactSum { count: 0, .. }
            | Accumulator::FloatSum { count: 0, .. }
            | Accumulator::IntervalSum { count: 0, .. } => Value::Null,
            Accumulator::IntervalSum {
                sum,
                count,
                average,
            } => Value::Interval(if average {
                sum.divide(count as f64)?
            } else {
                sum
            }),
            Accumulator::ExactSum {
                integers,
                decimals,
                count,
                average,
                data_type,
            } => {
                if data_type == DataType::Int8 && !average {
                    let sum = i64::try_from(integers).map_err(|_| {
                        SqlError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "bigint out of range")
                    })?;
                    return Ok(Value::Int(sum));
                }
                let integers = Decimal::try_from_i128_with_scale(integers, 0)
                    .map_err(|_| numeric::out_of_range())?;
                let sum = numeric::add(&integers, &decimals)?;
                if average {
                    Value::Numeric(numeric::divide(&sum, &Decimal::from(count))?)
                } else {
                    Value::Numeric(sum)
                }
            }
            Accumulator::FloatSum {
                sum,
                count,
                average,
                data_type,
            } => {
                let result = if average { sum / count as f64 } else { sum };
                if data_type == DataType::Float4 && !average {
                    Value::Float4(result as f32)
                } else {
                    Value::Float(result)
                }
            }
            Accumulator::Min(value) | Accumulator::Max(value) => value,
            Accumulator::ExtremeByKey { best, .. } => best.map_or(Value::Null, |(_, value)| value),
            Accumulator::StringAgg(text) => text.map_or(Value::Null, Value::Text),
            Accumulator::JsonAgg { elements, .. } if elements.is_empty() => Value::Null,
            // json keeps each element's text as it came; jsonb normalizes the whole.
            Accumulator::JsonAgg {
                elements,
                binary,
                rows,
            } => {
                // Rows after the first start a new line (not NULLs), as PostgreSQL writes them.
                let mut text = String::from("[");
                for (index, element) in elements.iter().enumerate() {
                    if index > 0 {
                        text.push_str(", ");
                        if rows && element != "null" {
                            text.push_str("\n ");
                        }
                    }
                    text.push_str(element);
                }
                text.push(']');
                Value::Text(match binary {
                    true => crate::types::json::format(&crate::types::json::parse(&text, true)?),
                    false => text,
                })
            }
            Accumulator::ArrayAgg(elements) if elements.is_empty() => Value::Null,
            Accumulator::ArrayAgg(elements) => Value::Text(crate::system::array::format(&elements)),
        })
    }
}

/// A hashable form of group values (floats by their bits, numerics normalized, NULLs equal
/// to each other, as GROUP BY treats them).
fn group_key(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    let put_bytes = |out: &mut Vec<u8>, tag: u8, bytes: &[u8]| {
        out.push(tag);
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(bytes);
    };
    for value in values {
        match value {
            Value::Null => out.push(0),
            Value::Int(v) => {
                out.push(1);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Float(_) | Value::Float4(_) => {
                out.push(2);
                let v = value.as_f64().unwrap_or(0.0);
                // -0 and 0 are one group, and so is every NaN (as SQL compares them).
                let v = if v == 0.0 {
                    0.0f64
                } else if v.is_nan() {
                    f64::NAN
                } else {
                    v
                };
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Value::Bool(v) => out.extend_from_slice(&[3, *v as u8]),
            Value::Text(text) => put_bytes(&mut out, 4, text.as_bytes()),
            Value::Bytes(bytes) => put_bytes(&mut out, 5, bytes),
            Value::Numeric(v) => put_bytes(&mut out, 6, v.normalize().to_string().as_bytes()),
            Value::Date(v) => {
                out.push(7);
                out.extend_from_slice(&v.to_le_bytes());
            }
            Value::Timestamp(v) | Value::TimestampTz(v) => {
                out.push(8);
                out.extend_from_slice(&v.to_le_bytes());
            }
            // Equal spans are one group, as '1 mon' = '30 days'.
            Value::Interval(v) => {
                out.push(9);
                out.extend_from_slice(&v.span().to_le_bytes());
            }
        }
    }
    out
}

/// Groups being aggregated in memory, in the order they first appeared.
pub struct Groups<'a> {
    aggregation: &'a Aggregation,
    index: HashMap<Vec<u8>, usize>,
    groups: Vec<(Vec<Value>, Vec<Accumulator>)>,
    /// Per group, per DISTINCT aggregate (None for the others): the inputs seen so far.
    seen: Vec<Vec<Option<HashSet<Vec<u8>>>>>,
    /// Estimated memory of the groups (see `spill::row_bytes`).
    bytes: usize,
}

impl<'a> Groups<'a> {
    pub fn new(aggregation: &'a Aggregation) -> Groups<'a> {
        let mut groups = Groups {
            aggregation,
            index: HashMap::new(),
            groups: Vec::new(),
            seen: Vec::new(),
            bytes: 0,
        };
        if aggregation.group_by.is_empty() {
            // Without GROUP BY there is one group, even over no rows.
            groups.new_group(Vec::new(), Vec::new());
        }
        groups
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn new_group(&mut self, key: Vec<u8>, values: Vec<Value>) -> usize {
        let accumulators = self.aggregation.aggregates.iter().map(Accumulator::new);
        self.bytes += key.len()
            + super::spill::row::row_bytes(&values)
            + self.aggregation.aggregates.len() * std::mem::size_of::<Accumulator>()
            + 64;
        self.groups.push((values, accumulators.collect()));
        let seen = self.aggregation.aggregates.iter();
        self.seen
            .push(seen.map(|call| call.distinct.then(HashSet::new)).collect());
        self.index.insert(key, self.groups.len() - 1);
        self.groups.len() - 1
    }

    /// Adds `row` to its group. A row of a new group when `may_add` is false is given back
    /// with its group key instead (for the caller to spill).
    pub fn add(
        &mut self,
        row: Vec<Value>,
        may_add: bool,
        context: &EvalContext,
    ) -> SqlResult<Option<(Vec<u8>, Vec<Value>)>> {
        let values: Vec<Value> = self
            .aggregation
            .group_by
            .iter()
            .map(|expr| expr.eval(&row, context))
            .collect::<SqlResult<_>>()?;
        // Without GROUP BY there is one group, made with the table: no key to look up.
        let single = self.aggregation.group_by.is_empty() && !self.groups.is_empty();
        let key = match single {
            true => Vec::new(),
            false => group_key(&values),
        };
        let found = match single {
            true => Some(&0),
            false => self.index.get(&key),
        };
        let position = match found {
            Some(position) => *position,
            None if may_add => self.new_group(key, values),
            None => return Ok(Some((key, row))),
        };
        let accumulators = &mut self.groups[position].1;
        let seen = &mut self.seen[position];
        for ((call, accumulator), seen) in self
            .aggregation
            .aggregates
            .iter()
            .zip(accumulators)
            .zip(seen)
        {
            // FILTER first: a rejected row's argument is not evaluated (as in PostgreSQL).
            if let Some(filter) = &call.filter {
                if !crate::types::truth(&filter.eval(&row, context)?)? {
                    continue;
                }
            }
            let input = call
                .arg
                .as_ref()
                .map(|arg| arg.eval(&row, context))
                .transpose()?;
            if let (Some(seen), Some(value)) = (seen.as_mut(), input.as_ref()) {
                if !value.is_null() {
                    let key = group_key(std::slice::from_ref(value));
                    let size = key.len() + 48;
                    if !seen.insert(key) {
                        continue; // DISTINCT: this input was counted already
                    }
                    self.bytes += size;
                }
            }
            if let Accumulator::ExtremeByKey { best, greatest } = accumulator {
                if let Some(value) = input.filter(|value| !value.is_null()) {
                    let keys = call
                        .order_by
                        .iter()
                        .map(|key| key.expr.eval(std::slice::from_ref(&value), context))
                        .collect::<SqlResult<Vec<_>>>()?;
                    let wanted = match greatest {
                        true => std::cmp::Ordering::Greater,
                        false => std::cmp::Ordering::Less,
                    };
                    let better = best.as_ref().is_none_or(|(best_keys, _)| {
                        super::compare_sort_keys(&keys, best_keys, &call.order_by) == wanted
                    });
                    if better {
                        *best = Some((keys, value));
                    }
                }
                continue;
            }
            if let Accumulator::Ordered { inputs, .. } = accumulator {
                let keys = call
                    .order_by
                    .iter()
                    .map(|key| key.expr.eval(&row, context))
                    .collect::<SqlResult<Vec<_>>>()?;
                self.bytes += super::spill::row::row_bytes(&keys)
                    + input
                        .as_ref()
                        .map_or(0, |v| super::spill::row::row_bytes(std::slice::from_ref(v)));
                inputs.push((keys, input));
                continue;
            }
            accumulator.add(input)?;
        }
        Ok(None)
    }

    /// Each group's values followed by its aggregates' values.
    pub fn finish(self) -> SqlResult<Vec<Vec<Value>>> {
        let calls = &self.aggregation.aggregates;
        self.groups
            .into_iter()
            .map(|(mut values, accumulators)| {
                for (accumulator, call) in accumulators.into_iter().zip(calls) {
                    values.push(accumulator.finish(call)?);
                }
                Ok(values)
            })
            .collect()
    }
}

/// Groups `rows` in memory; each output row is the group values followed by the aggregate
/// values. (Queries go through `spill::Aggregate`, which spills past `work_mem`.)
#[allow(dead_code)]
pub fn run(
    aggregation: &Aggregation,
    rows: Vec<Vec<Value>>,
    context: &EvalContext,
) -> SqlResult<Vec<Vec<Value>>> {
    let mut groups = Groups::new(aggregation);
    for row in rows {
        groups.add(row, true, context)?;
    }
    groups.finish()
}
