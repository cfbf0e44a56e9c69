//! SET CONSTRAINTS { ALL | name [, ...] } { IMMEDIATE | DEFERRED }, which sqlparser does not
//! read (Django sends it around foreign key changes and in its fixtures' constraint checks).
//!
//! It reaches the binder as a SET of a variable no SQL text can name (`SET_CONSTRAINTS` and
//! the mode, an unquoted identifier with spaces), whose values are the constraint names; the
//! session keeps the modes for the transaction (`exec::ConstraintModes`) and checks what
//! becomes immediate at once (design 8.4).

use sqlparser::ast::{self, Statement};
use sqlparser::tokenizer::Token;

use super::database::Tokens;
use crate::error::{SqlError, SqlResult};
use crate::plan::bind::SET_CONSTRAINTS;

/// The statement if `sql` is a single SET CONSTRAINTS.
pub(super) fn set_constraints_statement(sql: &str) -> Option<SqlResult<Statement>> {
    let text = sql.trim().trim_end_matches(';').trim();
    let mut words = text.split_whitespace().map(str::to_ascii_lowercase);
    if words.next()? != "set" || words.next()? != "constraints" || text.contains(';') {
        return None;
    }
    Some(parse(text))
}

fn parse(text: &str) -> SqlResult<Statement> {
    let syntax = |at: Option<&Token>| match at {
        Some(token) => SqlError::syntax(format!("syntax error at or near \"{token}\"")),
        None => SqlError::syntax("syntax error at end of input"),
    };
    let mut tokens = Tokens::after_two_words(text)?;
    let mut names = Vec::new();
    if !tokens.keywords(&["all"]) {
        loop {
            names.push(tokens.name()?);
            if !tokens.eat(&Token::Comma) {
                break;
            }
        }
    }
    let mode = if tokens.keywords(&["immediate"]) {
        "IMMEDIATE"
    } else if tokens.keywords(&["deferred"]) {
        "DEFERRED"
    } else {
        return Err(syntax(tokens.peek()));
    };
    if tokens.peek().is_some() {
        return Err(syntax(tokens.peek()));
    }
    let values = names
        .into_iter()
        .map(|name| ast::Expr::Identifier(ast::Ident::with_quote('"', name)))
        .collect();
    Ok(Statement::Set(ast::Set::SingleAssignment {
        scope: None,
        hivevar: false,
        variable: ast::ObjectName::from(vec![ast::Ident::new(format!("{SET_CONSTRAINTS} {mode}"))]),
        values,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_forms_are_read() {
        for sql in [
            "SET CONSTRAINTS ALL IMMEDIATE",
            "set constraints all deferred;",
            "SET CONSTRAINTS \"a_fk\", b IMMEDIATE",
        ] {
            assert!(matches!(
                set_constraints_statement(sql),
                Some(Ok(Statement::Set(_)))
            ));
        }
        assert!(set_constraints_statement("SET search_path = x").is_none());
        for bad in [
            "SET CONSTRAINTS ALL",
            "SET CONSTRAINTS a b IMMEDIATE",
            "SET CONSTRAINTS ALL NOW",
        ] {
            assert!(
                matches!(set_constraints_statement(bad), Some(Err(_))),
                "{bad}"
            );
        }
    }
}
