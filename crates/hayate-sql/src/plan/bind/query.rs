//! Binding queries: SELECT (FROM in `from`), grouping, projection, DISTINCT, ORDER BY,
//! LIMIT/OFFSET, VALUES and UNION, into a tree of `Relation`s:
//! source -> Aggregate -> Filter (HAVING) -> Window -> Sort -> Distinct On -> Project ->
//! Distinct -> Limit.

use sqlparser::ast::{self, SelectItem, SetExpr};

use super::expr::{contains_aggregate, function_name};
use super::from::check_locked_names;
use super::scope::Scope;
use super::{ident_name, Binder, Grouping};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access;
use crate::plan::expr::Expr;
use crate::plan::{
    Access, Aggregation, OutputColumn, QueryPlan, Relation, SetOperator, SortKey, TableRead,
};
use crate::types::DataType;

impl Binder<'_> {
    pub(super) fn bind_query(&mut self, query: &ast::Query) -> SqlResult<QueryPlan> {
        let Some(with) = &query.with else {
            return self.bind_query_body(query);
        };
        // Each reference to a WITH query binds it in place, as a derived table (PostgreSQL
        // inlines non-recursive WITH queries too; a recursive one is bound by
        // `bind_recursive_cte` at each reference); `ctes` holds them while the body binds.
        let in_view = self.ctes.len();
        self.ctes.extend(
            with.cte_tables
                .iter()
                .map(|cte| (cte.clone(), with.recursive)),
        );
        let plan = self.bind_query_body(query);
        self.ctes.truncate(in_view);
        plan
    }

    fn bind_query_body(&mut self, query: &ast::Query) -> SqlResult<QueryPlan> {
        // A lock on the derived table or view this query is: its tables are locked too.
        let inherited = self.inherited_lock.take();
        let with_inherited: Vec<ast::LockClause>;
        let locks = match inherited {
            Some(clause) => {
                with_inherited = query.locks.iter().cloned().chain([clause]).collect();
                &with_inherited[..]
            }
            None => &query.locks[..],
        };
        if !locks.is_empty() {
            self.saw_locks = true;
        }
        if let SetExpr::Select(select) = query.body.as_ref() {
            return self.bind_select(select, Some(query), locks);
        }
        if !locks.is_empty() {
            return Err(SqlError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "FOR UPDATE is not allowed with UNION/INTERSECT/EXCEPT",
            ));
        }
        let (root, columns) = self.bind_set_expr(&query.body)?;
        // ORDER BY and LIMIT of a set operation see its output columns.
        let saved_scope = self.scope.replace(Scope::output(&columns));
        let saved_grouping = self.grouping.take();
        let identity: Vec<Expr> = (0..columns.len()).map(Expr::Column).collect();
        let order_by = self.bind_order_by(query, &identity, &columns);
        self.scope = saved_scope;
        self.grouping = saved_grouping;
        let order_by = order_by?;
        let (limit, offset) = self.bind_limit(query)?;
        let mut root = root;
        if !order_by.is_empty() {
            root = Relation::Sort {
                input: Box::new(root),
                keys: order_by,
            };
        }
        if limit.is_some() || offset.is_some() {
            root = Relation::Limit {
                input: Box::new(root),
                limit,
                offset,
            };
        }
        Ok(QueryPlan {
            locks: root.locks() || self.saw_locks,
            root,
            columns,
        })
    }

    /// A WITH RECURSIVE query `base UNION [ALL] step` whose step reads the query itself: the
    /// step is bound with that name as the work table of the rows the last run added
    /// (`Relation::RecursiveUnion`). None if the query is not of that form (it is then an
    /// ordinary WITH query).
    pub(super) fn bind_recursive_cte(
        &mut self,
        cte: &ast::Cte,
    ) -> Option<SqlResult<(Relation, Vec<OutputColumn>)>> {
        let SetExpr::SetOperation {
            left,
            op: ast::SetOperator::Union,
            set_quantifier,
            right,
        } = cte.query.body.as_ref()
        else {
            return None;
        };
        let name = ident_name(&cte.alias.name);
        if cte.query.order_by.is_some() || cte.query.limit_clause.is_some() {
            return Some(Err(SqlError::unsupported(
                "ORDER BY or LIMIT in a recursive query",
            )));
        }
        let all = matches!(set_quantifier, ast::SetQuantifier::All);
        Some((|| {
            let (base, mut columns) = self.bind_set_expr(left)?;
            for (column, given) in columns.iter_mut().zip(&cte.alias.columns) {
                column.name = ident_name(&given.name);
            }
            let work = self.next_work_table;
            self.next_work_table += 1;
            let work_columns = columns
                .iter()
                .map(|column| (column.name.clone(), column.data_type))
                .collect();
            self.work_tables.push((name, work, work_columns));
            let step = self.bind_set_expr(right);
            self.work_tables.pop();
            let (step, step_columns) = step?;
            if step_columns.len() != columns.len() {
                return Err(SqlError::syntax(
                    "each UNION query must have the same number of columns",
                ));
            }
            let step = cast_to(step, &step_columns, &columns);
            let (base, step) = (Box::new(base), Box::new(step));
            let relation = if self.work_tables_read.contains(&work) {
                Relation::RecursiveUnion {
                    base,
                    step,
                    work,
                    all,
                }
            } else {
                // The step does not read the query: an ordinary UNION.
                Relation::Union {
                    left: base,
                    right: step,
                    all,
                }
            };
            Ok((relation, columns))
        })())
    }

    /// A query body without its ORDER BY/LIMIT: a SELECT, a parenthesized query, VALUES or
    /// UNION [ALL].
    fn bind_set_expr(&mut self, body: &SetExpr) -> SqlResult<(Relation, Vec<OutputColumn>)> {
        match body {
            SetExpr::Select(select) => {
                let plan = self.bind_select(select, None, &[])?;
                Ok((plan.root, plan.columns))
            }
            SetExpr::Query(query) => {
                let plan = self.bind_query(query)?;
                Ok((plan.root, plan.columns))
            }
            SetExpr::Values(values) => {
                let saved = self.scope.take();
                let result = self.bind_values(values);
                self.scope = saved;
                result
            }
            SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                let operator = match op {
                    ast::SetOperator::Union => None,
                    ast::SetOperator::Intersect => Some(SetOperator::Intersect),
                    ast::SetOperator::Except => Some(SetOperator::Except),
                    other => {
                        return Err(SqlError::unsupported(format!("the set operation {other}")))
                    }
                };
                let all = match set_quantifier {
                    ast::SetQuantifier::All => true,
                    ast::SetQuantifier::None | ast::SetQuantifier::Distinct => false,
                    other => return Err(SqlError::unsupported(format!("{op} {other}"))),
                };
                let (left, left_columns) = self.bind_set_expr(left)?;
                let (right, right_columns) = self.bind_set_expr(right)?;
                if left_columns.len() != right_columns.len() {
                    return Err(SqlError::syntax(format!(
                        "each {op} query must have the same number of columns"
                    )));
                }
                let mut columns = left_columns.clone();
                for (column, other) in columns.iter_mut().zip(&right_columns) {
                    column.data_type = union_type(*op, column.data_type, other.data_type)?;
                }
                let left = cast_to(left, &left_columns, &columns);
                let right = cast_to(right, &right_columns, &columns);
                let (left, right) = (Box::new(left), Box::new(right));
                let relation = match operator {
                    None => Relation::Union { left, right, all },
                    Some(operator) => Relation::SetOperation {
                        left,
                        right,
                        operator,
                        all,
                    },
                };
                Ok((relation, columns))
            }
            other => Err(SqlError::unsupported(format!("the query {other}"))),
        }
    }

    fn bind_values(&mut self, values: &ast::Values) -> SqlResult<(Relation, Vec<OutputColumn>)> {
        let mut rows = Vec::with_capacity(values.rows.len());
        let mut types: Vec<DataType> = Vec::new();
        for row in &values.rows {
            let row = &row.content;
            if !rows.is_empty() && row.len() != types.len() {
                return Err(SqlError::syntax("VALUES lists must all be the same length"));
            }
            let mut bound = Vec::with_capacity(row.len());
            for (index, expr) in row.iter().enumerate() {
                let expected = types.get(index).copied();
                let (expr, data_type) = self.bind_expr(expr, expected)?;
                if index >= types.len() {
                    types.push(data_type);
                } else if types[index] == DataType::Unknown {
                    types[index] = data_type;
                }
                bound.push(expr);
            }
            rows.push(bound);
        }
        let columns = types
            .iter()
            .enumerate()
            .map(|(index, data_type)| OutputColumn {
                name: format!("column{}", index + 1),
                data_type: output_type(*data_type),
            })
            .collect();
        Ok((Relation::Values(rows), columns))
    }

    fn bind_select(
        &mut self,
        select: &ast::Select,
        query: Option<&ast::Query>,
        locks: &[ast::LockClause],
    ) -> SqlResult<QueryPlan> {
        let saved_scope = self.scope.take();
        let saved_grouping = self.grouping.take();
        let saved_windows = self.windows.take();
        let saved_set_calls = self.set_calls.take();
        let result = self.bind_select_in_scope(select, query, locks);
        self.scope = saved_scope;
        self.grouping = saved_grouping;
        self.windows = saved_windows;
        self.set_calls = saved_set_calls;
        result
    }

    fn bind_select_in_scope(
        &mut self,
        select: &ast::Select,
        query: Option<&ast::Query>,
        locks: &[ast::LockClause],
    ) -> SqlResult<QueryPlan> {
        let outer_locked_derived = std::mem::replace(&mut self.locked_derived, false);
        let root = self.bind_from_where(&select.from, select.selection.as_ref(), locks);
        let locked_derived = std::mem::replace(&mut self.locked_derived, outer_locked_derived);
        let mut root = root?;
        check_locked_names(locks, self.scope.as_ref())?;
        // A lock passed into a derived table or view is taken by its query's reads, before
        // anything outside it: with a WHERE, a join, an ORDER BY or a LIMIT outside, it
        // would lock rows the statement does not return (PostgreSQL locks those returned).
        let outside = select.selection.is_some()
            || select.from.len() > 1
            || select.from.iter().any(|item| !item.joins.is_empty())
            || query.is_some_and(|q| {
                q.order_by.is_some() || q.limit_clause.is_some() || q.fetch.is_some()
            });
        if locked_derived && outside {
            return Err(SqlError::unsupported(
                "FOR UPDATE of a derived table or view with a WHERE, join, ORDER BY or LIMIT \
                 outside it (lock its tables in the subquery, or name the tables with OF)",
            ));
        }
        let single_table = matches!(root, Relation::Table { .. });
        if select.from.is_empty() {
            self.scope = None;
        }
        let group_by = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs
                .iter()
                .map(|expr| group_by_position(expr, &select.projection))
                .collect::<SqlResult<Vec<_>>>()?,
            _ => return Err(SqlError::unsupported("GROUP BY ALL or with modifiers")),
        };
        let group_by = &group_by;
        let aggregated = !group_by.is_empty()
            || select.having.is_some()
            || select.projection.iter().any(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    contains_aggregate(e)
                }
                _ => false,
            });
        let (distinct, distinct_on) = match &select.distinct {
            None | Some(ast::Distinct::All) => (false, None),
            Some(ast::Distinct::Distinct) => (true, None),
            Some(ast::Distinct::On(exprs)) => (false, Some(exprs)),
        };
        if !locks.is_empty() && (aggregated || distinct || distinct_on.is_some()) {
            return Err(SqlError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "FOR UPDATE is not allowed with GROUP BY, aggregate functions or DISTINCT",
            ));
        }
        let mut aggregation_groups = Vec::new();
        if aggregated {
            let mut group_types = Vec::new();
            for expr in group_by {
                let (bound, data_type) = self.bind_expr(expr, None)?;
                aggregation_groups.push(bound);
                group_types.push(data_type);
            }
            let mut group_exprs = group_by.clone();
            let columns = self.functional_dependencies(
                &mut aggregation_groups,
                &mut group_types,
                &mut group_exprs,
            );
            self.grouping = Some(Grouping {
                group_by: group_exprs,
                group_types,
                aggregates: Vec::new(),
                columns,
            });
        }
        // Window calls are allowed in the SELECT list and ORDER BY only.
        self.windows = Some(Vec::new());
        self.set_calls = Some(Vec::new());
        let projected = self.bind_projection(&select.projection);
        let set_calls = self.set_calls.take().unwrap_or_default();
        let (mut projection, columns) = projected?;
        let windows = self.windows.take().unwrap_or_default();
        let having = select
            .having
            .as_ref()
            .map(|expr| self.bind_typed(expr, DataType::Bool))
            .transpose()?;
        self.windows = Some(windows);
        let mut order_by = match query {
            Some(query) => self.bind_order_by(query, &projection, &columns)?,
            None => Vec::new(),
        };
        let windows = self.windows.take().unwrap_or_default();
        let distinct_on = distinct_on
            .map(|exprs| {
                exprs
                    .iter()
                    .map(|e| self.bind_expr(e, None).map(|(e, _)| e))
                    .collect::<SqlResult<Vec<_>>>()
            })
            .transpose()?;
        let aggregation = self.grouping.take().map(|grouping| Aggregation {
            group_by: aggregation_groups,
            aggregates: grouping.aggregates,
        });
        let (limit, offset) = match query {
            Some(query) => self.bind_limit(query)?,
            None => (None, None),
        };
        // Rows of a single table read in key order, forward or backward, or through an
        // index in its order, need no sort (a LIMIT then stops the scan early, and FOR UPDATE
        // locks only the rows it returns).
        let order = match (&root, &aggregation) {
            (Relation::Table { read, .. }, None) if single_table => {
                match read_in_order(read, &order_by) {
                    Some(descending) => Some((descending, None)),
                    None => access::ordered_index(
                        &read.table,
                        read.filter.as_ref(),
                        &read.index_terms,
                        &read.access,
                        &order_by,
                        limit.is_some(),
                    )
                    .map(|(path, descending)| (descending, Some(path))),
                }
            }
            _ => order_by.is_empty().then_some((false, None)),
        };
        let ordered_by_key = order.is_some() && (windows.is_empty() || order_by.is_empty());
        if let (true, Some((descending, path)), Relation::Table { read, .. }) =
            (ordered_by_key, order, &mut root)
        {
            read.descending = descending;
            if let Some(path) = path {
                read.access = path;
                read.index_order = true;
            }
        }
        // A single table's rows are decoded only as far as the query reads them.
        if let Relation::Table { read, lock: None } = &mut root {
            if windows.is_empty() && set_calls.is_empty() {
                read.columns = needed_columns(
                    read.table.def.columns.len(),
                    aggregation.as_ref(),
                    &projection,
                    &order_by,
                    distinct_on.as_deref(),
                );
            }
        }
        if let Some(aggregation) = aggregation {
            root = Relation::Aggregate {
                input: Box::new(root),
                aggregation,
            };
        }
        if let Some(predicate) = having {
            root = Relation::Filter {
                input: Box::new(root),
                predicate,
            };
        }
        if !windows.is_empty() {
            let base = root.width();
            for expr in projection
                .iter_mut()
                .chain(order_by.iter_mut().map(|key| &mut key.expr))
            {
                super::window::place_windows(expr, base);
            }
            root = Relation::Window {
                input: Box::new(root),
                calls: windows,
            };
        }
        if !set_calls.is_empty() {
            let base = root.width();
            for expr in projection
                .iter_mut()
                .chain(order_by.iter_mut().map(|key| &mut key.expr))
            {
                super::window::place_set_calls(expr, base);
            }
            root = Relation::ProjectSet {
                input: Box::new(root),
                calls: set_calls,
            };
        }
        // A locking read of one table that must be sorted, or whose rows a filter above the
        // read (a correlated subquery's) may still drop, locks each row as it leaves the sort
        // or the filter (the table's own read does not lock), so that a LIMIT locks only the
        // rows it returns and SKIP LOCKED skips to the next row in the sort's order.
        let filtered = matches!(root, Relation::Filter { .. });
        let lock_after_sort = match (!ordered_by_key || filtered)
            .then(|| filtered_table(&mut root))
            .flatten()
        {
            Some(Relation::Table { read, lock }) if !read.table.def.primary_key.is_empty() => {
                lock.take().map(|lock| (read.clone(), lock))
            }
            _ => None,
        };
        if !ordered_by_key {
            root = Relation::Sort {
                input: Box::new(root),
                keys: order_by,
            };
        }
        if let Some((read, lock)) = lock_after_sort {
            root = Relation::LockRows {
                input: Box::new(root),
                read,
                lock,
            };
        }
        if let Some(on) = distinct_on {
            root = Relation::Distinct {
                input: Box::new(root),
                on: Some(on),
            };
        }
        root = Relation::Project {
            input: Box::new(root),
            exprs: projection,
        };
        if distinct {
            root = Relation::Distinct {
                input: Box::new(root),
                on: None,
            };
        }
        if limit.is_some() || offset.is_some() {
            root = Relation::Limit {
                input: Box::new(root),
                limit,
                offset,
            };
        }
        Ok(QueryPlan {
            locks: !locks.is_empty() || root.locks() || self.saw_locks,
            root,
            columns,
        })
    }

    pub(super) fn bind_projection(
        &mut self,
        items: &[SelectItem],
    ) -> SqlResult<(Vec<Expr>, Vec<OutputColumn>)> {
        let mut projection = Vec::new();
        let mut columns = Vec::new();
        for item in items {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    let qualifier: Option<Vec<String>> = match item {
                        SelectItem::QualifiedWildcard(
                            ast::SelectItemQualifiedWildcardKind::ObjectName(name),
                            _,
                        ) => Some(
                            name.0
                                .iter()
                                .filter_map(|part| part.as_ident().map(ident_name))
                                .collect(),
                        ),
                        SelectItem::QualifiedWildcard(..) => {
                            return Err(SqlError::unsupported("this wildcard"))
                        }
                        _ => None,
                    };
                    let scope = self
                        .scope
                        .clone()
                        .ok_or_else(|| SqlError::syntax("SELECT * with no tables specified"))?;
                    if self.grouping.is_some() {
                        return Err(SqlError::new(
                            sqlstate::GROUPING_ERROR,
                            "SELECT * is not allowed with GROUP BY or aggregates",
                        ));
                    }
                    if let Some(qualifier) = &qualifier {
                        if !scope.has_qualifier(qualifier) {
                            return Err(SqlError::new(
                                sqlstate::UNDEFINED_TABLE,
                                format!(
                                    "missing FROM-clause entry for table \"{}\"",
                                    qualifier.join(".")
                                ),
                            ));
                        }
                    }
                    for (index, name, data_type) in scope.expand(qualifier.as_deref()) {
                        projection.push(Expr::Column(index));
                        columns.push(OutputColumn { name, data_type });
                    }
                }
                SelectItem::UnnamedExpr(expr) => {
                    let (bound, data_type) = self.bind_expr(expr, None)?;
                    projection.push(bound);
                    columns.push(OutputColumn {
                        name: output_name(expr),
                        data_type: output_type(data_type),
                    });
                }
                SelectItem::ExprWithAlias { expr, alias } => {
                    let (bound, data_type) = self.bind_expr(expr, None)?;
                    projection.push(bound);
                    columns.push(OutputColumn {
                        name: ident_name(alias),
                        data_type: output_type(data_type),
                    });
                }
                SelectItem::ExprWithAliases { .. } => {
                    return Err(SqlError::unsupported("several aliases for one expression"))
                }
            }
        }
        Ok((projection, columns))
    }

    pub(super) fn bind_order_by(
        &mut self,
        query: &ast::Query,
        projection: &[Expr],
        columns: &[OutputColumn],
    ) -> SqlResult<Vec<SortKey>> {
        let Some(order_by) = &query.order_by else {
            return Ok(Vec::new());
        };
        let ast::OrderByKind::Expressions(exprs) = &order_by.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        let mut keys = Vec::with_capacity(exprs.len());
        let output = |position: usize| (projection[position].clone(), columns[position].data_type);
        for order in exprs {
            let (expr, data_type) = match &order.expr {
                ast::Expr::Value(value) => match &value.value {
                    ast::Value::Number(number, _) => {
                        let position: usize = number.parse().unwrap_or(0);
                        let position = position
                            .checked_sub(1)
                            .filter(|p| *p < projection.len())
                            .ok_or_else(|| {
                                SqlError::new(
                                    sqlstate::UNDEFINED_COLUMN,
                                    format!("ORDER BY position {number} is not in select list"),
                                )
                            })?;
                        output(position)
                    }
                    _ => self.bind_expr(&order.expr, None)?,
                },
                // A bare name is an output column's first (an alias, or the name a column
                // or expression gets: `x::text` is `x`), else an input column, as in
                // PostgreSQL.
                ast::Expr::Identifier(ident) => {
                    let name = ident_name(ident);
                    let mut named = (0..columns.len()).filter(|&p| columns[p].name == name);
                    match named.next() {
                        Some(first) => {
                            if named.any(|other| projection[other] != projection[first]) {
                                return Err(SqlError::new(
                                    sqlstate::AMBIGUOUS_COLUMN,
                                    format!("ORDER BY \"{name}\" is ambiguous"),
                                ));
                            }
                            output(first)
                        }
                        None => self.bind_expr(&order.expr, None)?,
                    }
                }
                other => self.bind_expr(other, None)?,
            };
            let expr = self.order_key(expr, data_type)?;
            let descending = matches!(order.options.sort, Some(ast::OrderBySort::Desc));
            keys.push(SortKey {
                expr,
                descending,
                // PostgreSQL: NULLs are larger than every value.
                nulls_first: order.options.nulls_first.unwrap_or(descending),
            });
        }
        Ok(keys)
    }

    pub(super) fn bind_limit(
        &mut self,
        query: &ast::Query,
    ) -> SqlResult<(Option<Expr>, Option<Expr>)> {
        let saved = self.scope.take();
        let grouping = self.grouping.take();
        let result = match &query.limit_clause {
            None => Ok((None, None)),
            Some(ast::LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            }) => {
                if !limit_by.is_empty() {
                    return Err(SqlError::unsupported("LIMIT BY"));
                }
                let limit = limit
                    .as_ref()
                    .map(|e| self.bind_typed(e, DataType::Int8))
                    .transpose()?;
                let offset = offset
                    .as_ref()
                    .map(|o| self.bind_typed(&o.value, DataType::Int8))
                    .transpose()?;
                Ok((limit, offset))
            }
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => Ok((
                Some(self.bind_typed(limit, DataType::Int8)?),
                Some(self.bind_typed(offset, DataType::Int8)?),
            )),
        };
        self.scope = saved;
        self.grouping = grouping;
        result
    }
}

/// A GROUP BY item: `GROUP BY 2` stands for the second select item's expression.
impl Binder<'_> {
    /// The grouped plain columns (row position, key index). When a FROM table's whole
    /// primary key is grouped, its other columns become group keys too (appended, with AST
    /// placeholders no query text can equal): they are functionally dependent on the key,
    /// so grouping by them changes no group, and PostgreSQL lets a query read them.
    fn functional_dependencies(
        &self,
        groups: &mut Vec<Expr>,
        types: &mut Vec<DataType>,
        exprs: &mut Vec<ast::Expr>,
    ) -> Vec<(usize, usize)> {
        let mut columns: Vec<(usize, usize)> = groups
            .iter()
            .enumerate()
            .filter_map(|(key, expr)| match expr {
                Expr::Column(position) => Some((*position, key)),
                _ => None,
            })
            .collect();
        let Some(scope) = &self.scope else {
            return columns;
        };
        for entry in &scope.entries {
            let grouped = |column: &usize| {
                columns
                    .iter()
                    .any(|(position, _)| *position == entry.offset + column)
            };
            if entry.primary_key.is_empty() || !entry.primary_key.iter().all(grouped) {
                continue;
            }
            for (column, (_, data_type)) in entry.columns.iter().enumerate() {
                let position = entry.offset + column;
                if columns.iter().any(|(p, _)| *p == position) {
                    continue;
                }
                columns.push((position, groups.len()));
                groups.push(Expr::Column(position));
                types.push(*data_type);
                exprs.push(ast::Expr::Identifier(ast::Ident::new(format!(
                    "functionally dependent column {position}"
                ))));
            }
        }
        columns
    }
}

fn group_by_position(expr: &ast::Expr, items: &[SelectItem]) -> SqlResult<ast::Expr> {
    let ast::Expr::Value(value) = expr else {
        return Ok(expr.clone());
    };
    let ast::Value::Number(number, _) = &value.value else {
        return Ok(expr.clone());
    };
    let position: usize = number.parse().unwrap_or(0);
    match position.checked_sub(1).and_then(|index| items.get(index)) {
        Some(SelectItem::UnnamedExpr(item) | SelectItem::ExprWithAlias { expr: item, .. }) => {
            Ok(item.clone())
        }
        _ => Err(SqlError::new(
            sqlstate::UNDEFINED_COLUMN,
            format!("GROUP BY position {number} is not in select list"),
        )),
    }
}

/// The column name PostgreSQL gives an unnamed select item.
pub(super) fn output_name(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Identifier(ident) => ident_name(ident),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident_name).unwrap_or_default(),
        ast::Expr::Function(function) => function_name(function),
        ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => output_name(expr),
        _ => "?column?".into(),
    }
}

/// Result columns never have an unknown type: PostgreSQL reports `text`.
pub(super) fn output_type(data_type: DataType) -> DataType {
    match data_type {
        DataType::Unknown => DataType::Text,
        other => other,
    }
}

/// The type of a UNION column from the types of its two sides: their common type, as CASE
/// and COALESCE find it (integer with numeric is numeric, integer[] with bigint[] bigint[]).
fn union_type(op: ast::SetOperator, left: DataType, right: DataType) -> SqlResult<DataType> {
    if left == right {
        return Ok(left);
    }
    let common = super::functions::common_type(&[left, right]).map_err(|_| {
        SqlError::mismatch(format!("{op} types {left} and {right} cannot be matched"))
    })?;
    Ok(output_type(common))
}

/// Casts a side of a UNION to the result's column types where they differ.
fn cast_to(relation: Relation, from: &[OutputColumn], to: &[OutputColumn]) -> Relation {
    if from.iter().zip(to).all(|(f, t)| f.data_type == t.data_type) {
        return relation;
    }
    let exprs = from
        .iter()
        .zip(to)
        .enumerate()
        .map(|(index, (f, t))| {
            if f.data_type == t.data_type {
                Expr::Column(index)
            } else {
                Expr::Cast {
                    expr: Box::new(Expr::Column(index)),
                    to: t.data_type,
                }
            }
        })
        .collect();
    Relation::Project {
        input: Box::new(relation),
        exprs,
    }
}

/// Whether a table read returns its rows in `order_by`'s order: Some(false) read forward,
/// Some(true) read backward, None if it needs a sort. Every access path reads in primary
/// key order, and the key columns its equal prefix fixes (a range scan's prefix, all of them
/// for a point lookup) may be skipped or named anywhere: `WHERE no_w_id = ? AND no_d_id = ?
/// ORDER BY no_o_id` on the key (no_w_id, no_d_id, no_o_id). The other key columns must come
/// in key order, all ascending, or all descending for a full or range scan (`ORDER BY id DESC
/// LIMIT 10` reads the last ten rows backward). Key columns are never NULL, so NULLS FIRST
/// or LAST does not matter.
fn read_in_order(read: &TableRead, order_by: &[SortKey]) -> Option<bool> {
    let key = &read.table.def.primary_key;
    let fixed = match &read.access {
        Access::Point(_) => key.len(),
        Access::Range { prefix, .. } => prefix.len(),
        _ => 0,
    };
    let may_reverse = matches!(read.access, Access::Full | Access::Range { .. });
    let mut next = fixed;
    let mut descending = None;
    for sort in order_by {
        let Expr::Column(column) = sort.expr else {
            return None;
        };
        if key[..fixed].contains(&column) {
            continue;
        }
        if key.get(next) != Some(&column) {
            return None;
        }
        match descending {
            None if sort.descending && !may_reverse => return None,
            None => descending = Some(sort.descending),
            Some(direction) if direction != sort.descending => return None,
            Some(_) => {}
        }
        next += 1;
    }
    Some(descending.unwrap_or(false))
}

/// The columns of a single table's rows a query reads above its scan (its WHERE is the
/// scan's own): the aggregation's inputs when it aggregates, else its projection, ORDER BY
/// and DISTINCT ON. None when that is every column, or when an expression's columns cannot
/// be told (a correlated subquery).
fn needed_columns(
    width: usize,
    aggregation: Option<&crate::plan::Aggregation>,
    projection: &[Expr],
    order_by: &[SortKey],
    distinct_on: Option<&[Expr]>,
) -> Option<Vec<bool>> {
    let mut exprs: Vec<&Expr> = Vec::new();
    match aggregation {
        Some(aggregation) => {
            exprs.extend(&aggregation.group_by);
            for call in &aggregation.aggregates {
                exprs.extend(&call.arg);
                exprs.extend(&call.filter);
                // min/max's one key is of its input value (column 0 of that), not of the row.
                if !matches!(
                    call.function,
                    crate::plan::AggregateFunction::Min | crate::plan::AggregateFunction::Max
                ) {
                    exprs.extend(call.order_by.iter().map(|key| &key.expr));
                }
            }
        }
        None => {
            exprs.extend(projection);
            exprs.extend(order_by.iter().map(|key| &key.expr));
            exprs.extend(distinct_on.into_iter().flatten());
        }
    }
    let mut columns = Vec::new();
    if !exprs.iter().all(|expr| expr.columns_read(&mut columns)) {
        return None;
    }
    let mut wanted = vec![false; width];
    for column in columns {
        *wanted.get_mut(column)? = true;
    }
    (!wanted.iter().all(|wanted| *wanted)).then_some(wanted)
}

/// The table read under a chain of filters (or the relation itself when it is one).
fn filtered_table(relation: &mut Relation) -> Option<&mut Relation> {
    match relation {
        Relation::Table { .. } => Some(relation),
        Relation::Filter { input, .. } => filtered_table(input),
        _ => None,
    }
}
