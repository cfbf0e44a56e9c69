//! The binder: sqlparser's AST to a `Plan`, against the catalog. Statements and DML here;
//! SELECT in `query`, expressions in `expr`, DDL and session statements in `ddl`.

mod array;
mod cursor;
mod ddl;
mod enum_type;
mod expr;
mod from;
mod functions;
mod json;
mod query;
mod scope;
mod sequence;
mod system;
mod window;
mod write;

pub use write::CONFLICT_PREDICATE;

pub(crate) use ddl::unique_key_of;

use cursor::fetch_count;
use ddl::{bind_set, check_transaction_modes};

/// The variable a SET CONSTRAINTS statement is carried in from the session's parser: a SET
/// of a name no SQL text can write (an unquoted identifier with spaces), followed by
/// " IMMEDIATE" or " DEFERRED".
pub(crate) const SET_CONSTRAINTS: &str = "SET CONSTRAINTS";
use scope::Scope;

use std::sync::Arc;

use sqlparser::ast::{self, SelectItem, SetExpr, Statement, TableFactor};

use crate::catalog::{Catalog, Table};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::access;
use crate::plan::expr::Expr;
use crate::plan::{AggregateCall, Plan, Returning, TableRead, TransactionControl};
use crate::types::{DataType, Value};

/// State of binding the parts of a SELECT that see groups instead of rows.
struct Grouping {
    group_by: Vec<ast::Expr>,
    group_types: Vec<DataType>,
    aggregates: Vec<AggregateCall>,
    /// (row position, group key index) of the grouped plain columns, however a reference
    /// to them is written; the columns of a table whose primary key is grouped are keys too.
    columns: Vec<(usize, usize)>,
}

pub struct Binder<'a> {
    catalog: &'a Catalog,
    /// The type of each parameter: declared by the client, else inferred, else text.
    pub params: Vec<DataType>,
    /// The FROM list whose row expressions read (None: no FROM).
    scope: Option<Scope>,
    grouping: Option<Grouping>,
    /// Enclosing query levels of a subquery being bound, innermost last.
    outer: Vec<OuterLevel>,
    /// Per subquery level being bound: whether it reads an enclosing level's columns.
    correlated: Vec<bool>,
    /// Whether the derived table bound last read the FROM items before it (a set function
    /// in FROM is a LATERAL item only then).
    derived_correlated: bool,
    /// The WITH queries in view, outermost first (a later one hides an earlier one), each
    /// with whether its WITH was RECURSIVE.
    ctes: Vec<(ast::Cte, bool)>,
    /// The work tables of the recursive WITH queries whose recursive part is being bound:
    /// (name, work table id, columns), innermost last.
    work_tables: Vec<WorkTableRef>,
    /// The next work table id.
    next_work_table: usize,
    /// The work tables a reference was bound to.
    work_tables_read: Vec<usize>,
    /// The user tables, views and sequences named while CREATE VIEW binds its query (the
    /// view's dependencies); None otherwise.
    relations_read: Option<Vec<String>>,
    /// The views being expanded, outermost first (a view that reads itself is an error).
    views: Vec<String>,
    /// Window calls of the SELECT list / ORDER BY being bound (None: not allowed here).
    windows: Option<Vec<crate::plan::WindowCall>>,
    /// Set-returning calls of the SELECT list being bound (None: not allowed here).
    set_calls: Option<Vec<crate::plan::SetCall>>,
    /// A lock the next query bound inherits (FOR UPDATE of a derived table or view locks
    /// the tables inside it).
    inherited_lock: Option<ast::LockClause>,
    /// A locking clause was bound somewhere in the statement (a locking subquery makes the
    /// statement a writing one).
    saw_locks: bool,
    /// The FROM list being bound passed a lock into a derived table or view.
    locked_derived: bool,
    /// The snapshot the statement will read with, when it is older than the statement
    /// (a REPEATABLE READ block's): reads leave out the indexes it may not read through
    /// (`Table::index_ready`). None: a snapshot taken after binding, newer than every index.
    snapshot: Option<u64>,
    /// The newest `Table::index_ready` of the tables read: a snapshot older than it plans
    /// differently (`Prepared` binds again for one).
    pub newest_index_ready: u64,
}

/// An enclosing query level: its FROM list, and whether it is grouped (its rows are then
/// groups, which outer references cannot read yet).
struct OuterLevel {
    scope: Option<Scope>,
    grouped: bool,
}

/// A recursive WITH query's work table while its step binds: (name, id, columns).
type WorkTableRef = (String, usize, Vec<(String, DataType)>);

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
        // One-dimensional arrays of text and integers (the declared size is not enforced,
        // as in PostgreSQL; varchar(n)[] and char(n)[] elements are text).
        T::Array(ast::ArrayElemTypeDef::SquareBracket(element, _)) => {
            match self::data_type(element)? {
                DataType::Text | DataType::Varchar(_) | DataType::Char(_) => DataType::TextArray,
                DataType::Int2 => DataType::Int2Array,
                DataType::Int4 => DataType::Int4Array,
                DataType::Int8 => DataType::Int8Array,
                other => return Err(SqlError::unsupported(format!("type {other}[]"))),
            }
        }
        other => {
            return functions::data_type(other)
                .unwrap_or_else(|| Err(SqlError::unsupported(format!("type {other}"))))
        }
    })
}

/// Maps a SQL type name to our types, the database's enum types included (a name that is no
/// type at all is 42704, as in PostgreSQL).
pub fn resolve_type(catalog: &Catalog, ast_type: &ast::DataType) -> SqlResult<DataType> {
    use crate::catalog::enum_type::undefined_type;
    let result = data_type(ast_type);
    let ast::DataType::Custom(name, modifiers) = ast_type else {
        return result;
    };
    if result.is_ok() || !modifiers.is_empty() {
        return result;
    }
    let name = object_name(name).map_err(|_| undefined_type(name))?;
    match catalog.enum_type(&name) {
        Some(enum_type) => Ok(DataType::Enum(enum_type.oid)),
        None if crate::system::type_oid_by_name(&name).is_some() => result,
        None => Err(undefined_type(&name)),
    }
}

impl<'a> Binder<'a> {
    pub fn new(catalog: &'a Catalog, declared_params: &[DataType]) -> Binder<'a> {
        Binder {
            catalog,
            params: declared_params.to_vec(),
            scope: None,
            grouping: None,
            outer: Vec::new(),
            correlated: Vec::new(),
            derived_correlated: false,
            ctes: Vec::new(),
            work_tables: Vec::new(),
            next_work_table: 0,
            work_tables_read: Vec::new(),
            relations_read: None,
            views: Vec::new(),
            windows: None,
            set_calls: None,
            inherited_lock: None,
            saw_locks: false,
            locked_derived: false,
            snapshot: None,
            newest_index_ready: 0,
        }
    }

    /// Plans reads for a statement that reads with `snapshot` (see `Binder::snapshot`).
    pub fn for_snapshot(mut self, snapshot: Option<u64>) -> Binder<'a> {
        self.snapshot = snapshot;
        self
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
            Statement::Explain {
                statement, analyze, ..
            } => {
                let Statement::Query(query) = statement.as_ref() else {
                    return Err(SqlError::unsupported(
                        "EXPLAIN of a statement other than a query",
                    ));
                };
                if *analyze {
                    return Err(SqlError::unsupported("EXPLAIN ANALYZE"));
                }
                Ok(Plan::Explain(self.bind_query(query)?))
            }
            Statement::Insert(insert) => self.bind_insert(insert),
            Statement::Update(update) => self.bind_update(update),
            Statement::Delete(delete) => self.bind_delete(delete),
            Statement::CreateTable(create) => self.bind_create_table(create),
            Statement::CreateIndex(create) => self.bind_create_index(create),
            Statement::CreateSequence {
                temporary: false,
                if_not_exists,
                name,
                data_type,
                sequence_options,
                owned_by,
            } => self.bind_create_sequence(
                *if_not_exists,
                name,
                data_type.as_ref(),
                sequence_options,
                owned_by.as_ref(),
            ),
            Statement::AlterTable(alter) => self.bind_alter_table(alter),
            Statement::AlterIndex { name, operation } => self.bind_alter_index(name, operation),
            Statement::CreateView(create) => self.bind_create_view(create),
            Statement::CreateType {
                name,
                representation,
            } => self.bind_create_type(name, representation.as_ref()),
            Statement::AlterType(alter) => self.bind_alter_type(alter),
            // One role owns every object: a change of owner changes nothing.
            Statement::AlterSchema(alter)
                if alter
                    .operations
                    .iter()
                    .all(|op| matches!(op, ast::AlterSchemaOperation::OwnerTo { .. })) =>
            {
                let schema = object_name(&alter.name)?;
                if schema != crate::system::PUBLIC_SCHEMA && !alter.if_exists {
                    return Err(SqlError::new(
                        sqlstate::INVALID_SCHEMA_NAME,
                        format!("schema \"{schema}\" does not exist"),
                    ));
                }
                Ok(Plan::NoOp {
                    tag: "ALTER SCHEMA",
                })
            }
            Statement::Lock(lock) => {
                use ast::LockTableMode as M;
                let tables = lock
                    .tables
                    .iter()
                    .map(|target| {
                        let name = object_name(&target.name)?;
                        self.catalog.table(&name)?;
                        Ok(name)
                    })
                    .collect::<SqlResult<_>>()?;
                let exclusive = !matches!(
                    lock.lock_mode,
                    Some(M::AccessShare | M::RowShare | M::RowExclusive)
                );
                Ok(Plan::LockTables { tables, exclusive })
            }
            Statement::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => Ok(Plan::CreateDatabase {
                name: object_name(db_name)?,
                if_not_exists: *if_not_exists,
            }),
            Statement::Truncate(truncate) => self.bind_truncate(truncate),
            Statement::Drop {
                object_type,
                if_exists,
                names,
                cascade,
                temporary,
                ..
            } => {
                let cascade = *cascade;
                let names = names.iter().map(object_name).collect::<SqlResult<_>>()?;
                let if_exists = *if_exists;
                match object_type {
                    ast::ObjectType::Table => Ok(Plan::DropTable {
                        names,
                        if_exists,
                        cascade,
                    }),
                    ast::ObjectType::Index => Ok(Plan::DropIndex { names, if_exists }),
                    ast::ObjectType::Sequence => Ok(Plan::DropSequence { names, if_exists }),
                    ast::ObjectType::View => Ok(Plan::DropView { names, if_exists }),
                    ast::ObjectType::Type => Ok(Plan::DropEnum {
                        names,
                        if_exists,
                        cascade,
                    }),
                    ast::ObjectType::Database => match names.as_slice() {
                        // PostgreSQL's DROP DATABASE takes no CASCADE.
                        _ if cascade => {
                            Err(SqlError::syntax("syntax error at or near \"CASCADE\""))
                        }
                        // WITH (FORCE) comes as `temporary` (`session::database`).
                        [name] => Ok(Plan::DropDatabase {
                            name: name.clone(),
                            if_exists,
                            force: *temporary,
                        }),
                        _ => Err(SqlError::syntax("DROP DATABASE drops one database")),
                    },
                    other => Err(SqlError::unsupported(format!("DROP {other}"))),
                }
            }
            Statement::StartTransaction { modes, .. } => {
                let isolation = check_transaction_modes(modes)?;
                Ok(Plan::Transaction(TransactionControl::Begin(isolation)))
            }
            Statement::Commit { .. } => Ok(Plan::Transaction(TransactionControl::Commit)),
            Statement::Rollback { savepoint, .. } => Ok(Plan::Transaction(match savepoint {
                Some(name) => TransactionControl::RollbackTo(ident_name(name)),
                None => TransactionControl::Rollback,
            })),
            Statement::Savepoint { name } => Ok(Plan::Transaction(TransactionControl::Savepoint(
                ident_name(name),
            ))),
            Statement::ReleaseSavepoint { name } => Ok(Plan::Transaction(
                TransactionControl::Release(ident_name(name)),
            )),
            Statement::Prepare {
                name,
                data_types,
                statement,
            } => Ok(Plan::Prepare {
                name: ident_name(name),
                declared: data_types
                    .iter()
                    .map(|t| resolve_type(self.catalog, t))
                    .collect::<SqlResult<_>>()?,
                statement: statement.clone(),
            }),
            Statement::Execute {
                name: Some(name),
                parameters,
                immediate: false,
                into,
                using,
                output: false,
                default: false,
                ..
            } if into.is_empty() && using.is_empty() => Ok(Plan::Execute {
                name: object_name(name)?,
                arguments: parameters.clone(),
            }),
            Statement::Declare { stmts } => self.bind_declare(stmts),
            Statement::Fetch {
                name,
                direction,
                into: None,
                ..
            } => Ok(Plan::Fetch {
                name: ident_name(name),
                count: fetch_count(direction)?,
            }),
            Statement::Close { cursor } => Ok(Plan::CloseCursor {
                name: match cursor {
                    ast::CloseCursor::All => None,
                    ast::CloseCursor::Specific { name } => Some(ident_name(name)),
                },
            }),
            Statement::Deallocate { name, .. } => Ok(Plan::Deallocate {
                name: (!(name.quote_style.is_none() && name.value.eq_ignore_ascii_case("all")))
                    .then(|| ident_name(name)),
            }),
            // See session::maintenance_statement.
            Statement::Vacuum(_) => Ok(Plan::NoOp { tag: "VACUUM" }),
            // sqlparser's own forms (`ANALYZE TABLE t`, NOSCAN, ...) are not PostgreSQL's.
            Statement::Analyze(analyze) if analyze.table_name.is_some() => {
                Err(SqlError::syntax(format!("syntax error in \"{analyze}\"")))
            }
            Statement::Analyze(analyze) => {
                let mut tables = Vec::new();
                // See session::maintenance_statement for the form of the list.
                for item in analyze.partitions.iter().flatten() {
                    let (name, columns) = match item {
                        ast::Expr::Tuple(item) => (&item[0], &item[1..]),
                        name => (name, &[][..]),
                    };
                    let ast::Expr::CompoundIdentifier(parts) = name else {
                        return Err(SqlError::syntax(format!("syntax error at \"{name}\"")));
                    };
                    let name = ast::ObjectName(
                        (parts.iter().cloned())
                            .map(ast::ObjectNamePart::Identifier)
                            .collect(),
                    );
                    let table = self.catalog.table(&object_name(&name)?)?;
                    for column in columns {
                        let ast::Expr::Identifier(column) = column else {
                            continue;
                        };
                        let column = ident_name(column);
                        if table.def.column_index(&column).is_none() {
                            return Err(SqlError::new(
                                sqlstate::UNDEFINED_COLUMN,
                                format!(
                                    "column \"{column}\" of relation \"{}\" does not exist",
                                    table.def.name
                                ),
                            ));
                        }
                    }
                    tables.push(table.def.name.clone());
                }
                Ok(Plan::Analyze {
                    tables,
                    tag: if analyze.has_table_keyword {
                        "VACUUM"
                    } else {
                        "ANALYZE"
                    },
                })
            }
            Statement::Set(ast::Set::SingleAssignment {
                variable, values, ..
            }) if variable.to_string().starts_with(SET_CONSTRAINTS) => {
                let deferred = variable.to_string().ends_with("DEFERRED");
                self.bind_set_constraints(values, deferred)
            }
            Statement::Set(set) => bind_set(set),
            Statement::Reset(reset) => Ok(Plan::Reset {
                name: match &reset.reset {
                    ast::Reset::ALL => None,
                    ast::Reset::ConfigurationParameter(name) => {
                        Some(name.to_string().to_ascii_lowercase())
                    }
                    ast::Reset::SessionAuthorization => Some("session_authorization".into()),
                },
            }),
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
            _ => Err(SqlError::unsupported("DELETE over several tables")),
        }
    }

    fn bind_insert(&mut self, insert: &ast::Insert) -> SqlResult<Plan> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(SqlError::unsupported("INSERT into a table function"));
        };
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
        // INSERT ... DEFAULT VALUES: one row of defaults.
        let no_values: [&[ast::Expr]; 1] = [&[]];
        let value_rows: Vec<&[ast::Expr]> = match &insert.source {
            None => no_values.to_vec(),
            Some(source) => match source.body.as_ref() {
                SetExpr::Values(values) => {
                    values.rows.iter().map(|r| r.content.as_slice()).collect()
                }
                _ => Vec::new(),
            },
        };
        if let Some(source) = insert
            .source
            .as_ref()
            .filter(|source| !matches!(source.body.as_ref(), SetExpr::Values(_)))
        {
            let implicit = insert.columns.is_empty();
            return self.bind_insert_select(
                table,
                targets,
                implicit,
                source,
                insert.returning.as_deref(),
                insert.on.as_ref(),
            );
        };
        let mut rows = Vec::with_capacity(value_rows.len());
        let mut sequences = self.sequence_fills(&table);
        for row in value_rows {
            // As PostgreSQL: without a column list, the values fill the first columns and
            // the rest take their defaults.
            if row.len() > targets.len() {
                return Err(SqlError::syntax(
                    "INSERT has more expressions than target columns",
                ));
            }
            if row.len() < targets.len() && !insert.columns.is_empty() {
                return Err(SqlError::syntax(
                    "INSERT has more target columns than expressions",
                ));
            }
            let mut bound: Vec<Option<Expr>> = vec![None; def.columns.len()];
            for (expr, column) in row.iter().zip(&targets) {
                let is_default = matches!(expr, ast::Expr::Identifier(i) if i.quote_style.is_none()
                        && i.value.eq_ignore_ascii_case("default"));
                if !is_default {
                    self.check_identity_value(def, *column)?;
                    bound[*column] = Some(self.bind_typed(expr, def.columns[*column].data_type)?);
                }
            }
            for fill in &mut sequences {
                fill.rows.push(bound[fill.column].is_none());
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
        let on_conflict = self.bind_on_conflict(&table, insert.on.as_ref())?;
        self.scope = Some(Scope::table(&table));
        let returning = self.bind_returning(insert.returning.as_deref())?;
        Ok(Plan::Insert {
            table,
            rows,
            returning,
            sequences,
            on_conflict,
        })
    }

    /// INSERT ... SELECT: the query's columns are assigned to `targets` (cast as an
    /// assignment casts); the other columns get their defaults.
    fn bind_insert_select(
        &mut self,
        table: Arc<Table>,
        mut targets: Vec<usize>,
        implicit: bool,
        source: &ast::Query,
        returning: Option<&[SelectItem]>,
        on: Option<&ast::OnInsert>,
    ) -> SqlResult<Plan> {
        let query = self.bind_query(source)?;
        if implicit && query.columns.len() < targets.len() {
            // Without a column list, the query fills the first columns (as in PostgreSQL).
            targets.truncate(query.columns.len());
        }
        if query.columns.len() != targets.len() {
            let more = if query.columns.len() > targets.len() {
                "more expressions than target columns"
            } else {
                "more target columns than expressions"
            };
            return Err(SqlError::syntax(format!("INSERT has {more}")));
        }
        for (column, target) in query.columns.iter().zip(&targets) {
            let target_type = table.def.columns[*target].data_type;
            let from = column.data_type;
            let compatible = from == target_type
                || (from.is_numeric() && target_type.is_numeric())
                || (from.is_text() && target_type.is_text())
                || target_type.is_text()
                || from == DataType::Unknown
                || from.is_text();
            if !compatible {
                return Err(SqlError::mismatch(format!(
                    "column \"{}\" is of type {target_type} but expression is of type {from}",
                    table.def.columns[*target].name
                )));
            }
        }
        for target in &targets {
            self.check_identity_value(&table.def, *target)?;
        }
        let mut defaults = Vec::with_capacity(table.def.columns.len());
        for (position, column) in table.def.columns.iter().enumerate() {
            // An identity column not given takes its sequence's next value per row.
            let default = match (&column.default, column.identity) {
                (Some(default), _) => Some(default.clone()),
                (None, Some(_)) => Some(table.def.nextval_text(position)),
                (None, None) => None,
            };
            defaults.push(match default {
                Some(default) => self.bind_default(&default, column.data_type)?,
                None => Expr::Literal(Value::Null),
            });
        }
        let on_conflict = self.bind_on_conflict(&table, on)?;
        self.scope = Some(Scope::table(&table));
        let returning = self.bind_returning(returning)?;
        Ok(Plan::InsertSelect(Box::new(crate::plan::InsertSelect {
            table,
            query,
            targets,
            defaults,
            returning,
            on_conflict,
        })))
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
        self.scope = Some(Scope::table(&table));
        let filter = selection
            .map(|expr| self.bind_typed(expr, DataType::Bool))
            .transpose()?;
        let index_terms = self.index_bindings(&table);
        let access = access::choose(&table, filter.as_ref(), &index_terms);
        Ok(TableRead {
            index_terms,
            columns: None,
            table,
            access,
            filter,
            descending: false,
            index_order: false,
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
}

fn undefined_column(name: &str) -> SqlError {
    SqlError::new(
        sqlstate::UNDEFINED_COLUMN,
        format!("column \"{name}\" does not exist"),
    )
}
