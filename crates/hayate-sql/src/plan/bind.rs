//! The binder: sqlparser's AST to a `Plan`, against the catalog.

use std::sync::Arc;

use sqlparser::ast::{self, SelectItem, SetExpr, Statement, TableFactor};

use crate::catalog::{Catalog, ColumnDef, Table, TableDef};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access;
use crate::plan::expr::{BinaryOp, Expr, ScalarFunction};
use crate::plan::{
    AggregateCall, AggregateFunction, Aggregation, OutputColumn, Plan, Returning, SelectPlan,
    SortKey, TableRead, TransactionControl,
};
use crate::types::{DataType, Value};

/// State of binding the parts of a SELECT that see groups instead of rows.
struct Grouping {
    group_by: Vec<ast::Expr>,
    group_types: Vec<DataType>,
    aggregates: Vec<AggregateCall>,
}

pub struct Binder<'a> {
    catalog: &'a Catalog,
    /// The type of each parameter: declared by the client, else inferred, else text.
    pub params: Vec<DataType>,
    /// The table whose row expressions read (None: no FROM).
    scope: Option<Arc<Table>>,
    grouping: Option<Grouping>,
}

/// An identifier as PostgreSQL folds it: unquoted names are lower case.
pub fn ident_name(ident: &ast::Ident) -> String {
    match ident.quote_style {
        Some(_) => ident.value.clone(),
        None => ident.value.to_lowercase(),
    }
}

fn object_name(name: &ast::ObjectName) -> SqlResult<String> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|part| match part {
            ast::ObjectNamePart::Identifier(ident) => Ok(ident_name(ident)),
            other => Err(SqlError::unsupported(format!("object name {other}"))),
        })
        .collect::<SqlResult<_>>()?;
    match parts.as_slice() {
        [name] => Ok(name.clone()),
        [schema, name] if schema == "public" => Ok(name.clone()),
        _ => Err(SqlError::new(
            sqlstate::UNDEFINED_TABLE,
            format!("relation \"{name}\" does not exist"),
        )),
    }
}

/// Maps a SQL type name to our types.
pub fn data_type(data_type: &ast::DataType) -> SqlResult<DataType> {
    use ast::DataType as T;
    Ok(match data_type {
        T::Int2(_) | T::SmallInt(_) => DataType::Int2,
        T::Int(_) | T::Int4(_) | T::Integer(_) => DataType::Int4,
        T::Int8(_) | T::BigInt(_) => DataType::Int8,
        T::Float8 | T::Float64 | T::DoublePrecision | T::Double(_) => DataType::Float8,
        T::Bool | T::Boolean => DataType::Bool,
        T::Text | T::String(_) => DataType::Text,
        T::Varchar(length) | T::CharacterVarying(length) => DataType::Varchar(match length {
            Some(ast::CharacterLength::IntegerLength { length, .. }) => {
                Some(u32::try_from(*length).map_err(|_| {
                    SqlError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "varchar length too large",
                    )
                })?)
            }
            _ => None,
        }),
        other => return Err(SqlError::unsupported(format!("type {other}"))),
    })
}

fn aggregate_function(name: &str) -> Option<AggregateFunction> {
    Some(match name {
        "count" => AggregateFunction::Count,
        "sum" => AggregateFunction::Sum,
        "min" => AggregateFunction::Min,
        "max" => AggregateFunction::Max,
        "avg" => AggregateFunction::Avg,
        _ => return None,
    })
}

fn function_name(function: &ast::Function) -> String {
    function
        .name
        .0
        .last()
        .and_then(|part| part.as_ident())
        .map(ident_name)
        .unwrap_or_default()
}

/// True if the expression calls an aggregate function outside any subquery.
fn contains_aggregate(expr: &ast::Expr) -> bool {
    use ast::Expr as E;
    match expr {
        E::Function(function) => {
            aggregate_function(&function_name(function)).is_some()
                || function_args(function).iter().any(|arg| match arg {
                    FunctionArg::Expr(e) => contains_aggregate(e),
                    FunctionArg::Star => false,
                })
        }
        E::BinaryOp { left, right, .. } => contains_aggregate(left) || contains_aggregate(right),
        E::UnaryOp { expr, .. }
        | E::Nested(expr)
        | E::IsNull(expr)
        | E::IsNotNull(expr)
        | E::Cast { expr, .. } => contains_aggregate(expr),
        _ => false,
    }
}

enum FunctionArg<'a> {
    Expr(&'a ast::Expr),
    Star,
}

fn function_args(function: &ast::Function) -> Vec<FunctionArg<'_>> {
    let ast::FunctionArguments::List(list) = &function.args else {
        return Vec::new();
    };
    list.args
        .iter()
        .map(|arg| match arg {
            ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e))
            | ast::FunctionArg::Named {
                arg: ast::FunctionArgExpr::Expr(e),
                ..
            } => FunctionArg::Expr(e),
            _ => FunctionArg::Star,
        })
        .collect()
}

impl<'a> Binder<'a> {
    pub fn new(catalog: &'a Catalog, declared_params: &[DataType]) -> Binder<'a> {
        Binder {
            catalog,
            params: declared_params.to_vec(),
            scope: None,
            grouping: None,
        }
    }

    /// Binds one statement. Parameters still untyped afterwards are text.
    pub fn bind(&mut self, statement: &Statement) -> SqlResult<Plan> {
        let plan = self.bind_statement(statement)?;
        for param in &mut self.params {
            if *param == DataType::Unknown {
                *param = DataType::Text;
            }
        }
        Ok(plan)
    }

    fn bind_statement(&mut self, statement: &Statement) -> SqlResult<Plan> {
        match statement {
            Statement::Query(query) => Ok(Plan::Select(self.bind_query(query)?)),
            Statement::Insert(insert) => self.bind_insert(insert),
            Statement::Update(update) => self.bind_update(update),
            Statement::Delete(delete) => self.bind_delete(delete),
            Statement::CreateTable(create) => self.bind_create_table(create),
            Statement::Drop {
                object_type,
                if_exists,
                names,
                ..
            } => {
                if *object_type != ast::ObjectType::Table {
                    return Err(SqlError::unsupported(format!("DROP {object_type}")));
                }
                let names = names.iter().map(object_name).collect::<SqlResult<_>>()?;
                Ok(Plan::DropTable {
                    names,
                    if_exists: *if_exists,
                })
            }
            Statement::StartTransaction { modes, .. } => {
                check_transaction_modes(modes)?;
                Ok(Plan::Transaction(TransactionControl::Begin))
            }
            Statement::Commit { .. } => Ok(Plan::Transaction(TransactionControl::Commit)),
            Statement::Rollback { savepoint, .. } => {
                if savepoint.is_some() {
                    return Err(SqlError::unsupported("ROLLBACK TO SAVEPOINT"));
                }
                Ok(Plan::Transaction(TransactionControl::Rollback))
            }
            Statement::Set(set) => bind_set(set),
            Statement::ShowVariable { variable } => {
                let name = variable
                    .iter()
                    .map(ident_name)
                    .collect::<Vec<_>>()
                    .join(" ");
                let name = match name.as_str() {
                    "transaction isolation level" => "transaction_isolation".to_string(),
                    _ => name,
                };
                Ok(Plan::Show { name })
            }
            other => {
                let text = other.to_string();
                let words: Vec<&str> = text.split_whitespace().take(2).collect();
                Err(SqlError::unsupported(format!(
                    "the statement {}",
                    words.join(" ").to_uppercase()
                )))
            }
        }
    }

    fn bind_create_table(&mut self, create: &ast::CreateTable) -> SqlResult<Plan> {
        let name = object_name(&create.name)?;
        let mut columns: Vec<ColumnDef> = Vec::new();
        let mut primary_key: Vec<usize> = Vec::new();
        for column in &create.columns {
            let column_name = ident_name(&column.name);
            if columns.iter().any(|c| c.name == column_name) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            let mut def = ColumnDef {
                name: column_name,
                data_type: data_type(&column.data_type)?,
                not_null: false,
                default: None,
            };
            for option in &column.options {
                match &option.option {
                    ast::ColumnOption::Null => {}
                    ast::ColumnOption::NotNull => def.not_null = true,
                    ast::ColumnOption::Default(expr) => def.default = Some(expr.to_string()),
                    ast::ColumnOption::PrimaryKey(_) => {
                        if !primary_key.is_empty() {
                            return Err(multiple_primary_keys(&name));
                        }
                        primary_key.push(columns.len());
                    }
                    other => return Err(SqlError::unsupported(format!("column option {other}"))),
                }
            }
            columns.push(def);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(key) => {
                    if !primary_key.is_empty() {
                        return Err(multiple_primary_keys(&name));
                    }
                    for column in &key.columns {
                        let ast::Expr::Identifier(ident) = &column.column.expr else {
                            return Err(SqlError::unsupported("a primary key on an expression"));
                        };
                        let column_name = ident_name(ident);
                        let index = columns
                            .iter()
                            .position(|c| c.name == column_name)
                            .ok_or_else(|| undefined_column(&column_name))?;
                        primary_key.push(index);
                    }
                }
                other => return Err(SqlError::unsupported(format!("table constraint {other}"))),
            }
        }
        for index in &primary_key {
            columns[*index].not_null = true;
        }
        let def = TableDef {
            name,
            columns,
            primary_key,
        };
        for column in &def.columns {
            if let Some(default) = &column.default {
                self.bind_default(default, column.data_type)?;
            }
        }
        Ok(Plan::CreateTable {
            def,
            if_not_exists: create.if_not_exists,
        })
    }

    /// Binds a column's DEFAULT (stored as SQL text) as an expression of the column's type.
    fn bind_default(&mut self, default: &str, target: DataType) -> SqlResult<Expr> {
        let dialect = sqlparser::dialect::PostgreSqlDialect {};
        let expr = sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(default)
            .and_then(|mut parser| parser.parse_expr())
            .map_err(|error| SqlError::syntax(format!("invalid DEFAULT {default}: {error}")))?;
        let saved = self.scope.take();
        let bound = self.bind_typed(&expr, target);
        self.scope = saved;
        bound
    }

    fn table_by_name(&self, name: &ast::ObjectName) -> SqlResult<Arc<Table>> {
        self.catalog.table(&object_name(name)?)
    }

    fn table_factor(&self, factor: &TableFactor) -> SqlResult<Arc<Table>> {
        match factor {
            TableFactor::Table { name, args, .. } if args.is_none() => self.table_by_name(name),
            other => Err(SqlError::unsupported(format!("FROM {other}"))),
        }
    }

    fn single_table(&self, from: &[ast::TableWithJoins]) -> SqlResult<Option<Arc<Table>>> {
        match from {
            [] => Ok(None),
            [only] if only.joins.is_empty() => self.table_factor(&only.relation).map(Some),
            _ => Err(SqlError::unsupported("a query over several tables (joins)")),
        }
    }

    fn bind_insert(&mut self, insert: &ast::Insert) -> SqlResult<Plan> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(SqlError::unsupported("INSERT into a table function"));
        };
        if insert.on.is_some() {
            return Err(SqlError::unsupported("INSERT ... ON CONFLICT"));
        }
        let table = self.table_by_name(name)?;
        let def = &table.def;
        let targets: Vec<usize> = if insert.columns.is_empty() {
            (0..def.columns.len()).collect()
        } else {
            insert
                .columns
                .iter()
                .map(|column| {
                    let column_name = column
                        .0
                        .last()
                        .and_then(|part| part.as_ident())
                        .map(ident_name)
                        .unwrap_or_default();
                    def.column_index(&column_name)
                        .ok_or_else(|| undefined_column(&column_name))
                })
                .collect::<SqlResult<_>>()?
        };
        let Some(source) = &insert.source else {
            return Err(SqlError::unsupported("INSERT without VALUES"));
        };
        let SetExpr::Values(values) = source.body.as_ref() else {
            return Err(SqlError::unsupported("INSERT ... SELECT"));
        };
        let mut rows = Vec::with_capacity(values.rows.len());
        for row in &values.rows {
            let row = &row.content;
            if row.len() != targets.len() {
                return Err(SqlError::syntax(format!(
                    "INSERT has {} expressions but {} target columns",
                    row.len(),
                    targets.len()
                )));
            }
            let mut bound: Vec<Option<Expr>> = vec![None; def.columns.len()];
            for (expr, column) in row.iter().zip(&targets) {
                let is_default = matches!(expr, ast::Expr::Identifier(i) if i.quote_style.is_none()
                        && i.value.eq_ignore_ascii_case("default"));
                if !is_default {
                    bound[*column] = Some(self.bind_typed(expr, def.columns[*column].data_type)?);
                }
            }
            let mut full = Vec::with_capacity(def.columns.len());
            for (index, value) in bound.into_iter().enumerate() {
                let column = &def.columns[index];
                full.push(match (value, &column.default) {
                    (Some(value), _) => value,
                    (None, Some(default)) => self.bind_default(default, column.data_type)?,
                    (None, None) => Expr::Literal(Value::Null),
                });
            }
            rows.push(full);
        }
        self.scope = Some(table.clone());
        let returning = self.bind_returning(insert.returning.as_deref())?;
        Ok(Plan::Insert {
            table,
            rows,
            returning,
        })
    }

    fn bind_returning(&mut self, items: Option<&[SelectItem]>) -> SqlResult<Option<Returning>> {
        let Some(items) = items else {
            return Ok(None);
        };
        let (projection, columns) = self.bind_projection(items)?;
        Ok(Some(Returning {
            projection,
            columns,
        }))
    }

    fn bind_table_read(
        &mut self,
        table: Arc<Table>,
        selection: Option<&ast::Expr>,
    ) -> SqlResult<TableRead> {
        self.scope = Some(table.clone());
        let filter = selection
            .map(|expr| self.bind_typed(expr, DataType::Bool))
            .transpose()?;
        let access = access::choose(&table, filter.as_ref());
        Ok(TableRead {
            table,
            access,
            filter,
        })
    }

    fn bind_update(&mut self, update: &ast::Update) -> SqlResult<Plan> {
        if update.from.is_some() || !update.table.joins.is_empty() {
            return Err(SqlError::unsupported("UPDATE ... FROM"));
        }
        let table = self.table_factor(&update.table.relation)?;
        let read = self.bind_table_read(table.clone(), update.selection.as_ref())?;
        let mut assignments = Vec::with_capacity(update.assignments.len());
        for assignment in &update.assignments {
            let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
                return Err(SqlError::unsupported("assigning to a tuple of columns"));
            };
            let column_name = name
                .0
                .last()
                .and_then(|part| part.as_ident())
                .map(ident_name)
                .unwrap_or_default();
            let index = table
                .def
                .column_index(&column_name)
                .ok_or_else(|| undefined_column(&column_name))?;
            let column = &table.def.columns[index];
            let is_default = matches!(&assignment.value, ast::Expr::Identifier(i)
                if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"));
            let value = match (&column.default, is_default) {
                (Some(default), true) => self.bind_default(default, column.data_type)?,
                (None, true) => Expr::Literal(Value::Null),
                _ => self.bind_typed(&assignment.value, column.data_type)?,
            };
            assignments.push((index, value));
        }
        let returning = self.bind_returning(update.returning.as_deref())?;
        Ok(Plan::Update {
            read,
            assignments,
            returning,
        })
    }

    fn bind_delete(&mut self, delete: &ast::Delete) -> SqlResult<Plan> {
        let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) =
            &delete.from;
        if delete.using.is_some() {
            return Err(SqlError::unsupported("DELETE ... USING"));
        }
        let table = self
            .single_table(from)?
            .ok_or_else(|| SqlError::syntax("DELETE needs a table"))?;
        let read = self.bind_table_read(table, delete.selection.as_ref())?;
        let returning = self.bind_returning(delete.returning.as_deref())?;
        Ok(Plan::Delete { read, returning })
    }

    fn bind_query(&mut self, query: &ast::Query) -> SqlResult<SelectPlan> {
        if query.with.is_some() {
            return Err(SqlError::unsupported("WITH"));
        }
        if !query.locks.is_empty() {
            return Err(SqlError::unsupported("SELECT ... FOR UPDATE"));
        }
        let SetExpr::Select(select) = query.body.as_ref() else {
            return Err(SqlError::unsupported(format!("the query {}", query.body)));
        };
        if select.distinct.is_some() {
            return Err(SqlError::unsupported("SELECT DISTINCT"));
        }
        let table = self.single_table(&select.from)?;
        let source = match table {
            Some(table) => Some(self.bind_table_read(table, select.selection.as_ref())?),
            None => {
                if select.selection.is_some() {
                    return Err(SqlError::unsupported("WHERE without FROM"));
                }
                None
            }
        };
        let group_by = match &select.group_by {
            ast::GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs,
            _ => return Err(SqlError::unsupported("GROUP BY ALL or with modifiers")),
        };
        let aggregated = !group_by.is_empty()
            || select.having.is_some()
            || select.projection.iter().any(|item| match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    contains_aggregate(e)
                }
                _ => false,
            });
        let mut aggregation_groups = Vec::new();
        if aggregated {
            let mut group_types = Vec::new();
            for expr in group_by {
                let (bound, data_type) = self.bind_expr(expr, None)?;
                aggregation_groups.push(bound);
                group_types.push(data_type);
            }
            self.grouping = Some(Grouping {
                group_by: group_by.clone(),
                group_types,
                aggregates: Vec::new(),
            });
        }
        let (projection, columns) = self.bind_projection(&select.projection)?;
        let having = select
            .having
            .as_ref()
            .map(|expr| self.bind_typed(expr, DataType::Bool))
            .transpose()?;
        let order_by = self.bind_order_by(query, &select.projection, &projection)?;
        let aggregation = self.grouping.take().map(|grouping| Aggregation {
            group_by: aggregation_groups,
            aggregates: grouping.aggregates,
        });
        let (limit, offset) = self.bind_limit(query)?;
        let ordered_by_key = match (&source, &aggregation) {
            (Some(read), None) => {
                order_by
                    .iter()
                    .all(|key| !key.descending && !key.nulls_first)
                    && order_by.len() <= read.table.def.primary_key.len()
                    && order_by
                        .iter()
                        .zip(&read.table.def.primary_key)
                        .all(|(key, column)| key.expr == Expr::Column(*column))
            }
            _ => order_by.is_empty(),
        };
        Ok(SelectPlan {
            source,
            aggregation,
            having,
            projection,
            columns,
            order_by,
            ordered_by_key,
            limit,
            offset,
        })
    }

    fn bind_projection(
        &mut self,
        items: &[SelectItem],
    ) -> SqlResult<(Vec<Expr>, Vec<OutputColumn>)> {
        let mut projection = Vec::new();
        let mut columns = Vec::new();
        for item in items {
            match item {
                SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                    let table = self
                        .scope
                        .clone()
                        .ok_or_else(|| SqlError::syntax("SELECT * with no tables specified"))?;
                    if self.grouping.is_some() {
                        return Err(SqlError::new(
                            sqlstate::GROUPING_ERROR,
                            "SELECT * is not allowed with GROUP BY or aggregates",
                        ));
                    }
                    for (index, column) in table.def.columns.iter().enumerate() {
                        projection.push(Expr::Column(index));
                        columns.push(OutputColumn {
                            name: column.name.clone(),
                            data_type: column.data_type,
                        });
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

    fn bind_order_by(
        &mut self,
        query: &ast::Query,
        items: &[SelectItem],
        projection: &[Expr],
    ) -> SqlResult<Vec<SortKey>> {
        let Some(order_by) = &query.order_by else {
            return Ok(Vec::new());
        };
        let ast::OrderByKind::Expressions(exprs) = &order_by.kind else {
            return Err(SqlError::unsupported("ORDER BY ALL"));
        };
        let mut keys = Vec::with_capacity(exprs.len());
        for order in exprs {
            let expr = match &order.expr {
                ast::Expr::Value(value) => match &value.value {
                    ast::Value::Number(number, _) => {
                        let position: usize = number.parse().unwrap_or(0);
                        projection
                            .get(position.wrapping_sub(1))
                            .cloned()
                            .ok_or_else(|| {
                                SqlError::new(
                                    sqlstate::UNDEFINED_COLUMN,
                                    format!("ORDER BY position {number} is not in select list"),
                                )
                            })?
                    }
                    _ => self.bind_expr(&order.expr, None)?.0,
                },
                ast::Expr::Identifier(ident) => {
                    let name = ident_name(ident);
                    let alias = items.iter().position(|item| {
                        matches!(item, SelectItem::ExprWithAlias { alias, .. }
                            if ident_name(alias) == name)
                    });
                    match alias {
                        Some(position) => projection[position].clone(),
                        None => self.bind_expr(&order.expr, None)?.0,
                    }
                }
                other => self.bind_expr(other, None)?.0,
            };
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

    fn bind_limit(&mut self, query: &ast::Query) -> SqlResult<(Option<Expr>, Option<Expr>)> {
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

    /// Binds an expression that must have type `target` (values are cast to it).
    pub fn bind_typed(&mut self, expr: &ast::Expr, target: DataType) -> SqlResult<Expr> {
        let (bound, data_type) = self.bind_expr(expr, Some(target))?;
        if data_type == target || data_type == DataType::Unknown {
            return Ok(match bound {
                Expr::Literal(value) => Expr::Literal(value.cast(target)?),
                other => other,
            });
        }
        let compatible = (data_type.is_numeric() && target.is_numeric())
            || (data_type.is_text() && target.is_text())
            || target.is_text();
        if !compatible {
            return Err(SqlError::mismatch(format!(
                "expression is of type {data_type} but {target} is expected"
            )));
        }
        Ok(match bound {
            Expr::Literal(value) => Expr::Literal(value.cast(target)?),
            other => Expr::Cast {
                expr: Box::new(other),
                to: target,
            },
        })
    }

    fn column(&self, name: &str) -> SqlResult<(Expr, DataType)> {
        let table = self.scope.as_ref().ok_or_else(|| undefined_column(name))?;
        let index = table
            .def
            .column_index(name)
            .ok_or_else(|| undefined_column(name))?;
        Ok((Expr::Column(index), table.def.columns[index].data_type))
    }

    /// Binds an expression; `expected` types literals and parameters that have no type of
    /// their own.
    pub fn bind_expr(
        &mut self,
        expr: &ast::Expr,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        if let Some(grouping) = &self.grouping {
            if let Some(position) = grouping.group_by.iter().position(|g| g == expr) {
                return Ok((Expr::Column(position), grouping.group_types[position]));
            }
        }
        use ast::Expr as E;
        match expr {
            E::Identifier(ident) => self.bind_column(&ident_name(ident)),
            E::CompoundIdentifier(parts) => {
                let column = parts.last().map(ident_name).unwrap_or_default();
                if parts.len() == 2 {
                    let qualifier = ident_name(&parts[0]);
                    let matches = self.scope.as_ref().is_some_and(|t| t.def.name == qualifier);
                    if !matches {
                        return Err(SqlError::new(
                            sqlstate::UNDEFINED_TABLE,
                            format!("missing FROM-clause entry for table \"{qualifier}\""),
                        ));
                    }
                }
                self.bind_column(&column)
            }
            E::Value(value) => self.bind_value(&value.value, expected),
            E::Nested(inner) => self.bind_expr(inner, expected),
            E::BinaryOp { left, op, right } => self.bind_binary(left, op, right),
            E::UnaryOp { op, expr } => match op {
                ast::UnaryOperator::Not => {
                    let inner = self.bind_typed(expr, DataType::Bool)?;
                    Ok((Expr::Not(Box::new(inner)), DataType::Bool))
                }
                ast::UnaryOperator::Minus => {
                    let (inner, data_type) = self.bind_expr(expr, expected)?;
                    if !data_type.is_numeric() && data_type != DataType::Unknown {
                        return Err(SqlError::mismatch(format!(
                            "operator does not exist: - {data_type}"
                        )));
                    }
                    let folded = match &inner {
                        Expr::Literal(Value::Int(v)) => Some(Value::Int(-v)),
                        Expr::Literal(Value::Float(v)) => Some(Value::Float(-v)),
                        _ => None,
                    };
                    Ok(match folded {
                        Some(value) => (Expr::Literal(value), data_type),
                        None => (Expr::Negate(Box::new(inner)), data_type),
                    })
                }
                ast::UnaryOperator::Plus => self.bind_expr(expr, expected),
                other => Err(SqlError::unsupported(format!("operator {other}"))),
            },
            E::IsNull(inner) | E::IsNotNull(inner) => {
                let (inner, _) = self.bind_expr(inner, None)?;
                Ok((
                    Expr::IsNull {
                        expr: Box::new(inner),
                        negated: matches!(expr, E::IsNotNull(_)),
                    },
                    DataType::Bool,
                ))
            }
            E::IsTrue(inner) | E::IsFalse(inner) => {
                let inner = self.bind_typed(inner, DataType::Bool)?;
                let value = Value::Bool(matches!(expr, E::IsTrue(_)));
                let compare = Expr::Binary {
                    op: BinaryOp::Equal,
                    left: Box::new(inner),
                    right: Box::new(Expr::Literal(value)),
                    data_type: DataType::Bool,
                };
                // IS TRUE is never NULL.
                Ok((
                    Expr::Function {
                        function: ScalarFunction::Coalesce,
                        args: vec![compare, Expr::Literal(Value::Bool(false))],
                    },
                    DataType::Bool,
                ))
            }
            E::Between {
                expr: inner,
                negated,
                low,
                high,
            } => {
                let low = ast::Expr::BinaryOp {
                    left: inner.clone(),
                    op: ast::BinaryOperator::GtEq,
                    right: low.clone(),
                };
                let high = ast::Expr::BinaryOp {
                    left: inner.clone(),
                    op: ast::BinaryOperator::LtEq,
                    right: high.clone(),
                };
                let both = ast::Expr::BinaryOp {
                    left: Box::new(low),
                    op: ast::BinaryOperator::And,
                    right: Box::new(high),
                };
                let (bound, _) = self.bind_expr(&both, None)?;
                Ok(if *negated {
                    (Expr::Not(Box::new(bound)), DataType::Bool)
                } else {
                    (bound, DataType::Bool)
                })
            }
            E::InList {
                expr: inner,
                list,
                negated,
            } => {
                let mut any: Option<ast::Expr> = None;
                for item in list {
                    let equal = ast::Expr::BinaryOp {
                        left: inner.clone(),
                        op: ast::BinaryOperator::Eq,
                        right: Box::new(item.clone()),
                    };
                    any = Some(match any {
                        None => equal,
                        Some(previous) => ast::Expr::BinaryOp {
                            left: Box::new(previous),
                            op: ast::BinaryOperator::Or,
                            right: Box::new(equal),
                        },
                    });
                }
                let any = any.ok_or_else(|| SqlError::syntax("empty IN list"))?;
                let (bound, _) = self.bind_expr(&any, None)?;
                Ok(if *negated {
                    (Expr::Not(Box::new(bound)), DataType::Bool)
                } else {
                    (bound, DataType::Bool)
                })
            }
            E::Like {
                negated,
                expr: inner,
                pattern,
                escape_char,
                any,
            } => {
                if escape_char.is_some() || *any {
                    return Err(SqlError::unsupported("LIKE with ESCAPE or ANY"));
                }
                let left = self.bind_typed(inner, DataType::Text)?;
                let right = self.bind_typed(pattern, DataType::Text)?;
                let op = if *negated {
                    BinaryOp::NotLike
                } else {
                    BinaryOp::Like
                };
                Ok((
                    Expr::Binary {
                        op,
                        left: Box::new(left),
                        right: Box::new(right),
                        data_type: DataType::Bool,
                    },
                    DataType::Bool,
                ))
            }
            E::Cast {
                expr: inner,
                data_type: target,
                ..
            } => {
                let target = data_type(target)?;
                let (bound, _) = self.bind_expr(inner, Some(target))?;
                Ok(match bound {
                    Expr::Literal(value) => (Expr::Literal(value.cast(target)?), target),
                    Expr::Parameter(index) if self.params[index] == DataType::Unknown => {
                        self.params[index] = target;
                        (Expr::Parameter(index), target)
                    }
                    other => (
                        Expr::Cast {
                            expr: Box::new(other),
                            to: target,
                        },
                        target,
                    ),
                })
            }
            E::TypedString(typed) => {
                let target = data_type(&typed.data_type)?;
                let text = typed.value.value.clone().into_string().unwrap_or_default();
                Ok((Expr::Literal(Value::parse(&text, target)?), target))
            }
            E::Function(function) => self.bind_function(function),
            other => Err(SqlError::unsupported(format!("the expression {other}"))),
        }
    }

    fn bind_column(&self, name: &str) -> SqlResult<(Expr, DataType)> {
        if self.grouping.is_some() {
            // Reached only when the column is not a GROUP BY expression.
            self.column(name)?;
            return Err(SqlError::new(
                sqlstate::GROUPING_ERROR,
                format!(
                    "column \"{name}\" must appear in the GROUP BY clause or be used in an \
                     aggregate function"
                ),
            ));
        }
        self.column(name)
    }

    fn bind_value(
        &mut self,
        value: &ast::Value,
        expected: Option<DataType>,
    ) -> SqlResult<(Expr, DataType)> {
        match value {
            ast::Value::Number(text, _) => {
                if let Ok(v) = text.parse::<i64>() {
                    let data_type = if i32::try_from(v).is_ok() {
                        DataType::Int4
                    } else {
                        DataType::Int8
                    };
                    return Ok((Expr::Literal(Value::Int(v)), data_type));
                }
                let v: f64 = text.parse().map_err(|_| {
                    SqlError::new(
                        sqlstate::INVALID_TEXT_REPRESENTATION,
                        format!("invalid number {text}"),
                    )
                })?;
                Ok((Expr::Literal(Value::Float(v)), DataType::Float8))
            }
            ast::Value::SingleQuotedString(text)
            | ast::Value::EscapedStringLiteral(text)
            | ast::Value::DollarQuotedString(ast::DollarQuotedString { value: text, .. }) => {
                // A quoted literal has no type of its own: it takes the expected one.
                match expected {
                    Some(target) if target != DataType::Unknown => {
                        Ok((Expr::Literal(Value::parse(text, target)?), target))
                    }
                    _ => Ok((Expr::Literal(Value::Text(text.clone())), DataType::Text)),
                }
            }
            ast::Value::Boolean(v) => Ok((Expr::Literal(Value::Bool(*v)), DataType::Bool)),
            ast::Value::Null => Ok((
                Expr::Literal(Value::Null),
                expected.unwrap_or(DataType::Unknown),
            )),
            ast::Value::Placeholder(name) => {
                let index = name
                    .strip_prefix('$')
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| (1..=65535).contains(n))
                    .ok_or_else(|| SqlError::syntax(format!("invalid parameter {name}")))?
                    - 1;
                if self.params.len() <= index {
                    self.params.resize(index + 1, DataType::Unknown);
                }
                if self.params[index] == DataType::Unknown {
                    if let Some(target) = expected {
                        self.params[index] = target;
                    }
                }
                Ok((Expr::Parameter(index), self.params[index]))
            }
            other => Err(SqlError::unsupported(format!("the literal {other}"))),
        }
    }

    fn bind_binary(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<(Expr, DataType)> {
        use ast::BinaryOperator as B;
        let op = match op {
            B::Plus => BinaryOp::Add,
            B::Minus => BinaryOp::Subtract,
            B::Multiply => BinaryOp::Multiply,
            B::Divide => BinaryOp::Divide,
            B::Modulo => BinaryOp::Modulo,
            B::Eq => BinaryOp::Equal,
            B::NotEq => BinaryOp::NotEqual,
            B::Lt => BinaryOp::Less,
            B::LtEq => BinaryOp::LessOrEqual,
            B::Gt => BinaryOp::Greater,
            B::GtEq => BinaryOp::GreaterOrEqual,
            B::And => BinaryOp::And,
            B::Or => BinaryOp::Or,
            B::StringConcat => BinaryOp::Concat,
            other => return Err(SqlError::unsupported(format!("operator {other}"))),
        };
        if matches!(op, BinaryOp::And | BinaryOp::Or) {
            let left = self.bind_typed(left, DataType::Bool)?;
            let right = self.bind_typed(right, DataType::Bool)?;
            return Ok((binary(op, left, right, DataType::Bool), DataType::Bool));
        }
        // Bind the side with a type of its own first; it types the other side.
        let (left, left_type, right, right_type) = if untyped(left) && !untyped(right) {
            let (r, rt) = self.bind_expr(right, None)?;
            let (l, lt) = self.bind_expr(left, Some(rt))?;
            (l, lt, r, rt)
        } else {
            let (l, lt) = self.bind_expr(left, None)?;
            let (r, rt) = self.bind_expr(right, Some(lt))?;
            (l, lt, r, rt)
        };
        let result_type = result_type(op, left_type, right_type)?;
        Ok((binary(op, left, right, result_type), result_type))
    }

    fn bind_function(&mut self, function: &ast::Function) -> SqlResult<(Expr, DataType)> {
        let name = function_name(function);
        let args = function_args(function);
        if let Some(aggregate) = aggregate_function(&name) {
            return self.bind_aggregate(aggregate, &args, function);
        }
        let mut bound = Vec::with_capacity(args.len());
        let mut types = Vec::with_capacity(args.len());
        for arg in &args {
            let FunctionArg::Expr(arg) = arg else {
                return Err(SqlError::syntax(format!(
                    "{name}(*) is not a function call"
                )));
            };
            let (expr, data_type) = self.bind_expr(arg, None)?;
            bound.push(expr);
            types.push(data_type);
        }
        let (scalar, data_type, arity) = match name.as_str() {
            "lower" => (ScalarFunction::Lower, DataType::Text, Some(1)),
            "upper" => (ScalarFunction::Upper, DataType::Text, Some(1)),
            "length" | "char_length" => (ScalarFunction::Length, DataType::Int4, Some(1)),
            "abs" => (
                ScalarFunction::Abs,
                types.first().copied().unwrap_or(DataType::Unknown),
                Some(1),
            ),
            "coalesce" => (
                ScalarFunction::Coalesce,
                types
                    .iter()
                    .copied()
                    .find(|t| *t != DataType::Unknown)
                    .unwrap_or(DataType::Unknown),
                None,
            ),
            "version" => (ScalarFunction::Version, DataType::Text, Some(0)),
            "current_database" => (ScalarFunction::CurrentDatabase, DataType::Text, Some(0)),
            "current_schema" => (ScalarFunction::CurrentSchema, DataType::Text, Some(0)),
            "current_user" | "session_user" | "user" => {
                (ScalarFunction::CurrentUser, DataType::Text, Some(0))
            }
            _ => {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {name} does not exist"),
                ))
            }
        };
        if arity.is_some_and(|arity| arity != bound.len()) {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!(
                    "function {name} with {} arguments does not exist",
                    bound.len()
                ),
            ));
        }
        Ok((
            Expr::Function {
                function: scalar,
                args: bound,
            },
            data_type,
        ))
    }

    fn bind_aggregate(
        &mut self,
        aggregate: AggregateFunction,
        args: &[FunctionArg],
        function: &ast::Function,
    ) -> SqlResult<(Expr, DataType)> {
        if let ast::FunctionArguments::List(list) = &function.args {
            if list.duplicate_treatment.is_some() {
                return Err(SqlError::unsupported("DISTINCT in aggregates"));
            }
        }
        let Some(mut grouping) = self.grouping.take() else {
            return Err(SqlError::new(
                sqlstate::GROUPING_ERROR,
                "aggregate functions are not allowed here",
            ));
        };
        let call = match (aggregate, args) {
            (AggregateFunction::Count, [FunctionArg::Star]) => Ok(AggregateCall {
                function: AggregateFunction::CountStar,
                arg: None,
                data_type: DataType::Int8,
            }),
            (aggregate, [FunctionArg::Expr(arg)]) => {
                self.bind_expr(arg, None).and_then(|(arg, arg_type)| {
                    let data_type = match aggregate {
                        AggregateFunction::Count | AggregateFunction::CountStar => DataType::Int8,
                        AggregateFunction::Sum if arg_type.is_integer() => DataType::Int8,
                        AggregateFunction::Sum | AggregateFunction::Avg
                            if arg_type.is_numeric() =>
                        {
                            DataType::Float8
                        }
                        AggregateFunction::Min | AggregateFunction::Max => arg_type,
                        _ => {
                            return Err(SqlError::new(
                                sqlstate::UNDEFINED_FUNCTION,
                                format!("function {}({arg_type}) does not exist", function.name),
                            ))
                        }
                    };
                    Ok(AggregateCall {
                        function: aggregate,
                        arg: Some(arg),
                        data_type,
                    })
                })
            }
            _ => Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {function} does not exist"),
            )),
        };
        let call = match call {
            Ok(call) => call,
            Err(error) => {
                self.grouping = Some(grouping);
                return Err(error);
            }
        };
        let data_type = call.data_type;
        let position = grouping.group_by.len() + grouping.aggregates.len();
        grouping.aggregates.push(call);
        self.grouping = Some(grouping);
        Ok((Expr::Column(position), data_type))
    }
}

fn binary(op: BinaryOp, left: Expr, right: Expr, data_type: DataType) -> Expr {
    Expr::Binary {
        op,
        left: Box::new(left),
        right: Box::new(right),
        data_type,
    }
}

/// Literals and parameters that take their type from the other operand.
fn untyped(expr: &ast::Expr) -> bool {
    match expr {
        ast::Expr::Value(value) => matches!(
            value.value,
            ast::Value::SingleQuotedString(_) | ast::Value::Null | ast::Value::Placeholder(_)
        ),
        ast::Expr::Nested(inner) => untyped(inner),
        _ => false,
    }
}

fn result_type(op: BinaryOp, left: DataType, right: DataType) -> SqlResult<DataType> {
    let known = |t: DataType| {
        if t == DataType::Unknown {
            None
        } else {
            Some(t)
        }
    };
    if op.is_comparison() {
        if let (Some(l), Some(r)) = (known(left), known(right)) {
            let comparable =
                (l.is_numeric() && r.is_numeric()) || (l.is_text() && r.is_text()) || l == r;
            if !comparable {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("operator does not exist: {l} = {r}"),
                ));
            }
        }
        return Ok(DataType::Bool);
    }
    if op == BinaryOp::Concat {
        return Ok(DataType::Text);
    }
    let (l, r) = (known(left).unwrap_or(right), known(right).unwrap_or(left));
    if l.is_integer() && r.is_integer() {
        Ok(l.wider_integer(r))
    } else if l.is_numeric() && r.is_numeric() {
        Ok(DataType::Float8)
    } else if l == DataType::Unknown && r == DataType::Unknown {
        Ok(DataType::Unknown)
    } else {
        Err(SqlError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!("operator does not exist: {l} {op:?} {r}"),
        ))
    }
}

/// The column name PostgreSQL gives an unnamed select item.
fn output_name(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Identifier(ident) => ident_name(ident),
        ast::Expr::CompoundIdentifier(parts) => parts.last().map(ident_name).unwrap_or_default(),
        ast::Expr::Function(function) => function_name(function),
        ast::Expr::Cast { expr, .. } | ast::Expr::Nested(expr) => output_name(expr),
        _ => "?column?".into(),
    }
}

/// Result columns never have an unknown type: PostgreSQL reports `text`.
fn output_type(data_type: DataType) -> DataType {
    match data_type {
        DataType::Unknown => DataType::Text,
        other => other,
    }
}

fn undefined_column(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_COLUMN,
        format!("column \"{name}\" does not exist"),
    )
}

fn multiple_primary_keys(table: &str) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_TABLE_DEFINITION,
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

fn check_transaction_modes(modes: &[ast::TransactionMode]) -> SqlResult<()> {
    for mode in modes {
        if let ast::TransactionMode::IsolationLevel(ast::TransactionIsolationLevel::Serializable) =
            mode
        {
            return Err(SqlError::unsupported(
                "SERIALIZABLE isolation (the engine provides snapshot isolation: REPEATABLE \
                 READ)",
            ));
        }
    }
    Ok(())
}

fn set_value(expr: &ast::Expr) -> String {
    match expr {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::SingleQuotedString(text) => text.clone(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(ident) => ident.value.clone(),
        other => other.to_string(),
    }
}

fn bind_set(set: &ast::Set) -> SqlResult<Plan> {
    match set {
        ast::Set::SingleAssignment {
            variable, values, ..
        } => Ok(Plan::Set {
            name: variable.to_string().to_lowercase(),
            value: values.iter().map(set_value).collect::<Vec<_>>().join(", "),
        }),
        ast::Set::SetTimeZone { value, .. } => Ok(Plan::Set {
            name: "timezone".into(),
            value: set_value(value),
        }),
        ast::Set::SetTransaction { modes, .. } => {
            check_transaction_modes(modes)?;
            Ok(Plan::NoOp { tag: "SET" })
        }
        ast::Set::SetNames { .. } | ast::Set::SetNamesDefault {} => Ok(Plan::NoOp { tag: "SET" }),
        other => Err(SqlError::unsupported(format!("{other}"))),
    }
}
