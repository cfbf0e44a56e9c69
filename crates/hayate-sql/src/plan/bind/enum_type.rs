//! Binding of enum types: CREATE TYPE ... AS ENUM and ALTER TYPE, and the expressions that
//! make a value of an enum (a label, checked) or order by one (its sort order; an array by
//! its elements), which casts, assignments, comparisons and ORDER BY call (`types::enums`).

use sqlparser::ast;

use super::{ident_name, object_name, Binder};
use crate::catalog::enum_type::{undefined_type, EnumChange};
use crate::error::{SqlError, SqlResult};
use crate::plan::expr::{Expr, ScalarFunction};
use crate::plan::Plan;
use crate::types::enums::{EnumType, LabelPlace};
use crate::types::{DataType, Value};

impl Binder<'_> {
    /// CREATE TYPE name AS ENUM (...): the one kind of type Hayate creates.
    pub(super) fn bind_create_type(
        &mut self,
        name: &ast::ObjectName,
        representation: Option<&ast::UserDefinedTypeRepresentation>,
    ) -> SqlResult<Plan> {
        let Some(ast::UserDefinedTypeRepresentation::Enum { labels }) = representation else {
            return Err(SqlError::unsupported("CREATE TYPE other than AS ENUM"));
        };
        let labels: Vec<String> = labels.iter().map(|label| label.value.clone()).collect();
        Ok(Plan::CreateEnum(EnumType::new(
            object_name(name)?,
            &labels,
        )?))
    }

    /// ALTER TYPE of an enum type. OWNER TO comes here as a rename to its own name
    /// (`session::statement`): one role owns everything, so it changes nothing.
    pub(super) fn bind_alter_type(&mut self, alter: &ast::AlterType) -> SqlResult<Plan> {
        use ast::AlterTypeOperation as Op;
        let name = object_name(&alter.name)?;
        let change = match &alter.operation {
            Op::Rename(rename) if ident_name(&rename.new_name) == name => {
                if self.catalog.enum_type(&name).is_none() {
                    return Err(undefined_type(&name));
                }
                return Ok(Plan::NoOp { tag: "ALTER TYPE" });
            }
            Op::Rename(rename) => EnumChange::Rename(ident_name(&rename.new_name)),
            Op::AddValue(add) => EnumChange::AddValue {
                label: add.value.value.clone(),
                place: match &add.position {
                    None => LabelPlace::Last,
                    Some(ast::AlterTypeAddValuePosition::Before(label)) => {
                        LabelPlace::Before(label.value.clone())
                    }
                    Some(ast::AlterTypeAddValuePosition::After(label)) => {
                        LabelPlace::After(label.value.clone())
                    }
                },
                if_not_exists: add.if_not_exists,
            },
            Op::RenameValue(rename) => EnumChange::RenameValue {
                from: rename.from.value.clone(),
                to: rename.to.value.clone(),
            },
        };
        Ok(Plan::AlterEnum { name, change })
    }

    /// A type's name as PostgreSQL writes it, an enum's included.
    pub(super) fn type_name(&self, data_type: DataType) -> String {
        match data_type {
            DataType::Enum(oid) => self
                .catalog
                .enum_type_by_oid(oid)
                .map_or_else(|| data_type.to_string(), |t| t.name.clone()),
            other => other.to_string(),
        }
    }

    /// `expr` as a value of `target`: for an enum, checked to be one of its labels (a literal
    /// now, anything else when it runs); any other type as it is.
    pub(super) fn enum_check(&self, expr: Expr, target: DataType) -> SqlResult<Expr> {
        let DataType::Enum(oid) = target else {
            return Ok(expr);
        };
        let enum_type = self.catalog.existing_enum_type(oid)?;
        Ok(match expr {
            Expr::Literal(Value::Text(text)) => {
                enum_type.check(&text)?;
                Expr::Literal(Value::Text(text))
            }
            Expr::Literal(Value::Null) | Expr::Enum { order: false, .. } => expr,
            other => Expr::Enum {
                expr: Box::new(other),
                enum_type,
                order: false,
            },
        })
    }

    /// What comparisons and sorting order `expr` of type `data_type` by: an enum value's
    /// sort order, an array's element-by-element key (`ScalarFunction::ArrayOrder`), any
    /// other value itself.
    pub(super) fn order_key(&self, expr: Expr, data_type: DataType) -> SqlResult<Expr> {
        if data_type.is_array() {
            let integers = data_type != DataType::TextArray;
            let key = Expr::Function {
                function: ScalarFunction::ArrayOrder { integers },
                args: vec![expr],
            };
            // A constant's key is computed once, not for every row it is compared with.
            return Ok(match &key {
                Expr::Function { args, .. } if matches!(args[0], Expr::Literal(_)) => {
                    Expr::Literal(key.eval(&[], &crate::plan::expr::EvalContext::constant())?)
                }
                _ => key,
            });
        }
        let DataType::Enum(oid) = data_type else {
            return Ok(expr);
        };
        let enum_type = self.catalog.existing_enum_type(oid)?;
        Ok(match expr {
            Expr::Literal(Value::Text(text)) => {
                Expr::Literal(Value::Float4(enum_type.sort_order(&text)?))
            }
            Expr::Literal(Value::Null) => expr,
            Expr::Enum {
                expr, order: false, ..
            } => Expr::Enum {
                expr,
                enum_type,
                order: true,
            },
            other => Expr::Enum {
                expr: Box::new(other),
                enum_type,
                order: true,
            },
        })
    }
}
