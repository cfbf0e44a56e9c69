//! Binding FROM and planning joins.
//!
//! 1. Each FROM item (table, system table, derived table, generate_series) becomes a leaf
//!    relation and a scope entry; the items are joined left-deep in the order written, so the
//!    columns of items 0..=k are a prefix of the full row and an expression bound against the
//!    whole FROM list can be evaluated on the row of any prefix.
//! 2. WHERE and ON are split into conjuncts. A conjunct is placed as low as it can go: into
//!    the leaf when it reads one item only (a user table then picks its access path from it),
//!    else into the first join that has all its columns (never below the nullable side of a
//!    LEFT JOIN for WHERE). Conjuncts with correlated subqueries stay on top.
//! 3. Each join picks its algorithm from its conditions: an index nested loop when the right
//!    item is a user table whose whole primary key equals expressions of the left row (one
//!    point lookup per left row, never a scan), a merge join when both sides are key-ordered
//!    scans equal on a prefix of both primary keys, a hash join when some equality compares a
//!    left expression with a right one, else a nested loop.

use std::sync::Arc;

use sqlparser::ast::{self, TableFactor};

use super::scope::{Scope, ScopeEntry};
use super::{ident_name, Binder};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access::{self, Access};
use crate::plan::expr::{BinaryOp, Expr, SubqueryKind};
use crate::plan::{JoinKind, LockWait, QueryPlan, Relation, RowLock, TableRead};
use crate::system::PUBLIC_SCHEMA;
use crate::types::DataType;

/// How a FROM item joins the items before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ItemJoin {
    Inner,
    Left,
    /// Planned as a LEFT join with the sides swapped, then the columns put back in order.
    Right,
    Full,
}

/// One item of the FROM list, bound.
struct FromItem {
    relation: Relation,
    kind: ItemJoin,
    /// LATERAL: `relation` reads the row of the items before it (as its outer row).
    lateral: bool,
    /// Conjuncts of its ON / USING (over the row up to and including this item).
    on: Vec<Expr>,
    start: usize,
    end: usize,
}

/// SQL text of one query (a view's, or one the binder writes for a relation in FROM).
fn parsed_query(sql: &str) -> SqlResult<Box<ast::Query>> {
    let mut statements = crate::session::parse(sql)?;
    match (statements.pop(), statements.is_empty()) {
        (Some(ast::Statement::Query(query)), true) => Ok(query),
        _ => Err(SqlError::syntax(format!("not one query: {sql}"))),
    }
}

/// `(a JOIN b ON ...) JOIN c ...` as `a JOIN b ON ... JOIN c ...` (joins associate to the
/// left, so the parentheses around a leading join without an alias change nothing; PostgreSQL
/// writes them in view definitions).
fn flatten_leading_join(table: &ast::TableWithJoins) -> ast::TableWithJoins {
    match &table.relation {
        TableFactor::NestedJoin {
            table_with_joins,
            alias: None,
        } => {
            let mut inner = flatten_leading_join(table_with_joins);
            inner.joins.extend(table.joins.iter().cloned());
            inner
        }
        _ => table.clone(),
    }
}

impl Binder<'_> {
    /// Binds FROM and WHERE into a join tree; leaves the FROM list as the scope.
    pub(super) fn bind_from_where(
        &mut self,
        from: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
        locks: &[ast::LockClause],
    ) -> SqlResult<Relation> {
        let mut scope = Scope::default();
        let mut items = Vec::new();
        let nested = |table: &ast::TableWithJoins| {
            matches!(table.relation, TableFactor::NestedJoin { alias: None, .. })
        };
        let flattened: Vec<ast::TableWithJoins>;
        let from = if from.iter().any(nested) {
            flattened = from.iter().map(flatten_leading_join).collect();
            &flattened
        } else {
            from
        };
        for table in from {
            // As PostgreSQL: a locked table, derived table or view may not be on the nullable
            // side of an outer join of its chain.
            let mut chain_locked = self.locked_item(&table.relation, locks);
            self.bind_from_item(
                &table.relation,
                ItemJoin::Inner,
                None,
                locks,
                &mut scope,
                &mut items,
            )?;
            for join in &table.joins {
                use ast::JoinOperator as J;
                let (kind, constraint) = match &join.join_operator {
                    J::Join(c) | J::Inner(c) => (ItemJoin::Inner, Some(c)),
                    J::Left(c) | J::LeftOuter(c) => (ItemJoin::Left, Some(c)),
                    J::Right(c) | J::RightOuter(c) => (ItemJoin::Right, Some(c)),
                    J::FullOuter(c) => (ItemJoin::Full, Some(c)),
                    J::CrossJoin(_) => (ItemJoin::Inner, None),
                    other => {
                        return Err(SqlError::unsupported(
                            format!("the join {other:?}")
                                .split('(')
                                .next()
                                .unwrap_or("join")
                                .to_string(),
                        ))
                    }
                };
                let item_locked = self.locked_item(&join.relation, locks);
                let nullable_locked = match kind {
                    ItemJoin::Left => item_locked,
                    ItemJoin::Right => chain_locked,
                    ItemJoin::Full => item_locked || chain_locked,
                    ItemJoin::Inner => false,
                };
                if nullable_locked {
                    return Err(SqlError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!(
                            "{} cannot be applied to the nullable side of an outer join",
                            lock_words(locks)
                        ),
                    ));
                }
                chain_locked |= item_locked;
                self.bind_from_item(
                    &join.relation,
                    kind,
                    constraint,
                    locks,
                    &mut scope,
                    &mut items,
                )?;
            }
        }
        self.scope = Some(scope);
        let mut pool = Vec::new();
        if let Some(selection) = selection {
            let filter = self.bind_typed(selection, DataType::Bool)?;
            split(filter, &mut pool);
        }
        plan_joins(items, pool)
    }

    fn bind_from_item(
        &mut self,
        factor: &TableFactor,
        kind: ItemJoin,
        constraint: Option<&ast::JoinConstraint>,
        locks: &[ast::LockClause],
        scope: &mut Scope,
        items: &mut Vec<FromItem>,
    ) -> SqlResult<()> {
        self.derived_correlated = false;
        let (relation, entry) = self.bind_factor(factor, locks, scope)?;
        let start = scope.width();
        let left_width = start;
        let mut on = Vec::new();
        let using: Vec<String> = match constraint {
            Some(ast::JoinConstraint::Using(names)) => names
                .iter()
                .map(|name| {
                    name.0
                        .last()
                        .and_then(|part| part.as_ident())
                        .map(ident_name)
                        .unwrap_or_default()
                })
                .collect(),
            Some(ast::JoinConstraint::Natural) => entry
                .columns
                .iter()
                .map(|(name, _)| name.clone())
                .filter(|name| matches!(scope.resolve(None, name), Ok(Some(_))))
                .collect(),
            _ => Vec::new(),
        };
        if !using.is_empty() && matches!(kind, ItemJoin::Right | ItemJoin::Full) {
            return Err(SqlError::unsupported(
                "USING or NATURAL with RIGHT or FULL JOIN (join ON the columns instead)",
            ));
        }
        let mut entry = entry;
        for name in &using {
            let left = scope.resolve(None, name)?.ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!(
                        "column \"{name}\" specified in USING clause does not exist in left table"
                    ),
                )
            })?;
            let right = entry.columns.iter().position(|(c, _)| c == name).ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{name}\" specified in USING clause does not exist in right table"),
                )
            })?;
            entry.hidden[right] = true;
            on.push(Expr::Binary {
                op: BinaryOp::Equal,
                left: Box::new(Expr::Column(left.0)),
                right: Box::new(Expr::Column(left_width + right)),
                data_type: DataType::Bool,
            });
        }
        scope.push(entry);
        let end = scope.width();
        if let Some(ast::JoinConstraint::On(condition)) = constraint {
            let saved = self.scope.replace(scope.clone());
            let bound = self.bind_typed(condition, DataType::Bool);
            self.scope = saved;
            split(bound?, &mut on);
        }
        // A set function in FROM that reads the items before it is implicitly LATERAL, as in
        // PostgreSQL (`FROM pg_index i, unnest(i.indkey)`); one that does not stays a plain
        // item (`t RIGHT JOIN unnest(ARRAY[1, 2]) u ON ...`).
        let lateral = matches!(factor, TableFactor::Derived { lateral: true, .. })
            || (start > 0 && reads_earlier_items(factor) && self.derived_correlated);
        if lateral && matches!(kind, ItemJoin::Right | ItemJoin::Full) {
            return Err(SqlError::new(
                sqlstate::INVALID_COLUMN_REFERENCE,
                "the combining JOIN type must be INNER or LEFT for a LATERAL reference",
            ));
        }
        items.push(FromItem {
            relation,
            kind,
            lateral,
            on,
            start,
            end,
        });
        Ok(())
    }

    /// A FROM item: its relation and its scope entry (offset not yet set).
    fn bind_factor(
        &mut self,
        factor: &TableFactor,
        locks: &[ast::LockClause],
        scope: &Scope,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        match factor {
            TableFactor::Table {
                name,
                alias,
                args,
                with_ordinality,
                ..
            } => {
                if let Some(args) = args {
                    let bound = self.bind_array_function(
                        name,
                        &args.args,
                        alias.as_ref(),
                        *with_ordinality,
                        scope,
                    );
                    if let Some(bound) = bound {
                        return bound;
                    }
                    return self.bind_table_function(name, &args.args, alias.as_ref());
                }
                if let Some(bound) = self.bind_cte_reference(name, alias.as_ref()) {
                    return bound;
                }
                let lock =
                    (item_name(name, alias.as_ref())).and_then(|item| row_lock(locks, &item));
                let bound = self.bind_named_relation(name, lock);
                self.inherited_lock = None;
                let (relation, mut entry) = bound?;
                entry.alias(alias.as_ref())?;
                if let Some(qualifier) = &entry.qualifier {
                    let duplicate = scope.entries.iter().any(|e| {
                        e.qualifier.as_deref() == Some(qualifier) && e.schema == entry.schema
                    });
                    if duplicate {
                        return Err(SqlError::new(
                            "42712",
                            format!("table name \"{qualifier}\" specified more than once"),
                        ));
                    }
                }
                Ok((relation, entry))
            }
            TableFactor::Function {
                name,
                args,
                alias,
                with_ordinality: false,
                ..
            } => match self.bind_array_function(name, args, alias.as_ref(), false, scope) {
                Some(bound) => bound,
                None => self.bind_table_function(name, args, alias.as_ref()),
            },
            TableFactor::Derived {
                lateral: true,
                subquery,
                alias,
                ..
            } => {
                self.inherit_lock(locks, subquery, alias.as_ref());
                let bound = self.bind_derived(subquery, alias.as_ref(), Some(scope));
                self.inherited_lock = None;
                bound
            }
            TableFactor::Derived {
                lateral: false,
                subquery,
                alias,
                ..
            } => {
                self.inherit_lock(locks, subquery, alias.as_ref());
                let bound = self.bind_derived(subquery, alias.as_ref(), None);
                self.inherited_lock = None;
                bound
            }
            TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_ordinality: false,
                ..
            } if array_exprs.len() == 1 => {
                let args = vec![array_exprs[0].to_string()];
                self.bind_set_function_in_from("unnest", &args, alias.as_ref(), scope)
            }
            // unnest(a, b, ...) [WITH ORDINALITY]: the arrays side by side (the shorter
            // padded with NULLs), then the position (arrays here start at 1), as the derived
            // table `(SELECT unnest(a), unnest(b), generate_series(1, greatest(cardinality(a),
            // cardinality(b))))`.
            TableFactor::UNNEST {
                alias,
                array_exprs,
                with_offset: false,
                with_ordinality,
                ..
            } if !array_exprs.is_empty() => {
                let mut items: Vec<String> = array_exprs
                    .iter()
                    .map(|array| format!("unnest({array})"))
                    .collect();
                if *with_ordinality {
                    let lengths: Vec<String> = array_exprs
                        .iter()
                        .map(|array| format!("cardinality({array})"))
                        .collect();
                    items.push(format!(
                        "generate_series(1, greatest({}))",
                        lengths.join(", ")
                    ));
                }
                let sql = format!("SELECT {}", items.join(", "));
                self.bind_sql_in_from(&sql, "unnest", alias.as_ref(), scope)
            }
            other => Err(SqlError::unsupported(format!("FROM {other}"))),
        }
    }

    /// `(query) AS alias` in FROM. A derived table is not a new query level: it runs inside
    /// this one's evaluation context. `LATERAL (query)` (`lateral` holds the FROM items before
    /// it) is bound one query level down, with those items as the enclosing level, so its
    /// references to them are `Expr::Outer` reads of the left row the lateral join pushes for
    /// each run.
    fn bind_derived(
        &mut self,
        subquery: &ast::Query,
        alias: Option<&ast::TableAlias>,
        lateral: Option<&Scope>,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let Some(alias) = alias else {
            return Err(SqlError::syntax("subquery in FROM must have an alias"));
        };
        let saved_scope = self.scope.take();
        let saved_grouping = self.grouping.take();
        // LATERAL first in FROM has nothing to read: an ordinary derived table.
        let level = lateral.filter(|scope| !scope.entries.is_empty());
        if let Some(scope) = level {
            self.outer.push(super::OuterLevel {
                scope: Some(scope.clone()),
                grouped: false,
            });
            self.correlated.push(false);
        }
        let plan = self.bind_query(subquery);
        if level.is_some() {
            self.derived_correlated = self.correlated.pop().unwrap_or(false);
            self.outer.pop();
        }
        self.scope = saved_scope;
        self.grouping = saved_grouping;
        let plan = plan?;
        let mut entry = ScopeEntry::new(
            None,
            None,
            plan.columns
                .iter()
                .map(|c| (c.name.clone(), c.data_type))
                .collect(),
        );
        entry.alias(Some(alias))?;
        Ok((plan.root, entry))
    }

    /// Notes a relation the query names, while a view's query is bound (`relations_read`).
    fn note_read(&mut self, name: &str) {
        if let Some(read) = &mut self.relations_read {
            read.push(name.to_string());
        }
    }

    /// A view in FROM: its query bound as a derived table named after the view. It sees none
    /// of the statement's WITH queries.
    fn bind_view(&mut self, view: &crate::catalog::View) -> SqlResult<(Relation, ScopeEntry)> {
        let name = &view.def.name;
        if self.views.contains(name) {
            return Err(SqlError::new(
                "42P17",
                format!("infinite recursion detected in rules for relation \"{name}\""),
            ));
        }
        let query = parsed_query(&view.def.query).map_err(|_| {
            SqlError::new(
                sqlstate::DATA_CORRUPTED,
                format!("the query of view \"{name}\" is not a query"),
            )
        })?;
        let alias = ast::TableAlias {
            explicit: true,
            name: ast::Ident::with_quote('"', name.clone()),
            columns: view
                .def
                .columns
                .iter()
                .map(|(column, _)| ast::TableAliasColumnDef {
                    name: ast::Ident::with_quote('"', column.clone()),
                    data_type: None,
                })
                .collect(),
            at: None,
        };
        self.views.push(name.clone());
        let bound = self.bind_apart(&query, &alias);
        self.views.pop();
        bound
    }

    /// A query the binder wrote or stored (a view's, a sequence's row) as a derived table
    /// named `alias`, blind to the statement's WITH queries.
    fn bind_apart(
        &mut self,
        query: &ast::Query,
        alias: &ast::TableAlias,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let ctes = std::mem::take(&mut self.ctes);
        let bound = self.bind_derived(query, Some(alias), None);
        self.ctes = ctes;
        bound
    }

    /// A sequence in FROM (`SELECT last_value, is_called FROM s`, as pg_dump reads it): its
    /// one row, from pg_sequence_last_value.
    fn bind_sequence_relation(
        &mut self,
        sequence: &crate::catalog::Sequence,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let name = format!(
            "'\"{}\"'",
            sequence.name.replace('"', "\"\"").replace('\'', "''")
        );
        let sql = format!(
            "SELECT hayate_sequence_shown_value({name}) AS last_value, \
             0::int8 AS log_cnt, pg_sequence_last_value({name}) IS NOT NULL AS is_called",
        );
        let alias = ast::TableAlias {
            explicit: true,
            name: ast::Ident::with_quote('"', sequence.name.clone()),
            columns: Vec::new(),
            at: None,
        };
        self.bind_apart(&*parsed_query(&sql)?, &alias)
    }

    /// A reference to a WITH query in view (None: the name is not one). The WITH query is
    /// bound here as a derived table that sees only the WITH queries before it.
    fn bind_cte_reference(
        &mut self,
        name: &ast::ObjectName,
        alias: Option<&ast::TableAlias>,
    ) -> Option<SqlResult<(Relation, ScopeEntry)>> {
        let [part] = name.0.as_slice() else {
            return None;
        };
        let wanted = ident_name(part.as_ident()?);
        // Inside a recursive query's step, its own name is its work table.
        if let Some((name, work, columns)) = self
            .work_tables
            .iter()
            .rev()
            .find(|(name, ..)| *name == wanted)
        {
            let relation = Relation::WorkTable {
                work: *work,
                width: columns.len(),
            };
            self.work_tables_read.push(*work);
            let mut entry = ScopeEntry::new(Some(name.clone()), None, columns.clone());
            return Some(entry.alias(alias).map(|()| (relation, entry)));
        }
        let position = self
            .ctes
            .iter()
            .rposition(|(cte, _)| ident_name(&cte.alias.name) == wanted)?;
        let later = self.ctes.split_off(position);
        let (cte, recursive) = &later[0];
        let saved_scope = self.scope.take();
        let saved_grouping = self.grouping.take();
        let recursive = recursive.then(|| self.bind_recursive_cte(cte)).flatten();
        let plan = match recursive {
            Some(bound) => bound.map(|(root, columns)| QueryPlan {
                root,
                columns,
                locks: false,
            }),
            None => self.bind_query(&cte.query),
        };
        self.scope = saved_scope;
        self.grouping = saved_grouping;
        let bound = plan.and_then(|plan| {
            let mut entry = ScopeEntry::new(
                None,
                None,
                plan.columns
                    .iter()
                    .map(|c| (c.name.clone(), c.data_type))
                    .collect(),
            );
            entry.alias(Some(&cte.alias))?;
            entry.alias(alias)?;
            Ok((plan.root, entry))
        });
        self.ctes.extend(later);
        Some(bound)
    }

    /// Makes the next query bound (the derived table `subquery`'s) inherit the lock the
    /// clauses take on the FROM item called `alias` (a VALUES list has no rows to lock).
    fn inherit_lock(
        &mut self,
        locks: &[ast::LockClause],
        subquery: &ast::Query,
        alias: Option<&ast::TableAlias>,
    ) {
        if matches!(subquery.body.as_ref(), ast::SetExpr::Values(_)) {
            return;
        }
        let lock = alias.and_then(|alias| row_lock(locks, &ident_name(&alias.name)));
        self.inherited_lock = lock.map(inherited_clause);
        self.locked_derived |= lock.is_some();
    }

    /// Whether the clauses lock the FROM item `factor`: a table, a view or a derived table
    /// (not a function, a VALUES list or a WITH query, whose rows are no table's).
    fn locked_item(&self, factor: &TableFactor, locks: &[ast::LockClause]) -> bool {
        if locks.is_empty() {
            return false;
        }
        let lockable = match factor {
            TableFactor::Derived { subquery, .. } => {
                !matches!(subquery.body.as_ref(), ast::SetExpr::Values(_))
            }
            TableFactor::Table {
                name, args: None, ..
            } => match name.0.as_slice() {
                [part] => part.as_ident().map(ident_name).is_some_and(|name| {
                    let cte =
                        (self.ctes.iter()).any(|(cte, _)| ident_name(&cte.alias.name) == name);
                    !cte && (self.catalog.table(&name).is_ok()
                        || self.catalog.view(&name).is_some())
                }),
                _ => true,
            },
            _ => false,
        };
        lockable && factor_name(factor).is_some_and(|name| row_lock(locks, &name).is_some())
    }

    /// A table by name: a user table, else (or when qualified with a system schema) a system
    /// table.
    fn bind_named_relation(
        &mut self,
        name: &ast::ObjectName,
        lock: Option<RowLock>,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let parts: Vec<String> = name
            .0
            .iter()
            .map(|part| {
                part.as_ident()
                    .map(ident_name)
                    .ok_or_else(|| SqlError::unsupported(format!("object name {part}")))
            })
            .collect::<SqlResult<_>>()?;
        let undefined = || {
            SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("relation \"{name}\" does not exist"),
            )
        };
        let (schema, table_name) = match parts.as_slice() {
            [table] => (None, table.as_str()),
            [schema, table] => (Some(schema.as_str()), table.as_str()),
            _ => return Err(undefined()),
        };
        if schema.is_none() || schema == Some(PUBLIC_SCHEMA) {
            match self.catalog.table(table_name) {
                Ok(table) => {
                    self.note_read(table_name);
                    let entry = ScopeEntry::table(&table);
                    let read = TableRead {
                        index_terms: self.index_bindings(&table),
                        columns: None,
                        table,
                        access: Access::Full,
                        filter: None,
                        descending: false,
                        index_order: false,
                    };
                    return Ok((Relation::Table { read, lock }, entry));
                }
                Err(error) if error.code == sqlstate::UNDEFINED_TABLE => {
                    if let Some(view) = self.catalog.view(table_name) {
                        self.note_read(table_name);
                        // FOR UPDATE of a view locks the rows of the tables it reads.
                        self.inherited_lock = lock.map(inherited_clause);
                        self.locked_derived |= lock.is_some();
                        return self.bind_view(&view);
                    }
                    if let Ok(sequence) = self.catalog.sequence(table_name) {
                        self.note_read(table_name);
                        return self.bind_sequence_relation(&sequence);
                    }
                    if schema.is_some() {
                        return Err(undefined());
                    }
                }
                Err(error) => return Err(error),
            }
        }
        let system = crate::system::lookup(schema, table_name).ok_or_else(undefined)?;
        let mut entry = ScopeEntry::new(
            Some(system.name.to_string()),
            Some(system.schema.to_string()),
            system
                .columns
                .iter()
                .map(|(name, data_type)| (name.to_string(), *data_type))
                .chain(std::iter::once(("tableoid".to_string(), DataType::Int8)))
                .collect(),
        );
        // `tableoid`, as on every PostgreSQL table: read by name, not by `*`.
        entry.star_width = system.columns.len();
        Ok((Relation::System(system), entry))
    }

    /// `unnest(array)`, `generate_subscripts(array, n)` or `_pg_expandarray(array)` in FROM
    /// (None: `name` is none of them): bound as the derived table `(SELECT f(args)) AS f`,
    /// lateral to the FROM items before it as in PostgreSQL, so the SELECT-list set function
    /// does the work.
    fn bind_array_function(
        &mut self,
        name: &ast::ObjectName,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
        with_ordinality: bool,
        scope: &Scope,
    ) -> Option<SqlResult<(Relation, ScopeEntry)>> {
        let function = ident_name(name.0.last()?.as_ident()?);
        let args: Vec<String> = args.iter().map(ToString::to_string).collect();
        if function == "pg_options_to_table" && args.len() == 1 {
            // name=value options (a foreign server's, a table's): split at the first '='.
            let sql = format!(
                "SELECT substr(o, 1, strpos(o, '=') - 1) AS option_name, \
                 substr(o, strpos(o, '=') + 1) AS option_value FROM unnest({}) AS u(o)",
                args[0]
            );
            return Some(self.bind_sql_in_from(&sql, &function, alias, scope));
        }
        if function == "pg_partition_ancestors" && args.len() == 1 {
            // No table is a partition here: a relation's only ancestor is itself (WITH
            // ORDINALITY: at position 1; psql's \d of a table with triggers asks).
            let ordinality = if with_ordinality {
                ", 1 AS ordinality"
            } else {
                ""
            };
            let sql = format!("SELECT ({})::oid AS relid{ordinality}", args[0]);
            return Some(self.bind_sql_in_from(&sql, &function, alias, scope));
        }
        // json(b)_each has columns of its own in FROM (below), not a record.
        let json_set = crate::plan::JSON_SET_FUNCTIONS.contains(&function.as_str())
            && !function.contains("_each");
        if with_ordinality && json_set && args.len() == 1 {
            let column = if function.contains("_array_elements") {
                "value"
            } else {
                function.as_str()
            };
            let sql = format!(
                "SELECT {column}, row_number() OVER () AS ordinality \
                 FROM (SELECT {function}({}) AS {column}) AS s",
                args[0]
            );
            return Some(self.bind_sql_in_from(&sql, &function, alias, scope));
        }
        if with_ordinality && reads_earlier_function(&function) {
            return Some(Err(SqlError::unsupported(format!(
                "WITH ORDINALITY on {function}()"
            ))));
        }
        if args.len() == 1 {
            let json_type = |prefix: &str| ["json", "jsonb"].contains(&prefix);
            if let Some(binary) = function
                .strip_suffix("_each")
                .filter(|f| json_type(f))
                .map(|f| f == "jsonb")
            {
                return Some(self.bind_json_each(&args[0], binary, "->", &function, alias, scope));
            }
            if let Some(binary) = function
                .strip_suffix("_each_text")
                .filter(|f| json_type(f))
                .map(|f| f == "jsonb")
            {
                return Some(self.bind_json_each(&args[0], binary, "->>", &function, alias, scope));
            }
            if function.contains("_array_elements")
                && crate::plan::JSON_SET_FUNCTIONS.contains(&function.as_str())
            {
                // Its column is `value` (its OUT parameter), whatever the alias.
                let sql = format!("SELECT {function}({}) AS value", args[0]);
                return Some(self.bind_sql_in_from(&sql, &function, alias, scope));
            }
        }
        if !["unnest", "generate_subscripts", "_pg_expandarray"].contains(&function.as_str())
            && !crate::plan::JSON_SET_FUNCTIONS.contains(&function.as_str())
        {
            return None;
        }
        Some(self.bind_set_function_in_from(&function, &args, alias, scope))
    }

    /// json(b)_each[_text](doc) in FROM: the object's `key`s and their `value`s (`->` gives
    /// documents, `->>` text), as the derived table over its keys.
    fn bind_json_each(
        &mut self,
        document: &str,
        binary: bool,
        operator: &str,
        function: &str,
        alias: Option<&ast::TableAlias>,
        scope: &Scope,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        // The document is evaluated once, typed as the function's (an untyped literal would
        // be read as jsonb by `->`), in a derived table of its own: with no FROM item of its
        // own, its names are the query's, never the helper names below.
        let (keys, cast) = match binary {
            true => ("jsonb_object_keys", "jsonb"),
            false => ("json_object_keys", "json"),
        };
        let sql = format!(
            "SELECT hayate_each_key AS key, \
             hayate_each.doc {operator} hayate_each_key AS value \
             FROM (SELECT ({document})::{cast} AS doc) AS hayate_each, \
             {keys}(hayate_each.doc) AS hayate_each_key"
        );
        self.bind_sql_in_from(&sql, function, alias, scope)
    }

    /// `function(args)` in FROM as the derived table `(SELECT function(args)) AS function`.
    fn bind_set_function_in_from(
        &mut self,
        function: &str,
        args: &[String],
        alias: Option<&ast::TableAlias>,
        scope: &Scope,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let sql = format!("SELECT {function}({})", args.join(", "));
        // A function of one scalar column names it after its table alias, as PostgreSQL
        // does (`FROM unnest(a) o` reads `o`).
        let scalar_alias = alias
            .filter(|alias| alias.columns.is_empty() && function != "_pg_expandarray")
            .map(|alias| ast::TableAlias {
                columns: vec![ast::TableAliasColumnDef {
                    name: alias.name.clone(),
                    data_type: None,
                }],
                ..alias.clone()
            });
        self.bind_sql_in_from(&sql, function, scalar_alias.as_ref().or(alias), scope)
    }

    /// The query `sql` as a derived table in FROM standing for `function(...)`: named
    /// `alias`, else after the function; lateral to the FROM items before it.
    fn bind_sql_in_from(
        &mut self,
        sql: &str,
        function: &str,
        alias: Option<&ast::TableAlias>,
        scope: &Scope,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let query = parsed_query(sql)?;
        let named = ast::TableAlias {
            explicit: true,
            name: ast::Ident::new(function),
            columns: Vec::new(),
            at: None,
        };
        self.bind_derived(&query, Some(alias.unwrap_or(&named)), Some(scope))
    }

    /// `generate_series(start, stop[, step])` in FROM.
    fn bind_table_function(
        &mut self,
        name: &ast::ObjectName,
        args: &[ast::FunctionArg],
        alias: Option<&ast::TableAlias>,
    ) -> SqlResult<(Relation, ScopeEntry)> {
        let function = name
            .0
            .last()
            .and_then(|part| part.as_ident())
            .map(ident_name)
            .unwrap_or_default();
        if function != "generate_series" {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {name} does not exist"),
            ));
        }
        if !(2..=3).contains(&args.len()) {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function generate_series with {} arguments does not exist",
                    args.len()
                ),
            ));
        }
        // Arguments see no FROM item (no LATERAL), but may read enclosing queries.
        let saved = self.scope.take();
        let mut bound = Vec::new();
        let mut result_type = DataType::Int4;
        for arg in args {
            let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(arg)) = arg else {
                self.scope = saved;
                return Err(SqlError::unsupported("named arguments of generate_series"));
            };
            let (expr, data_type) = match self.bind_expr(arg, Some(DataType::Int8)) {
                Ok(bound) => bound,
                Err(error) => {
                    self.scope = saved;
                    return Err(error);
                }
            };
            if !data_type.is_integer() && data_type != DataType::Unknown {
                self.scope = saved;
                return Err(SqlError::unsupported(format!(
                    "generate_series over {data_type}"
                )));
            }
            result_type = result_type.wider_integer(if data_type.is_integer() {
                data_type
            } else {
                DataType::Int8
            });
            bound.push(expr);
        }
        self.scope = saved;
        let mut bound = bound.into_iter();
        let relation = Relation::Series {
            start: bound.next().expect("two arguments"),
            stop: bound.next().expect("two arguments"),
            step: bound.next(),
        };
        // As PostgreSQL: a function returning one column names it after the alias.
        let column = match alias {
            Some(alias) if alias.columns.is_empty() => ident_name(&alias.name),
            _ => function.clone(),
        };
        let mut entry = ScopeEntry::new(Some(function), None, vec![(column, result_type)]);
        entry.alias(alias)?;
        Ok((relation, entry))
    }
}

/// Splits an expression into its AND-ed conjuncts.
fn split(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::Binary {
            op: BinaryOp::And,
            left,
            right,
            ..
        } => {
            split(*left, out);
            split(*right, out);
        }
        other => out.push(other),
    }
}

fn and_all(conjuncts: Vec<Expr>) -> Option<Expr> {
    conjuncts.into_iter().reduce(|left, right| Expr::Binary {
        op: BinaryOp::And,
        left: Box::new(left),
        right: Box::new(right),
        data_type: DataType::Bool,
    })
}

/// The lowest and highest column an expression reads on its own row (None: none).
fn column_range(expr: &Expr) -> Option<(usize, usize)> {
    let mut range: Option<(usize, usize)> = None;
    visit(expr, &mut |e| {
        if let Expr::Column(index) = e {
            range = Some(match range {
                None => (*index, *index),
                Some((low, high)) => (low.min(*index), high.max(*index)),
            });
        }
    });
    range
}

fn visit(expr: &Expr, f: &mut dyn FnMut(&Expr)) {
    f(expr);
    for child in expr.children() {
        visit(child, f);
    }
}

/// True if evaluating the expression runs a subquery that reads this row.
fn has_correlated_subquery(expr: &Expr) -> bool {
    let mut found = false;
    visit(expr, &mut |e| {
        if let Expr::Subquery(subquery) = e {
            found |= subquery.0.correlated;
        }
    });
    found
}

/// The expression with every column position moved down by `by` (onto a suffix of the row).
fn shift(expr: Expr, by: usize) -> Expr {
    remap(expr, &|index| index - by)
}

/// The expression with every column position `i` of its row read at `to(i)` instead.
fn remap(mut expr: Expr, to: &dyn Fn(usize) -> usize) -> Expr {
    fn walk(expr: &mut Expr, by: &dyn Fn(usize) -> usize) {
        if let Expr::Column(index) = expr {
            *index = by(*index);
        }
        if let Expr::Subquery(subquery) = expr {
            if let SubqueryKind::In(left) = &subquery.0.kind {
                // Shared with other plans: rebuilt with the shifted operand.
                let mut left = (**left).clone();
                walk(&mut left, by);
                let inner = &subquery.0;
                *expr = Expr::Subquery(crate::plan::expr::SubqueryRef(Arc::new(
                    crate::plan::expr::Subquery {
                        kind: SubqueryKind::In(Box::new(left)),
                        plan: inner.plan.clone(),
                        correlated: inner.correlated,
                    },
                )));
            }
            return;
        }
        for child in expr.children_mut() {
            walk(child, by);
        }
    }
    walk(&mut expr, to);
    expr
}

/// Where a conjunct may go, from the columns it reads.
#[derive(Clone, Copy)]
struct Reads {
    /// None: no column of this row.
    range: Option<(usize, usize)>,
    correlated: bool,
}

fn reads(expr: &Expr) -> Reads {
    Reads {
        range: column_range(expr),
        correlated: has_correlated_subquery(expr),
    }
}

/// Adds a filter over the item's own row to a leaf: a user table also re-picks its access
/// path with it.
fn push_into(relation: Relation, conjuncts: Vec<Expr>) -> Relation {
    let Some(predicate) = and_all(conjuncts) else {
        return relation;
    };
    match relation {
        Relation::Table { mut read, lock } => {
            let filter = match read.filter.take() {
                Some(existing) => and_all(vec![existing, predicate]),
                None => Some(predicate),
            };
            read.access = access::choose(&read.table, filter.as_ref(), &read.index_terms);
            read.filter = filter;
            Relation::Table { read, lock }
        }
        other => Relation::Filter {
            input: Box::new(other),
            predicate,
        },
    }
}

fn filter(relation: Relation, conjuncts: Vec<Expr>) -> Relation {
    match and_all(conjuncts) {
        Some(predicate) => Relation::Filter {
            input: Box::new(relation),
            predicate,
        },
        None => relation,
    }
}

/// `left = right` split into its operands.
fn equality(expr: &Expr) -> Option<(&Expr, &Expr)> {
    match expr {
        Expr::Binary {
            op: BinaryOp::Equal,
            left,
            right,
            ..
        } => Some((left, right)),
        _ => None,
    }
}

/// Equivalence classes: the columns that `column = column` conjuncts make equal, and a
/// constant one of them equals; every other column of the class then equals that constant
/// too. The conjuncts this returns are implied by `conjuncts` (a NULL never passes an
/// equality), so adding them keeps the result; they give the other tables their access path:
/// in `FROM customer, warehouse WHERE w_id = 1 AND c_w_id = w_id AND c_d_id = 3 AND c_id =
/// 77` customer gets `c_w_id = 1`, a point lookup instead of a scan.
fn implied_constants<'a>(conjuncts: impl Iterator<Item = &'a Expr>) -> Vec<Expr> {
    // Bare columns only: a cast may map several values to one (text to integer).
    let column = |e: &Expr| match e {
        Expr::Column(index) => Some(*index),
        _ => None,
    };
    let constant = |e: &Expr| {
        let r = reads(e);
        r.range.is_none() && !r.correlated && e.is_constant()
    };
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let mut constants: Vec<(usize, Expr)> = Vec::new();
    for conjunct in conjuncts {
        let Some((a, b)) = equality(conjunct) else {
            continue;
        };
        match (column(a), column(b)) {
            (Some(x), Some(y)) if x != y => pairs.push((x, y)),
            (Some(x), None) if constant(b) => constants.push((x, b.clone())),
            (None, Some(y)) if constant(a) => constants.push((y, a.clone())),
            _ => {}
        }
    }
    if pairs.is_empty() || constants.is_empty() {
        return Vec::new();
    }
    // Union-find over column positions.
    let mut parent: std::collections::HashMap<usize, usize> = Default::default();
    fn root(parent: &mut std::collections::HashMap<usize, usize>, x: usize) -> usize {
        let up = *parent.entry(x).or_insert(x);
        if up == x {
            return x;
        }
        let top = root(parent, up);
        parent.insert(x, top);
        top
    }
    for (x, y) in &pairs {
        let (rx, ry) = (root(&mut parent, *x), root(&mut parent, *y));
        parent.insert(rx.max(ry), rx.min(ry));
    }
    let members: Vec<usize> = parent.keys().copied().collect();
    let mut implied = Vec::new();
    for (fixed, value) in &constants {
        if !parent.contains_key(fixed) {
            continue;
        }
        let class = root(&mut parent, *fixed);
        for member in &members {
            if *member == *fixed
                || root(&mut parent, *member) != class
                || constants.iter().any(|(c, _)| c == member)
            {
                continue;
            }
            let equal = Expr::Binary {
                op: BinaryOp::Equal,
                left: Box::new(Expr::Column(*member)),
                right: Box::new(value.clone()),
                data_type: DataType::Bool,
            };
            if !implied.contains(&equal) {
                implied.push(equal);
            }
        }
    }
    implied
}

/// Plans the joins, the items first put in a better order when the written order starts with
/// an item read whole while another has a narrow path (`reorder`); a Project then puts the
/// columns back in the written order.
fn plan_joins(items: Vec<FromItem>, where_conjuncts: Vec<Expr>) -> SqlResult<Relation> {
    let width = items.last().map_or(0, |item| item.end);
    match reorder(items, where_conjuncts) {
        Ok((items, where_conjuncts, new_position)) => {
            let root = plan_joins_in_order(items, where_conjuncts)?;
            let exprs = (0..width)
                .map(|old| Expr::Column(new_position[old]))
                .collect();
            Ok(Relation::Project {
                input: Box::new(root),
                exprs,
            })
        }
        Err((items, where_conjuncts)) => plan_joins_in_order(items, where_conjuncts),
    }
}

/// FROM items with their conditions (handed back when `reorder` keeps the written order).
type Unordered = (Vec<FromItem>, Vec<Expr>);

/// FROM items and conditions in a new order, and where each written column went.
type Reordered = (Vec<FromItem>, Vec<Expr>, Vec<usize>);

/// Join order for inner joins of plain items (no outer join, no LATERAL, no correlated
/// subquery in a condition): the written order unless its first item is read whole
/// (no key narrows it) while another item has a point lookup, an index lookup or a range scan
/// from its own and implied conditions (`FROM customer, frequent_flyer WHERE ff_c_id_str = ?
/// AND ff_c_id = c_id` starts with frequent_flyer's index). The narrowest item goes first,
/// then, greedily, the narrowest item joined by an equality to those placed (else the next
/// written). Items whose tables have statistics (ANALYZE) compare by the rows they are
/// estimated to return (`access::estimated_rows`), the others by their paths' shapes; when
/// every item has statistics, an item no key narrows may go first too if another item
/// looks rows up from it (an equality with the first column of that item's primary key or
/// of one of its indexes): `FROM lines JOIN orders ... WHERE o_customer = 5` starts with the
/// 20 orders and looks their lines up through an index (`join`).
/// Returns the items and conditions renumbered and where each written column went; Err
/// hands everything back unchanged.
fn reorder(items: Vec<FromItem>, mut conditions: Vec<Expr>) -> Result<Reordered, Unordered> {
    let plain = items.len() >= 2
        && items
            .iter()
            .all(|item| item.kind == ItemJoin::Inner && !item.lateral)
        && !items
            .iter()
            .flat_map(|item| item.on.iter())
            .chain(conditions.iter())
            .any(has_correlated_subquery);
    if !plain {
        return Err((items, conditions));
    }
    let mut all: Vec<Expr> = conditions.clone();
    all.extend(items.iter().flat_map(|item| item.on.iter().cloned()));
    all.extend(implied_constants(all.clone().iter()));
    // How narrow each item's read is by shape, and the rows it returns by its statistics.
    let rank = |item: &FromItem| -> ((u8, usize, bool), Option<f64>) {
        let Relation::Table { read, .. } = &item.relation else {
            return ((0, 0, false), None);
        };
        let own: Vec<Expr> = all
            .iter()
            .filter(|e| within(e, item))
            .map(|e| shift(e.clone(), item.start))
            .collect();
        let mut filter = read.filter.clone().into_iter().collect::<Vec<_>>();
        filter.extend(own);
        let filter = and_all(filter);
        let access = access::choose(&read.table, filter.as_ref(), &read.index_terms);
        let rows = access::estimated_rows(&read.table, filter.as_ref(), &read.index_terms);
        (access::narrowness(&read.table, &access), rows)
    };
    let (ranks, rows): (Vec<_>, Vec<_>) = items.iter().map(rank).unzip();
    // Greater: item a goes before item b (fewer rows when both have statistics, else the
    // narrower path), the earlier written on a tie.
    let before = |a: &usize, b: &usize| {
        let by_rows = match (rows[*a], rows[*b]) {
            (Some(x), Some(y)) => y.partial_cmp(&x).unwrap_or(std::cmp::Ordering::Equal),
            _ => std::cmp::Ordering::Equal,
        };
        by_rows.then(ranks[*a].cmp(&ranks[*b])).then(b.cmp(a))
    };
    // Whether another item can look rows up by an equality with `a`'s columns (the
    // equality's other side is the first column of its primary key or of one of its
    // indexes) and the rows found for `a`'s estimated rows are under half that item's: a
    // join that goes on from `a` without reading that item whole.
    let leads_on = |a: &FromItem, a_rows: f64| {
        let leading = |x: &Expr, item: &FromItem| {
            let (Expr::Column(column), Relation::Table { read, .. }) = (x, &item.relation) else {
                return false;
            };
            let def = &read.table.def;
            let local = column.wrapping_sub(item.start);
            let leads = (def.primary_key.first().into_iter())
                .chain(def.indexes.iter().filter_map(|index| index.columns.first()))
                .any(|first| *first == local);
            leads
                && access::probe_rows(&read.table, local)
                    .is_some_and(|(rows, found)| a_rows * found * 2.0 < rows)
        };
        items.iter().any(|b| {
            b.start != a.start
                && all.iter().any(|e| {
                    equality(e).is_some_and(|(l, r)| {
                        (within(l, a) && leading(r, b)) || (within(r, a) && leading(l, b))
                    })
                })
        })
    };
    // The first item: of those a key narrows (a scan goes first only as written), or, when
    // every one has an estimate, of those another item looks rows up from (a big table is
    // then never left to be hashed or held whole after a small one).
    let estimated = rows.iter().all(Option::is_some);
    let Some(best) = (0..items.len())
        .filter(|i| {
            let leads = |estimate: f64| leads_on(&items[*i], estimate);
            ranks[*i].0 > 0 || (estimated && rows[*i].is_some_and(leads))
        })
        .max_by(before)
    else {
        return Err((items, conditions));
    };
    if (ranks[0].0 > 0 && !estimated) || best == 0 {
        return Err((items, conditions));
    }
    // Greedy order: joined to what is placed, narrowest first.
    let joins = |a: &FromItem, b: &FromItem| {
        all.iter().any(|e| {
            equality(e).is_some_and(|(l, r)| {
                (within(l, a) && within(r, b)) || (within(l, b) && within(r, a))
            })
        })
    };
    let mut order = vec![best];
    while order.len() < items.len() {
        let next = (0..items.len())
            .filter(|i| !order.contains(i))
            .filter(|i| order.iter().any(|p| joins(&items[*p], &items[*i])))
            .max_by(before)
            .or_else(|| (0..items.len()).find(|i| !order.contains(i)))
            .expect("an item is left");
        order.push(next);
    }
    // Renumber: the columns of the items in their new order.
    let width = items.last().map_or(0, |item| item.end);
    let mut new_position = vec![0; width];
    let mut offset = 0;
    for position in &order {
        let item = &items[*position];
        for (k, column) in (item.start..item.end).enumerate() {
            new_position[column] = offset + k;
        }
        offset += item.end - item.start;
    }
    let mut slots: Vec<Option<FromItem>> = items.into_iter().map(Some).collect();
    let mut reordered = Vec::with_capacity(slots.len());
    let mut offset = 0;
    for position in &order {
        let mut item = slots[*position].take().expect("each item once");
        // Inner joins: ON conditions are conditions of the whole join.
        conditions.append(&mut item.on);
        let width = item.end - item.start;
        item.start = offset;
        item.end = offset + width;
        offset += width;
        reordered.push(item);
    }
    let conditions = conditions
        .into_iter()
        .map(|e| remap(e, &|column| new_position[column]))
        .collect();
    Ok((reordered, conditions, new_position))
}

/// Whether `expr` reads columns of `item` only (and some).
fn within(expr: &Expr, item: &FromItem) -> bool {
    column_range(expr).is_some_and(|(low, high)| low >= item.start && high < item.end)
}

fn plan_joins_in_order(items: Vec<FromItem>, where_conjuncts: Vec<Expr>) -> SqlResult<Relation> {
    if items.is_empty() {
        let root = Relation::Values(vec![Vec::new()]);
        return Ok(filter(root, where_conjuncts));
    }
    let mut where_conjuncts = where_conjuncts;
    let implied = {
        // Inner ON conditions hold on every joined row as WHERE conjuncts do.
        let inner_on = items
            .iter()
            .filter(|item| item.kind == ItemJoin::Inner)
            .flat_map(|item| item.on.iter());
        implied_constants(where_conjuncts.iter().chain(inner_on))
    };
    where_conjuncts.extend(implied);
    let mut pool: Vec<(Expr, Reads)> = where_conjuncts
        .into_iter()
        .map(|e| {
            let r = reads(&e);
            (e, r)
        })
        .collect();
    let mut top = Vec::new();
    pool.retain(|(e, r)| {
        if r.correlated {
            top.push(e.clone());
        }
        !r.correlated
    });
    let take = |pool: &mut Vec<(Expr, Reads)>, keep: &dyn Fn(&Reads) -> bool| {
        let mut taken = Vec::new();
        pool.retain(|(e, r)| {
            let take = keep(r);
            if take {
                taken.push(e.clone());
            }
            !take
        });
        taken
    };
    // Items before a RIGHT or FULL join become nullable there: WHERE conjuncts on them
    // wait until after it.
    let last_outer = items
        .iter()
        .rposition(|item| matches!(item.kind, ItemJoin::Right | ItemJoin::Full));
    let pushable = |position: usize| last_outer.is_none_or(|last| position >= last);
    let mut items = items.into_iter().enumerate();
    let (_, first) = items.next().expect("not empty");
    let end = first.end;
    let mine = if pushable(0) {
        take(&mut pool, &|r| r.range.is_none_or(|(_, high)| high < end))
    } else {
        Vec::new()
    };
    let mut root = push_into(first.relation, mine);
    for (position, item) in items {
        let (start, end) = (item.start, item.end);
        let mut conditions = item.on;
        if item.kind == ItemJoin::Inner && pushable(position) {
            conditions.extend(take(&mut pool, &|r| {
                r.range.is_some_and(|(_, high)| high < end)
            }));
        }
        match item.kind {
            ItemJoin::Inner | ItemJoin::Left => {
                // Conditions on the right item alone filter it before the join.
                let (right_only, conditions): (Vec<Expr>, Vec<Expr>) =
                    conditions.into_iter().partition(|e| {
                        let r = reads(e);
                        !r.correlated && r.range.is_some_and(|(low, _)| low >= start)
                    });
                let right_only = right_only.into_iter().map(|e| shift(e, start)).collect();
                let right = push_into(item.relation, right_only);
                let kind = match item.kind {
                    ItemJoin::Inner => JoinKind::Inner,
                    _ => JoinKind::Left,
                };
                root = if item.lateral {
                    Relation::LateralJoin {
                        left: Box::new(root),
                        right: Box::new(right),
                        kind,
                        condition: and_all(conditions),
                    }
                } else {
                    join(root, right, kind, conditions, start, end)
                };
            }
            ItemJoin::Right => root = right_join(root, item.relation, conditions, start, end)?,
            ItemJoin::Full => root = full_join(root, item.relation, conditions, start, end),
        }
        if item.kind != ItemJoin::Inner && pushable(position) {
            let after = take(&mut pool, &|r| r.range.is_some_and(|(_, high)| high < end));
            root = filter(root, after);
        }
    }
    let rest: Vec<Expr> = pool.into_iter().map(|(e, _)| e).collect();
    top.extend(rest);
    Ok(filter(root, top))
}

/// `left RIGHT JOIN right`: planned as `right LEFT JOIN left`, whose rows are the right
/// columns followed by the left ones, then projected back to left followed by right.
fn right_join(
    left: Relation,
    right: Relation,
    conditions: Vec<Expr>,
    start: usize,
    end: usize,
) -> SqlResult<Relation> {
    if conditions.iter().any(has_correlated_subquery) {
        // Its subquery reads the joined row by position, which the swap changes.
        return Err(SqlError::unsupported(
            "a correlated subquery in the ON clause of a RIGHT JOIN",
        ));
    }
    let right_width = end - start;
    let swapped = |index: usize| {
        if index < start {
            index + right_width
        } else {
            index - start
        }
    };
    let conditions = conditions
        .into_iter()
        .map(|condition| remap(condition, &swapped))
        .collect();
    let joined = join(right, left, JoinKind::Left, conditions, right_width, end);
    let exprs = (0..end).map(|index| Expr::Column(swapped(index))).collect();
    Ok(Relation::Project {
        input: Box::new(joined),
        exprs,
    })
}

/// `left FULL JOIN right`: hashed on the equalities between a left and a right expression.
fn full_join(
    left: Relation,
    right: Relation,
    conditions: Vec<Expr>,
    start: usize,
    end: usize,
) -> Relation {
    let mut left_keys = Vec::new();
    let mut right_keys = Vec::new();
    let mut residual = Vec::new();
    for condition in conditions {
        let sides = |e: &Expr| {
            let r = reads(e);
            let left_only = !r.correlated && r.range.is_some_and(|(_, high)| high < start);
            let right_only = !r.correlated
                && r.range
                    .is_some_and(|(low, high)| low >= start && high < end);
            (left_only, right_only)
        };
        let keys = equality(&condition).and_then(|(a, b)| match (sides(a), sides(b)) {
            ((true, _), (_, true)) => Some((a.clone(), b.clone())),
            ((_, true), (true, _)) => Some((b.clone(), a.clone())),
            _ => None,
        });
        match keys {
            Some((l, r)) => {
                left_keys.push(l);
                right_keys.push(shift(r, start));
            }
            None => residual.push(condition),
        }
    }
    Relation::FullJoin {
        left: Box::new(left),
        right: Box::new(right),
        left_keys,
        right_keys,
        condition: and_all(residual),
    }
}

/// Joins `left` (columns 0..start) with `right` (start..end) on `conditions` over the
/// joined row, choosing the algorithm.
fn join(
    left: Relation,
    right: Relation,
    kind: JoinKind,
    conditions: Vec<Expr>,
    start: usize,
    end: usize,
) -> Relation {
    let left_only = |e: &Expr| {
        let r = reads(e);
        !r.correlated && r.range.is_none_or(|(_, high)| high < start)
    };
    let right_side = |e: &Expr| {
        let r = reads(e);
        !r.correlated
            && r.range
                .is_some_and(|(low, high)| low >= start && high < end)
    };
    // Merge join: two key-ordered scans joined on a prefix of both primary keys arrive
    // sorted on the join keys, so they merge in one pass of each (sequential reads).
    if let (Relation::Table { read: l, .. }, Relation::Table { read: r, .. }) = (&left, &right) {
        // Two primary key scans; a left side of a few lookups (a point, an index lookup, a
        // union) joins better by looking its rows up on the right.
        let scan = |access: &Access| matches!(access, Access::Full | Access::Range { .. });
        let scans = scan(&l.access) && scan(&r.access);
        let mut pairs = Vec::new();
        for (lc, rc) in l.table.def.primary_key.iter().zip(&r.table.def.primary_key) {
            let (lk, rk) = (Expr::Column(*lc), Expr::Column(start + rc));
            let paired = conditions.iter().position(|condition| {
                equality(condition)
                    .is_some_and(|(a, b)| (*a == lk && *b == rk) || (*a == rk && *b == lk))
            });
            match paired {
                Some(index) => pairs.push((index, lk, Expr::Column(*rc))),
                None => break,
            }
        }
        if scans && !pairs.is_empty() {
            let used: Vec<usize> = pairs.iter().map(|(index, _, _)| *index).collect();
            let residual = conditions
                .into_iter()
                .enumerate()
                .filter(|(index, _)| !used.contains(index))
                .map(|(_, condition)| condition)
                .collect();
            let (left_keys, right_keys) = pairs.into_iter().map(|(_, l, r)| (l, r)).unzip();
            return Relation::MergeJoin {
                left: Box::new(left),
                right: Box::new(right),
                kind,
                left_keys,
                right_keys,
                condition: and_all(residual),
            };
        }
    }
    // Index nested loop: the right table's whole primary key, or the first keys of one of
    // its indexes, equal left expressions or constants of the right table's own filter
    // (TPC-C's stock-level: s_w_id = ? AND s_i_id = ol_i_id; an ORM's join of a parent to
    // its children through the index on their foreign key).
    if let Relation::Table { read, lock } = &right {
        let mut own = Vec::new();
        if let Some(filter) = &read.filter {
            crate::plan::access::conjuncts(filter, &mut own);
        }
        let constant = |e: &Expr| {
            let r = reads(e);
            !r.correlated && r.range.is_none()
        };
        // What a column of the right table equals: a constant of its own filter (false), or a
        // left expression (true). A constant first: it says more about the rows found, and
        // the join's equality is checked on them anyway.
        let bound = |column: usize| -> Option<(Expr, bool)> {
            // The key column, maybe through casts that keep its values exact.
            let key_type = read.table.def.columns[column].data_type;
            let is_key = |e: &Expr, at: usize| {
                let type_of = |c: usize| (c == at).then_some(key_type);
                crate::plan::access::exact_column(e, &type_of) == Some(at)
            };
            // The other side of an equality of the key column at `at` with what `accept`s.
            let equal_to = |condition: &Expr, at: usize, accept: &dyn Fn(&Expr) -> bool| {
                let (a, b) = equality(condition)?;
                if is_key(a, at) && accept(b) {
                    Some(b.clone())
                } else if is_key(b, at) && accept(a) {
                    Some(a.clone())
                } else {
                    None
                }
            };
            let fixed = own.iter().find_map(|c| equal_to(c, column, &constant));
            if let Some(fixed) = fixed {
                return Some((fixed, false));
            }
            (conditions.iter())
                .find_map(|c| equal_to(c, start + column, &left_only))
                .map(|joined| (joined, true))
        };
        let key = &read.table.def.primary_key;
        let already_point = matches!(read.access, Access::Point(_));
        let lookup = |access: Access| TableRead {
            table: read.table.clone(),
            access,
            filter: read.filter.clone(),
            descending: false,
            index_order: false,
            index_terms: read.index_terms.clone(),
            columns: None,
        };
        let mut path = None;
        if !key.is_empty() && !already_point {
            let keys: Option<Vec<Expr>> = key
                .iter()
                .map(|column| bound(*column).map(|(value, _)| value))
                .collect();
            path = keys.map(Access::Point);
        }
        if path.is_none() && !already_point {
            path = access::join_lookup(&read.table, &read.index_terms, &own, &bound)
                .filter(|path| {
                    let outer_rows = estimated_output(&left);
                    let narrow = narrow_output(&left);
                    access::join_lookup_cheaper(&read.table, path, &read.access, outer_rows, narrow)
                })
                .map(Access::Index);
        }
        if let Some(path) = path {
            return Relation::IndexJoin {
                left: Box::new(left),
                right: lookup(path),
                lock: *lock,
                kind,
                condition: and_all(conditions),
            };
        }
    }
    // Hash join on the equalities between a left and a right expression.
    let mut left_keys = Vec::new();
    let mut right_keys = Vec::new();
    let mut residual = Vec::new();
    for condition in conditions {
        let keys = equality(&condition).and_then(|(a, b)| {
            if left_only(a) && right_side(b) {
                Some((a.clone(), b.clone()))
            } else if left_only(b) && right_side(a) {
                Some((b.clone(), a.clone()))
            } else {
                None
            }
        });
        match keys {
            Some((l, r)) if column_range(&l).is_some() => {
                left_keys.push(l);
                right_keys.push(shift(r, start));
            }
            _ => residual.push(condition),
        }
    }
    if !left_keys.is_empty() {
        return Relation::HashJoin {
            left: Box::new(left),
            right: Box::new(right),
            kind,
            left_keys,
            right_keys,
            condition: and_all(residual),
        };
    }
    Relation::NestedLoopJoin {
        left: Box::new(left),
        right: Box::new(right),
        kind,
        condition: and_all(residual),
    }
}

/// The rows `relation` is estimated to produce, for a table read with statistics.
fn estimated_output(relation: &Relation) -> Option<f64> {
    match relation {
        Relation::Table { read, .. } => {
            access::estimated_rows(&read.table, read.filter.as_ref(), &read.index_terms)
        }
        _ => None,
    }
}

/// Whether `relation` produces few rows by its shape: a table read by a point, an index
/// lookup or a range with an equal key prefix, or a row looked up by a unique key for
/// each row of such a read.
fn narrow_output(relation: &Relation) -> bool {
    match relation {
        Relation::Table { read, .. } => {
            access::narrowness(&read.table, &read.access) >= (1, 1, false)
        }
        Relation::IndexJoin { left, right, .. } => {
            access::narrowness(&right.table, &right.access).0 == 3 && narrow_output(left)
        }
        _ => false,
    }
}

/// Whether a FROM item is a set function bound as a derived table lateral to the items
/// before it (`bind_array_function`, unnest's own syntax), whose arguments may read them.
fn reads_earlier_items(factor: &TableFactor) -> bool {
    let name = match factor {
        TableFactor::UNNEST { .. } => return true,
        TableFactor::Table {
            name,
            args: Some(_),
            ..
        }
        | TableFactor::Function { name, .. } => name,
        _ => return false,
    };
    let function = name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .map(ident_name)
        .unwrap_or_default();
    reads_earlier_function(&function)
}

/// Whether `function` in FROM is one of the set functions bound as a derived table lateral
/// to the items before it (`reads_earlier_items`).
fn reads_earlier_function(function: &str) -> bool {
    matches!(
        function,
        "unnest"
            | "generate_subscripts"
            | "_pg_expandarray"
            | "pg_options_to_table"
            | "jsonb_each"
            | "json_each"
            | "jsonb_each_text"
            | "json_each_text"
    ) || crate::plan::JSON_SET_FUNCTIONS.contains(&function)
}

/// The name a FROM item of any kind is known by (None: a join in parentheses without alias).
fn factor_name(factor: &TableFactor) -> Option<String> {
    match factor {
        TableFactor::Table { name, alias, .. } => item_name(name, alias.as_ref()),
        TableFactor::Derived { alias, .. }
        | TableFactor::Function { alias, .. }
        | TableFactor::UNNEST { alias, .. }
        | TableFactor::NestedJoin { alias, .. } => alias.as_ref().map(|a| ident_name(&a.name)),
        _ => None,
    }
}

/// The words of the first locking clause, as PostgreSQL's messages name it.
fn lock_words(locks: &[ast::LockClause]) -> &'static str {
    match locks.first().map(|clause| clause.lock_type) {
        Some(ast::LockType::Share) => "FOR SHARE",
        _ => "FOR UPDATE",
    }
}

/// The name a FROM item is known by: its alias, else its last name part.
fn item_name(name: &ast::ObjectName, alias: Option<&ast::TableAlias>) -> Option<String> {
    match alias {
        Some(alias) => Some(ident_name(&alias.name)),
        None => name.0.last()?.as_ident().map(ident_name),
    }
}

/// The row lock FOR UPDATE / FOR SHARE clauses take on the FROM item named `item`: of the
/// clauses without OF or whose OF names it, as PostgreSQL, the strongest (FOR UPDATE over
/// FOR SHARE), NOWAIT if any says so, else SKIP LOCKED if any does.
fn row_lock(locks: &[ast::LockClause], item: &str) -> Option<RowLock> {
    let applying: Vec<&ast::LockClause> = locks
        .iter()
        .filter(|clause| match &clause.of {
            None => true,
            Some(of) => (of.0.last())
                .and_then(|part| part.as_ident())
                .is_some_and(|of| ident_name(of) == item),
        })
        .collect();
    if applying.is_empty() {
        return None;
    }
    let any = |nonblock: ast::NonBlock| applying.iter().any(|c| c.nonblock == Some(nonblock));
    Some(RowLock {
        shared: (applying.iter()).all(|clause| clause.lock_type == ast::LockType::Share),
        wait: match (any(ast::NonBlock::Nowait), any(ast::NonBlock::SkipLocked)) {
            (true, _) => LockWait::NoWait,
            (false, true) => LockWait::SkipLocked,
            (false, false) => LockWait::Wait,
        },
    })
}

/// The clause a derived table's or view's query inherits from a lock on it: every table
/// inside is locked so (PostgreSQL's FOR UPDATE of a subquery in FROM).
fn inherited_clause(lock: RowLock) -> ast::LockClause {
    ast::LockClause {
        lock_type: match lock.shared {
            true => ast::LockType::Share,
            false => ast::LockType::Update,
        },
        of: None,
        nonblock: match lock.wait {
            LockWait::Wait => None,
            LockWait::NoWait => Some(ast::NonBlock::Nowait),
            LockWait::SkipLocked => Some(ast::NonBlock::SkipLocked),
        },
    }
}

/// FOR UPDATE OF must name an item of the FROM list (42P01, as PostgreSQL).
pub(super) fn check_locked_names(
    locks: &[ast::LockClause],
    scope: Option<&Scope>,
) -> SqlResult<()> {
    for of in locks.iter().filter_map(|clause| clause.of.as_ref()) {
        let name = of.0.last().and_then(|part| part.as_ident()).map(ident_name);
        let found = name.as_deref().is_some_and(|name| {
            scope.is_some_and(|scope| {
                (scope.entries.iter()).any(|entry| entry.qualifier.as_deref() == Some(name))
            })
        });
        if !found {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_TABLE,
                format!(
                    "relation \"{of}\" in {} clause not found in FROM clause",
                    lock_words(locks)
                ),
            ));
        }
    }
    Ok(())
}
