//! Access path selection: on the primary key, else on a secondary index.
//!
//! In order of preference: equality on every primary key column (one lookup), equality on
//! every column of an index (a unique index first, then the one with most columns), then a
//! range scan of the primary key or of an index: equality on its first columns and/or a bound
//! on the next one, the key with the most equal columns winning, then one with a bound, the
//! primary key on a tie (TPC-C's order lines of one order are `ol_w_id = ? AND ol_d_id = ?
//! AND ol_o_id = ?` on the key; its customers by name `c_w_id = ? AND c_d_id = ? AND c_last
//! = ?` on an index whose key goes on with c_first); a full scan.
//!
//! An OR of conjunctions (IN lists bind to one: `i_id IN (1, 2)` is `i_id = 1 OR i_id = 2`)
//! whose every branch, with the other conjuncts, has a better path than the conjuncts alone
//! becomes a union of those paths (`Access::Union`): TPC-C kits' `i_id IN (...)` are ten
//! point lookups, `(w = 1 AND d = 2) OR (w = 1 AND d = 5)` two range scans.
//!
//! Every path returns rows in primary key order. A query whose ORDER BY that order does not
//! give may read through a secondary index in the index's order instead (`ordered_index`):
//! when the chosen path is that index's, always; when the query has a LIMIT, also an index
//! path at least as narrow as the chosen one, or the whole index instead of a full scan
//! (`ORDER BY created DESC LIMIT 10` reads ten entries backward, not the table and a sort).

use crate::catalog::statistics::{
    TableStatistics, DEFAULT_EQUAL, DEFAULT_INEQUALITY, DEFAULT_RANGE, UNKNOWN_BOUND,
};
use crate::catalog::{IndexDef, Table, EXPRESSION_KEY};
use crate::plan::expr::{BinaryOp, Expr};
use crate::plan::SortKey;
use crate::types::{DataType, Value};

/// What paths need to know of a table's indexes beyond their columns, bound over its row:
/// partial indexes' predicates and expression indexes' key expressions.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexBindings {
    /// (index position, predicate).
    pub predicates: Vec<(usize, Expr)>,
    /// (index position, key position, expression).
    pub expressions: Vec<(usize, usize, Expr)>,
    /// Indexes the statement's snapshot may not read through (`Table::index_ready`).
    pub unreadable: Vec<usize>,
}

/// Ids of expression keys as `Comparisons` and paths name them, past every column number.
const EXPRESSION_IDS: usize = usize::MAX / 2;

/// The id of the expression key at `key` of the index at `index`.
fn expression_id(index: usize, key: usize) -> usize {
    EXPRESSION_IDS + index * 4096 + key
}

/// An index's keys as paths compare them: its columns, and an expression key's id.
fn key_ids(index: &IndexDef, position: usize) -> Vec<usize> {
    (index.columns.iter().enumerate())
        .map(|(key, column)| match *column {
            EXPRESSION_KEY => expression_id(position, key),
            column => column,
        })
        .collect()
}

/// A bound of a range scan on the key column after the equal prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyBound {
    pub value: Expr,
    pub inclusive: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// Every primary key column equals a constant: one B+tree lookup.
    Point(Vec<Expr>),
    /// The first primary key columns equal constants (`prefix`, maybe none) and/or the next
    /// one is bounded: a B+tree range scan.
    Range {
        prefix: Vec<Expr>,
        lower: Option<KeyBound>,
        upper: Option<KeyBound>,
    },
    Full,
    /// Through a secondary index: its entries give primary keys, which give the rows.
    Index(IndexAccess),
    /// The rows of any of these paths (never Full or Union), each once, in primary key order.
    Union(Vec<Access>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct IndexAccess {
    /// Position in `TableDef::indexes` (and `Table::index_trees`).
    pub index: usize,
    pub lookup: IndexLookup,
    /// Other indexes' lookups whose entries narrow the primary keys `lookup` finds before
    /// the rows are read (an index AND): each row read is a B+tree lookup in the clustered
    /// table, an entry of a range a step in a leaf. The executor skips one whose range is
    /// much longer than the keys found (`exec::index`); never a path of `lookup`'s index.
    pub narrowed_by: Vec<IndexAccess>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum IndexLookup {
    /// Every index column equals a constant.
    Point(Vec<Expr>),
    /// The first index columns equal constants (`prefix`, maybe none, never all of them)
    /// and/or the next one is bounded.
    Range {
        prefix: Vec<Expr>,
        lower: Option<KeyBound>,
        upper: Option<KeyBound>,
    },
}

/// Splits a WHERE clause into its AND-ed conjuncts.
pub(crate) fn conjuncts<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
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

/// A table's column types by position, as `exact_column` asks for them.
pub(crate) fn column_types(table: &Table) -> impl Fn(usize) -> Option<DataType> + '_ {
    |column| table.def.columns.get(column).map(|c| c.data_type)
}

/// `column op constant` (either way round) as (column, op with the column on the left,
/// constant); `type_of` gives a column's type (see `exact_column`).
pub(crate) fn column_comparison<'a>(
    expr: &'a Expr,
    type_of: &dyn Fn(usize) -> Option<DataType>,
) -> Option<(usize, BinaryOp, &'a Expr)> {
    let Expr::Binary {
        op, left, right, ..
    } = expr
    else {
        return None;
    };
    if !op.is_comparison() || *op == BinaryOp::NotEqual {
        return None;
    }
    if right.is_constant() {
        if let Some(column) = exact_column(left, type_of) {
            return Some((column, *op, right.as_ref()));
        }
    }
    if left.is_constant() {
        if let Some(column) = exact_column(right, type_of) {
            return Some((column, op.flipped(), left.as_ref()));
        }
    }
    None
}

/// The column `expr` reads, if it is a column, or an integer column through casts that keep
/// its values exact and in their order (to an integer type or numeric: `c::int8 = $1` is
/// `c = $1`). Other casts are not looked through: through `t::int` ('5' and '05') or
/// `f::int` (2.6 and 3) values a key keeps apart compare equal, so no key range finds them.
pub(crate) fn exact_column(
    expr: &Expr,
    type_of: &dyn Fn(usize) -> Option<DataType>,
) -> Option<usize> {
    match expr {
        Expr::Column(column) => Some(*column),
        Expr::Cast { expr, to } if to.is_integer() || matches!(to, DataType::Numeric(_)) => {
            let column = exact_column(expr, type_of)?;
            type_of(column)?.is_integer().then_some(column)
        }
        _ => None,
    }
}

/// `expression op constant` (either way round) where the expression is an index's key
/// expression (`lower(email) = $1`), as `column_comparison` with the key's id: one for each
/// index key that is that expression.
fn expression_comparisons<'a>(
    expr: &'a Expr,
    expressions: &[(usize, usize, Expr)],
) -> Vec<(usize, BinaryOp, &'a Expr)> {
    let Expr::Binary {
        op, left, right, ..
    } = expr
    else {
        return Vec::new();
    };
    if !op.is_comparison() || *op == BinaryOp::NotEqual || expressions.is_empty() {
        return Vec::new();
    }
    // The expression exactly (a cast of it compares other values); every index holding it.
    let keys = |side: &Expr| -> Vec<usize> {
        (expressions.iter())
            .filter(|(_, _, expression)| expression == side)
            .map(|(index, key, _)| expression_id(*index, *key))
            .collect()
    };
    if right.is_constant() {
        let ids = keys(left);
        if !ids.is_empty() {
            return ids
                .into_iter()
                .map(|id| (id, *op, right.as_ref()))
                .collect();
        }
    }
    if left.is_constant() {
        return (keys(right).into_iter())
            .map(|id| (id, op.flipped(), left.as_ref()))
            .collect();
    }
    Vec::new()
}

type Bounds = (Option<KeyBound>, Option<KeyBound>);

/// At most this many branches in a union (an IN list longer than this is scanned).
const MAX_UNION: usize = 1024;

/// How narrow a path is, comparable: a point lookup (3), an index lookup (2, unique or not
/// and its width), a range scan (1, equal columns, bounded), a full scan (0). A union is
/// as narrow as its widest branch.
pub(crate) fn narrowness(table: &Table, access: &Access) -> (u8, usize, bool) {
    match access {
        Access::Point(_) => (3, 0, false),
        Access::Index(IndexAccess {
            index,
            lookup: IndexLookup::Point(values),
            ..
        }) if table.def.indexes[*index].unique => (3, values.len(), false),
        Access::Index(IndexAccess {
            lookup: IndexLookup::Point(values),
            ..
        }) => (2, values.len(), false),
        Access::Range {
            prefix,
            lower,
            upper,
        }
        | Access::Index(IndexAccess {
            lookup:
                IndexLookup::Range {
                    prefix,
                    lower,
                    upper,
                },
            ..
        }) => (1, prefix.len(), lower.is_some() || upper.is_some()),
        Access::Full => (0, 0, false),
        Access::Union(branches) => branches
            .iter()
            .map(|branch| narrowness(table, branch))
            .min()
            .unwrap_or((0, 0, false)),
    }
}

/// The disjuncts of an OR tree.
fn disjuncts<'a>(expr: &'a Expr, out: &mut Vec<&'a Expr>) {
    match expr {
        Expr::Binary {
            op: BinaryOp::Or,
            left,
            right,
            ..
        } => {
            disjuncts(left, out);
            disjuncts(right, out);
        }
        other => out.push(other),
    }
}

/// Picks the access path for reading `table` with `filter`; `terms`: its partial indexes'
/// predicates and expression indexes' keys (`TableRead::index_terms`).
pub fn choose(table: &Table, filter: Option<&Expr>, terms: &IndexBindings) -> Access {
    let Some(filter) = filter else {
        return Access::Full;
    };
    let mut parts = Vec::new();
    conjuncts(filter, &mut parts);
    choose_parts(table, &parts, terms, MAX_UNION)
}

/// Which of the table's indexes a read with AND-ed `parts` may use: every plain index; a
/// partial one when each conjunct of its predicate is one of `parts`, or is `c IS NOT NULL`
/// and `parts` compare c with a constant (a comparison is never true of a NULL). Empty when
/// every index may be used.
pub fn usable_indexes(table: &Table, terms: &IndexBindings, parts: &[&Expr]) -> Vec<bool> {
    if terms.predicates.is_empty() {
        return Vec::new();
    }
    let type_of = column_types(table);
    let mut usable = vec![true; table.def.indexes.len()];
    for (position, predicate) in &terms.predicates {
        let mut needed = Vec::new();
        conjuncts(predicate, &mut needed);
        let implied = |needed: &&Expr| {
            parts.contains(needed)
                || match needed {
                    Expr::IsNull {
                        expr,
                        negated: true,
                    } => match exact_column(expr, &type_of) {
                        Some(column) => parts.iter().any(|part| {
                            column_comparison(part, &type_of).is_some_and(|(c, _, _)| c == column)
                        }),
                        None => false,
                    },
                    _ => false,
                }
        };
        if let Some(slot) = usable.get_mut(*position) {
            *slot = needed.iter().all(implied);
        }
    }
    usable
}

/// `usable_indexes` for a read: without the indexes its snapshot may not read through.
fn readable_indexes(table: &Table, terms: &IndexBindings, parts: &[&Expr]) -> Vec<bool> {
    let mut usable = usable_indexes(table, terms, parts);
    if !terms.unreadable.is_empty() {
        usable.resize(table.def.indexes.len(), true);
        for position in &terms.unreadable {
            usable[*position] = false;
        }
    }
    usable
}

/// True if `usable` (`usable_indexes`) lets a path use the index at `position`.
fn may_use(usable: &[bool], position: usize) -> bool {
    usable.get(position).copied().unwrap_or(true)
}

/// The best of the single path for `parts` and a union over one of its OR conjuncts, whose
/// branches may use at most `budget` lookups in all.
fn choose_parts(table: &Table, parts: &[&Expr], terms: &IndexBindings, budget: usize) -> Access {
    let single = choose_single(table, parts, terms);
    let mut best_rank = narrowness(table, &single);
    if best_rank.0 == 3 {
        return single;
    }
    let statistics = table.statistics.for_planning();
    let mut best_cost = statistics.as_ref().map(|s| cost(table, s, &single));
    let mut best = single;
    for (position, part) in parts.iter().enumerate() {
        let mut branches = Vec::new();
        disjuncts(part, &mut branches);
        if branches.len() < 2 || branches.len() > budget {
            continue;
        }
        let share = budget / branches.len();
        let mut paths = Vec::new();
        let mut complete = true;
        for branch in branches {
            let mut with: Vec<&Expr> = Vec::with_capacity(parts.len() + 1);
            with.extend(parts[..position].iter().copied());
            with.extend(parts[position + 1..].iter().copied());
            conjuncts(branch, &mut with);
            match choose_parts(table, &with, terms, share) {
                Access::Full => {
                    complete = false;
                    break;
                }
                Access::Union(inner) => paths.extend(inner),
                path => paths.push(path),
            }
        }
        if !complete {
            continue;
        }
        let union = Access::Union(paths);
        let rank = narrowness(table, &union);
        let better = match (&statistics, best_cost) {
            (Some(statistics), Some(best_cost)) => {
                let union_cost = cost(table, statistics, &union);
                (union_cost < best_cost).then_some(union_cost)
            }
            _ => (rank > best_rank).then_some(0.0),
        };
        if let Some(union_cost) = better {
            best_rank = rank;
            best_cost = best_cost.map(|_| union_cost);
            best = union;
        }
    }
    best
}

/// The column (and key expression) comparisons of AND-ed conjuncts, which equalities and
/// bounds paths use.
struct Comparisons<'a>(Vec<(usize, BinaryOp, &'a Expr)>);

impl<'a> Comparisons<'a> {
    fn of(table: &Table, parts: &[&'a Expr], terms: &IndexBindings) -> Self {
        let type_of = column_types(table);
        Comparisons(
            (parts.iter())
                .flat_map(|e| match column_comparison(e, &type_of) {
                    Some(comparison) => vec![comparison],
                    None => expression_comparisons(e, &terms.expressions),
                })
                .collect(),
        )
    }

    /// The constant `column` equals, if any.
    fn equal(&self, column: &usize) -> Option<Expr> {
        self.0
            .iter()
            .find(|(c, op, _)| c == column && *op == BinaryOp::Equal)
            .map(|(_, _, constant)| (*constant).clone())
    }

    /// The bounds on `column`, if any.
    fn bounds(&self, column: usize) -> Option<Bounds> {
        let mut lower = None;
        let mut upper = None;
        for (c, op, constant) in &self.0 {
            if *c != column {
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
        (lower.is_some() || upper.is_some()).then_some((lower, upper))
    }

    /// Every one of `columns` equal to a constant, those constants.
    fn all_equal(&self, columns: &[usize]) -> Option<Vec<Expr>> {
        columns.iter().map(|c| self.equal(c)).collect()
    }

    /// The range of a key over `columns`: its equal prefix and the next column's bounds,
    /// ranked by (equal columns, bounded).
    fn range(&self, columns: &[usize]) -> ((usize, bool), Vec<Expr>, Bounds) {
        let prefix: Vec<Expr> = columns.iter().map_while(|c| self.equal(c)).collect();
        let (lower, upper) = columns
            .get(prefix.len())
            .and_then(|next| self.bounds(*next))
            .unwrap_or((None, None));
        let rank = (prefix.len(), lower.is_some() || upper.is_some());
        (rank, prefix, (lower, upper))
    }

    /// The path through the index at `position`: its lookup if every column is equal, else
    /// its range (maybe the whole index).
    fn index_path(&self, table: &Table, position: usize) -> IndexAccess {
        let columns = key_ids(&table.def.indexes[position], position);
        let lookup = match self.all_equal(&columns) {
            Some(values) => IndexLookup::Point(values),
            None => {
                let (_, prefix, (lower, upper)) = self.range(&columns);
                IndexLookup::Range {
                    prefix,
                    lower,
                    upper,
                }
            }
        };
        IndexAccess {
            index: position,
            lookup,
            narrowed_by: Vec::new(),
        }
    }

    /// The columns (key ids) a path through the index at `position` compares: its equal
    /// prefix and the bounded key after it.
    fn compared(&self, table: &Table, position: usize) -> Vec<usize> {
        let columns = key_ids(&table.def.indexes[position], position);
        let ((equal, bounded), _, _) = self.range(&columns);
        columns[..equal + usize::from(bounded)].to_vec()
    }

    /// `path` narrowed by the other usable indexes a comparison reaches (at most
    /// `NARROWING_MAX`, those comparing most columns first), each comparing a column
    /// `path`'s own lookup does not.
    fn narrowed(&self, table: &Table, usable: &[bool], mut path: IndexAccess) -> IndexAccess {
        let own = self.compared(table, path.index);
        let mut candidates: Vec<(usize, usize)> = (0..table.def.indexes.len())
            .filter(|position| *position != path.index && may_use(usable, *position))
            .filter_map(|position| {
                let compared = self.compared(table, position);
                let new = compared.iter().any(|column| !own.contains(column));
                new.then_some((compared.len(), position))
            })
            .collect();
        candidates.sort_by_key(|(compared, position)| (std::cmp::Reverse(*compared), *position));
        path.narrowed_by = (candidates.into_iter().take(NARROWING_MAX))
            .map(|(_, position)| self.index_path(table, position))
            .collect();
        path
    }
}

/// At most this many other indexes narrow an index path (`IndexAccess::narrowed_by`).
const NARROWING_MAX: usize = 2;

/// The access path of AND-ed `parts` without unions.
fn choose_single(table: &Table, parts: &[&Expr], terms: &IndexBindings) -> Access {
    let comparisons = Comparisons::of(table, parts, terms);
    let usable = readable_indexes(table, terms, parts);
    let key = &table.def.primary_key;
    if !key.is_empty() {
        if let Some(values) = comparisons.all_equal(key) {
            return Access::Point(values);
        }
    }
    let mut best: Option<((bool, usize), usize, Vec<Expr>)> = None;
    for (position, index) in table.def.indexes.iter().enumerate() {
        if !may_use(&usable, position) {
            continue;
        }
        if let Some(values) = comparisons.all_equal(&key_ids(index, position)) {
            let rank = (index.unique, index.columns.len());
            if best
                .as_ref()
                .is_none_or(|(best_rank, _, _)| rank > *best_rank)
            {
                best = Some((rank, position, values));
            }
        }
    }
    let statistics = table.statistics.for_planning();
    if let Some((_, index, values)) = best {
        let path = IndexAccess {
            index,
            lookup: IndexLookup::Point(values),
            narrowed_by: Vec::new(),
        };
        if table.def.indexes[index].unique {
            return Access::Index(path);
        }
        return match statistics {
            Some(statistics) => cheapest(table, &statistics, &comparisons, &usable),
            None => Access::Index(comparisons.narrowed(table, &usable, path)),
        };
    }
    if let Some(statistics) = statistics {
        return cheapest(table, &statistics, &comparisons, &usable);
    }
    // The range scans: (equal columns, bounded) ranks the candidates, the primary key first.
    let (mut best_rank, prefix, (lower, upper)) = comparisons.range(key);
    let mut access = Access::Range {
        prefix,
        lower,
        upper,
    };
    for (position, index) in table.def.indexes.iter().enumerate() {
        let (rank, prefix, (lower, upper)) = comparisons.range(&key_ids(index, position));
        if rank > best_rank && may_use(&usable, position) {
            best_rank = rank;
            access = Access::Index(IndexAccess {
                index: position,
                lookup: IndexLookup::Range {
                    prefix,
                    lower,
                    upper,
                },
                narrowed_by: Vec::new(),
            });
        }
    }
    match access {
        _ if best_rank == (0, false) => Access::Full,
        Access::Index(path) => Access::Index(comparisons.narrowed(table, &usable, path)),
        access => access,
    }
}

/// The cheapest path by the statistics (no point lookup on a unique key is possible): the
/// primary key's range, each usable index's lookup or range, a full scan; on a tie the
/// earlier of these.
fn cheapest(
    table: &Table,
    statistics: &TableStatistics,
    comparisons: &Comparisons,
    usable: &[bool],
) -> Access {
    let (rank, prefix, (lower, upper)) = comparisons.range(&table.def.primary_key);
    let mut candidates = Vec::new();
    if rank != (0, false) && !table.def.primary_key.is_empty() {
        candidates.push(Access::Range {
            prefix,
            lower,
            upper,
        });
    }
    for (position, index) in table.def.indexes.iter().enumerate() {
        // Every column equal or not, a path compares its first one at least.
        let compared = comparisons.range(&key_ids(index, position)).0 != (0, false);
        if compared && may_use(usable, position) {
            candidates.push(Access::Index(comparisons.index_path(table, position)));
        }
    }
    candidates.push(Access::Full);
    let mut best = (f64::INFINITY, Access::Full);
    for candidate in candidates {
        let estimate = cost(table, statistics, &candidate);
        if estimate < best.0 {
            best = (estimate, candidate);
        }
    }
    match best.1 {
        Access::Index(path) => Access::Index(comparisons.narrowed(table, usable, path)),
        access => access,
    }
}

/// Costs of reading, in units of one row read by a scan with its filter tried: an index
/// entry read, a row looked up by its key in the table's tree, a descent to a range's first
/// leaf. A lookup costs several scanned rows: a descent (from where the previous sorted key
/// was, `Transaction::get_sorted`) and a copy of the row out of a leaf a scan would not
/// have had to find.
const ENTRY_COST: f64 = 0.5;
const LOOKUP_COST: f64 = 4.0;
const DESCENT_COST: f64 = 10.0;

/// The estimated cost of reading `table` through `access` (statistics of its rows).
pub(crate) fn cost(table: &Table, statistics: &TableStatistics, access: &Access) -> f64 {
    let rows = statistics.rows.max(1.0);
    match access {
        Access::Point(_) => LOOKUP_COST,
        Access::Full => DESCENT_COST + rows,
        Access::Range {
            prefix,
            lower,
            upper,
        } => {
            let key = &table.def.primary_key;
            let found = lookup_fraction(table, statistics, key, prefix, lower, upper);
            DESCENT_COST + rows * found
        }
        Access::Index(IndexAccess { index, lookup, .. }) => {
            let columns = key_ids(&table.def.indexes[*index], *index);
            let entries = match lookup {
                IndexLookup::Point(_) if table.def.indexes[*index].unique => {
                    return index_read_cost(None);
                }
                IndexLookup::Point(values) => {
                    rows * lookup_fraction(table, statistics, &columns, values, &None, &None)
                }
                IndexLookup::Range {
                    prefix,
                    lower,
                    upper,
                } => rows * lookup_fraction(table, statistics, &columns, prefix, lower, upper),
            };
            index_read_cost(Some(entries))
        }
        Access::Union(branches) => (branches.iter())
            .map(|branch| cost(table, statistics, branch))
            .sum(),
    }
}

/// The cost of one read through an index: a unique key's entry and row (`None`: two
/// lookups, as the primary key's one), or a descent and `entries` entries with their rows.
fn index_read_cost(entries: Option<f64>) -> f64 {
    match entries {
        None => 2.0 * LOOKUP_COST,
        Some(entries) => DESCENT_COST + entries * (ENTRY_COST + LOOKUP_COST),
    }
}

/// The fraction of rows a key's lookup finds: its first `prefix.len()` keys (`columns`, a
/// column or an expression key's id) equal those values and the next one within the bounds.
fn lookup_fraction(
    table: &Table,
    statistics: &TableStatistics,
    columns: &[usize],
    prefix: &[Expr],
    lower: &Option<KeyBound>,
    upper: &Option<KeyBound>,
) -> f64 {
    let mut fraction: f64 = (columns.iter().zip(prefix))
        .map(|(column, value)| equal_fraction(table, statistics, *column, value))
        .product();
    if lower.is_some() || upper.is_some() {
        if let Some(next) = columns.get(prefix.len()) {
            fraction *= range_fraction(table, statistics, *next, lower.as_ref(), upper.as_ref());
        }
    }
    fraction
}

/// A lookup of `table` through one of its secondary indexes for each row of a join's other
/// side (an index nested loop): the index's first keys equal `bound(column)`, which gives an
/// expression over the other side's row (and true) or a constant of the table's own filter
/// (and false); `own` (that filter's conjuncts) decides which partial indexes may be used.
/// The usable index with the most keys bound, a unique index's whole key first; None if no
/// index has a key bound by the other side. Expression keys end the bound prefix.
pub(crate) fn join_lookup(
    table: &Table,
    terms: &IndexBindings,
    own: &[&Expr],
    bound: &dyn Fn(usize) -> Option<(Expr, bool)>,
) -> Option<IndexAccess> {
    let usable = readable_indexes(table, terms, own);
    let mut best: Option<((bool, usize), IndexAccess)> = None;
    for (position, index) in table.def.indexes.iter().enumerate() {
        if !may_use(&usable, position) {
            continue;
        }
        let mut values = Vec::new();
        let mut joined = false;
        for column in &index.columns {
            let Some((value, other_side)) = (*column != EXPRESSION_KEY)
                .then(|| bound(*column))
                .flatten()
            else {
                break;
            };
            joined |= other_side;
            values.push(value);
        }
        let whole = values.len() == index.columns.len();
        let rank = (whole && index.unique, values.len());
        if !joined
            || best
                .as_ref()
                .is_some_and(|(best_rank, _)| *best_rank >= rank)
        {
            continue;
        }
        let lookup = match whole {
            true => IndexLookup::Point(values),
            false => IndexLookup::Range {
                prefix: values,
                lower: None,
                upper: None,
            },
        };
        let path = IndexAccess {
            index: position,
            lookup,
            narrowed_by: Vec::new(),
        };
        best = Some((rank, path));
    }
    best.map(|(_, path)| path)
}

/// By `table`'s statistics: the rows it holds, and those a key from elsewhere (a join's
/// probe) equal to its `column` is estimated to find (the column's average share).
pub(crate) fn probe_rows(table: &Table, column: usize) -> Option<(f64, f64)> {
    let statistics = table.statistics.for_planning()?;
    let share = statistics
        .column(&table.def, column)
        .map_or(DEFAULT_EQUAL, |column| column.average_equal());
    Some((statistics.rows, statistics.rows * share))
}

/// Whether an index nested loop through `path` (a `join_lookup`, once per row of the other
/// side) is estimated cheaper than a hash join that reads `table` once through `own`. With
/// the table's statistics and `outer_rows` (the other side's estimated rows): a probe costs
/// a descent and its entries' rows looked up, a key from the other side finding the
/// column's average share of rows, against the hash join's read plus one probe per outer
/// row. Otherwise by shape: when the other side is a narrow read (`outer_narrow`) and `own`
/// is a scan without an equal key prefix.
pub(crate) fn join_lookup_cheaper(
    table: &Table,
    path: &IndexAccess,
    own: &Access,
    outer_rows: Option<f64>,
    outer_narrow: bool,
) -> bool {
    let (Some(statistics), Some(outer_rows)) = (table.statistics.for_planning(), outer_rows) else {
        return outer_narrow && narrowness(table, own) < (1, 1, false);
    };
    let index = &table.def.indexes[path.index];
    let probe = match &path.lookup {
        IndexLookup::Point(_) if index.unique => index_read_cost(None),
        IndexLookup::Point(values) | IndexLookup::Range { prefix: values, .. } => {
            let fraction: f64 = (index.columns.iter().zip(values))
                .map(|(column, value)| {
                    match (statistics.column(&table.def, *column), known_value(value)) {
                        (Some(column), Some(known)) => column.equal(Some(&known)),
                        (Some(column), None) => column.average_equal(),
                        (None, _) => DEFAULT_EQUAL,
                    }
                })
                .product();
            index_read_cost(Some(statistics.rows.max(1.0) * fraction))
        }
    };
    let outer_rows = outer_rows.max(1.0);
    outer_rows * probe < cost(table, &statistics, own) + outer_rows
}

/// The value of a constant known when planning (a literal, a cast of one); None for a
/// parameter or anything evaluated later.
fn known_value(expr: &Expr) -> Option<Value> {
    match expr {
        Expr::Literal(value) => Some(value.clone()),
        Expr::Cast { expr, to } => known_value(expr)?.cast(*to).ok(),
        Expr::Enum {
            expr, order: false, ..
        } => known_value(expr),
        _ => None,
    }
}

/// The fraction of rows whose key `column` (an expression key has no statistics) equals
/// `value`.
fn equal_fraction(table: &Table, statistics: &TableStatistics, column: usize, value: &Expr) -> f64 {
    match statistics.column(&table.def, column) {
        Some(column) => column.equal(known_value(value).as_ref()),
        None => DEFAULT_EQUAL,
    }
}

/// The fraction of rows whose key `column` lies within the bounds.
fn range_fraction(
    table: &Table,
    statistics: &TableStatistics,
    column: usize,
    lower: Option<&KeyBound>,
    upper: Option<&KeyBound>,
) -> f64 {
    let lower_value = lower.and_then(|bound| known_value(&bound.value));
    let upper_value = upper.and_then(|bound| known_value(&bound.value));
    let Some(column) = statistics.column(&table.def, column) else {
        let unknown = (lower.is_some() && lower_value.is_none())
            || (upper.is_some() && upper_value.is_none());
        return match (lower, upper) {
            _ if unknown => UNKNOWN_BOUND,
            (Some(_), Some(_)) => DEFAULT_RANGE,
            _ => DEFAULT_INEQUALITY,
        };
    };
    column.range(
        lower.map(|bound| (lower_value.as_ref(), bound.inclusive)),
        upper.map(|bound| (upper_value.as_ref(), bound.inclusive)),
    )
}

/// The rows a read of `table` with `filter` returns by its statistics (None without any):
/// each column compared with a constant narrows by its fraction, an OR by the sum of its
/// branches'; other conditions are not counted.
pub fn estimated_rows(table: &Table, filter: Option<&Expr>, terms: &IndexBindings) -> Option<f64> {
    let statistics = table.statistics.for_planning()?;
    let mut parts = Vec::new();
    if let Some(filter) = filter {
        conjuncts(filter, &mut parts);
    }
    let fraction = filter_fraction(table, &statistics, &parts, terms, 0);
    Some(
        (statistics.rows * fraction)
            .max(if parts.is_empty() { 0.0 } else { 1.0 })
            .round(),
    )
}

fn filter_fraction(
    table: &Table,
    statistics: &TableStatistics,
    parts: &[&Expr],
    terms: &IndexBindings,
    depth: usize,
) -> f64 {
    let comparisons = Comparisons::of(table, parts, terms);
    let mut columns: Vec<usize> = comparisons.0.iter().map(|(column, _, _)| *column).collect();
    columns.sort_unstable();
    columns.dedup();
    let mut fraction = 1.0;
    for column in columns {
        fraction *= match comparisons.equal(&column) {
            Some(value) => equal_fraction(table, statistics, column, &value),
            None => {
                let (lower, upper) = comparisons.bounds(column).unwrap_or((None, None));
                range_fraction(table, statistics, column, lower.as_ref(), upper.as_ref())
            }
        };
    }
    if depth < 4 {
        for part in parts {
            let mut branches = Vec::new();
            disjuncts(part, &mut branches);
            if branches.len() < 2 {
                continue;
            }
            let sum: f64 = (branches.iter())
                .map(|branch| {
                    let mut within = Vec::new();
                    conjuncts(branch, &mut within);
                    filter_fraction(table, statistics, &within, terms, depth + 1)
                })
                .sum();
            fraction *= sum.min(1.0);
        }
    }
    fraction
}

/// A path reading `table`'s rows in `order_by`'s order through a secondary index, when the
/// chosen path (`current`) reads them in primary key order and that is not it: (the path,
/// read backward). See the module's text for when it is taken; a path yielding at most one
/// row, or a union, is left alone.
pub fn ordered_index(
    table: &Table,
    filter: Option<&Expr>,
    terms: &IndexBindings,
    current: &Access,
    order_by: &[SortKey],
    limited: bool,
) -> Option<(Access, bool)> {
    let current_rank = narrowness(table, current);
    if current_rank.0 == 3 || matches!(current, Access::Union(_)) {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(filter) = filter {
        conjuncts(filter, &mut parts);
    }
    let comparisons = Comparisons::of(table, &parts, terms);
    let usable = readable_indexes(table, terms, &parts);
    let mut best: Option<((u8, usize, bool), Access, bool)> = None;
    for (position, index) in table.def.indexes.iter().enumerate() {
        if !may_use(&usable, position) {
            continue;
        }
        let path = match current {
            Access::Index(path) if path.index == position => path.clone(),
            _ => comparisons.index_path(table, position),
        };
        let fixed = match &path.lookup {
            IndexLookup::Point(values) => values.len(),
            IndexLookup::Range { prefix, .. } => prefix.len(),
        };
        let Some(descending) = entry_order(table, index, fixed, order_by) else {
            continue;
        };
        let whole = matches!(
            &path.lookup,
            IndexLookup::Range { prefix, lower: None, upper: None } if prefix.is_empty()
        );
        let access = Access::Index(path);
        if access == *current {
            return Some((access, descending));
        }
        let rank = match whole {
            true => narrowness(table, &Access::Full),
            false => narrowness(table, &access),
        };
        if limited && rank >= current_rank && best.as_ref().is_none_or(|(r, _, _)| rank > *r) {
            best = Some((rank, access, descending));
        }
    }
    best.map(|(_, access, descending)| (access, descending))
}

/// Whether an index's entries whose `fixed` first columns are equal come in `order_by`'s
/// order: Some(false) read forward, Some(true) backward, None if not. Entries order by the
/// index columns, NULLs last, then by the primary key (equal non-NULL values of a unique
/// index do not repeat), so the ORDER BY must name the columns after the fixed ones in that
/// order (the fixed ones anywhere), all ascending or all descending, with NULLs where the
/// direction puts them (ASC NULLS LAST, DESC NULLS FIRST: PostgreSQL's defaults) unless the
/// column is NOT NULL. json and jsonb values do not order as their keys do.
fn entry_order(
    table: &Table,
    index: &IndexDef,
    fixed: usize,
    order_by: &[SortKey],
) -> Option<bool> {
    let def = &table.def;
    let order: Vec<usize> = index
        .columns
        .iter()
        .chain(&def.primary_key)
        .copied()
        .collect();
    let mut next = fixed;
    let mut descending = None;
    for sort in order_by {
        let Expr::Column(column) = sort.expr else {
            return None;
        };
        if index.columns[..fixed].contains(&column) {
            continue;
        }
        if order.get(next) != Some(&column) {
            return None;
        }
        let described = &def.columns[column];
        if matches!(described.data_type, DataType::Json | DataType::Jsonb) {
            return None;
        }
        let nullable = next < index.columns.len() && !described.not_null;
        if nullable && sort.nulls_first != sort.descending {
            return None;
        }
        match descending {
            None => descending = Some(sort.descending),
            Some(direction) if direction != sort.descending => return None,
            Some(_) => {}
        }
        next += 1;
    }
    Some(descending.unwrap_or(false))
}
