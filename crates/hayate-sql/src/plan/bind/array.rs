//! Binding of the array operators on array values (text in the array text form, typed by
//! their elements): `@>` and `<@` (containment), `&&` (overlap) and `||` (concatenation
//! with an array or an element), as PostgreSQL resolves them for arrays.

use sqlparser::ast;

use super::expr::untyped;
use super::Binder;
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::plan::expr::{Expr, ScalarFunction};
use crate::types::DataType;

impl Binder<'_> {
    /// `left op right` for @>, <@ and && when the left operand (the right one for an
    /// untyped left) is an array; None for another operator or operands that are no arrays
    /// (nothing is bound then).
    pub(super) fn bind_array_operator(
        &mut self,
        left: &ast::Expr,
        op: &ast::BinaryOperator,
        right: &ast::Expr,
    ) -> SqlResult<Option<(Expr, DataType)>> {
        use ast::BinaryOperator as B;
        let function = match op {
            B::AtArrow | B::ArrowAt => ScalarFunction::ArrayContains,
            B::PGOverlap => ScalarFunction::ArrayOverlap,
            _ => return Ok(None),
        };
        // A cast, an ARRAY[...] or a column says whether the operands are arrays (binding
        // them twice changes nothing); json's @> takes the rest.
        let typed_side = if untyped(left) { right } else { left };
        let peeked = match typed_side {
            ast::Expr::Cast { .. }
            | ast::Expr::Array(_)
            | ast::Expr::Identifier(_)
            | ast::Expr::CompoundIdentifier(_) => {
                self.bind_expr(typed_side, None).ok().map(|(_, t)| t)
            }
            _ => None,
        };
        let Some(array_type) = peeked.filter(|t| t.is_array()) else {
            if function == ScalarFunction::ArrayOverlap {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    "operator does not exist: && (arrays only)",
                ));
            }
            return Ok(None);
        };
        let left = self.bind_array_operand(left, array_type)?;
        let right = self.bind_array_operand(right, array_type)?;
        let args = match op {
            B::ArrowAt => vec![right, left],
            _ => vec![left, right],
        };
        Ok(Some((Expr::Function { function, args }, DataType::Bool)))
    }

    /// An operand of an array operator: an array, of `array_type` when untyped.
    fn bind_array_operand(&mut self, expr: &ast::Expr, array_type: DataType) -> SqlResult<Expr> {
        let (bound, data_type) = self.bind_expr(expr, Some(array_type))?;
        if untyped(expr) || data_type == DataType::Unknown {
            return self.coerce(bound, DataType::Unknown, array_type);
        }
        if !data_type.is_array() {
            return Err(SqlError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("operator does not exist: {array_type} and {data_type}"),
            ));
        }
        Ok(bound)
    }

    /// `left || right` where one side is an array: array_cat of two arrays, array_append or
    /// array_prepend of an element (PostgreSQL's anyarray || anyelement).
    pub(super) fn bind_array_concat(
        &mut self,
        left: Expr,
        left_type: DataType,
        right: Expr,
        right_type: DataType,
    ) -> SqlResult<(Expr, DataType)> {
        let name = match (left_type.is_array(), right_type.is_array()) {
            (true, true) => "array_cat",
            (true, false) => "array_append",
            _ => "array_prepend",
        };
        super::system::bind_function(
            self.catalog,
            name,
            vec![left, right],
            &[left_type, right_type],
        )
    }
}
