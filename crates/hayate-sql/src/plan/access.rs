//! Access path selection on the primary key.

use crate::catalog::Table;
use crate::plan::expr::{BinaryOp, Expr};

/// A bound of a range scan on the first primary key column.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyBound {
    pub value: Expr,
    pub inclusive: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// Every primary key column equals a constant: one B+tree lookup.
    Point(Vec<Expr>),
    /// The first primary key column is bounded: a B+tree range scan.
    Range {
        lower: Option<KeyBound>,
        upper: Option<KeyBound>,
    },
    Full,
    /// The rows of a system table (`crate::system`), computed when read.
    System(crate::system::SystemSource),
}

/// Splits a WHERE clause into its AND-ed conjuncts.
fn conjuncts<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    match expr {
        Expr::Binary {
            op: BinaryOp::And,
            left,
            right,
            ..
        } => {
            conjuncts(left, out);
            conjuncts(right, out);
        }
        other => out.push(other),
    }
}

/// `column op constant` (either way round) as (column, op with the column on the left,
/// constant).
fn column_comparison(expr: &Expr) -> Option<(usize, BinaryOp, &Expr)> {
    let Expr::Binary {
        op, left, right, ..
    } = expr
    else {
        return None;
    };
    if !op.is_comparison() || *op == BinaryOp::NotEqual {
        return None;
    }
    match (strip_cast(left), strip_cast(right)) {
        (Expr::Column(column), constant) if constant.is_constant() => {
            Some((*column, *op, right.as_ref()))
        }
        (constant, Expr::Column(column)) if constant.is_constant() => {
            Some((*column, op.flipped(), left.as_ref()))
        }
        _ => None,
    }
}

/// A cast of a column to another numeric width keeps its order; look through it.
fn strip_cast(expr: &Expr) -> &Expr {
    match expr {
        Expr::Cast { expr, to } if to.is_numeric() => strip_cast(expr),
        other => other,
    }
}

/// Picks the access path for reading `table` with `filter`.
pub fn choose(table: &Table, filter: Option<&Expr>) -> Access {
    let Some(filter) = filter else {
        return Access::Full;
    };
    let key = &table.def.primary_key;
    if key.is_empty() {
        return Access::Full;
    }
    let mut parts = Vec::new();
    conjuncts(filter, &mut parts);
    let comparisons: Vec<_> = parts.iter().filter_map(|e| column_comparison(e)).collect();
    let equal = |column: usize| {
        comparisons
            .iter()
            .find(|(c, op, _)| *c == column && *op == BinaryOp::Equal)
            .map(|(_, _, constant)| (*constant).clone())
    };
    let point: Option<Vec<Expr>> = key.iter().map(|column| equal(*column)).collect();
    if let Some(values) = point {
        return Access::Point(values);
    }
    let first = key[0];
    let mut lower = None;
    let mut upper = None;
    for (column, op, constant) in &comparisons {
        if *column != first {
            continue;
        }
        let bound = |inclusive| {
            Some(KeyBound {
                value: (*constant).clone(),
                inclusive,
            })
        };
        match op {
            BinaryOp::Equal => {
                lower = bound(true);
                upper = bound(true);
            }
            BinaryOp::Greater if lower.is_none() => lower = bound(false),
            BinaryOp::GreaterOrEqual if lower.is_none() => lower = bound(true),
            BinaryOp::Less if upper.is_none() => upper = bound(false),
            BinaryOp::LessOrEqual if upper.is_none() => upper = bound(true),
            _ => {}
        }
    }
    if lower.is_none() && upper.is_none() {
        Access::Full
    } else {
        Access::Range { lower, upper }
    }
}
