//! CREATE DATABASE and DROP DATABASE in PostgreSQL's forms, which sqlparser does not all
//! accept (`CREATE DATABASE d WITH OWNER = u ENCODING = 'UTF8' TEMPLATE = template0`,
//! `DROP DATABASE d WITH (FORCE)`): read here, checked, and handed on as sqlparser's plain
//! `CREATE DATABASE "d"` / `DROP DATABASE "d"` for the binder (`catalog::cluster` does the
//! work). FORCE is handed on as the statement's `temporary` flag, which sqlparser's
//! PostgreSQL dialect never sets, so no SQL text reaches the binder with it.

use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Word};

use super::{command, Session, State};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;

/// Options of CREATE DATABASE that change nothing here (one encoding, one locale, one
/// tablespace, no owners).
const IGNORED_OPTIONS: &[&str] = &[
    "owner",
    "strategy",
    "locale",
    "lc_collate",
    "lc_ctype",
    "icu_locale",
    "icu_rules",
    "locale_provider",
    "collation_version",
    "tablespace",
    "allow_connections",
    "is_template",
    "oid",
];

/// The statement if `sql` is a single CREATE DATABASE or DROP DATABASE.
pub(super) fn database_statement(sql: &str) -> Option<SqlResult<Statement>> {
    let text = sql.trim().trim_end_matches(';').trim();
    let mut words = text.split_whitespace().map(str::to_ascii_lowercase);
    let (first, second) = (words.next()?, words.next()?);
    if !matches!(first.as_str(), "create" | "drop") || second != "database" || text.contains(';') {
        return None;
    }
    Some(parse(text, first == "create"))
}

fn parse(text: &str, create: bool) -> SqlResult<Statement> {
    let mut tokens = Tokens::after_two_words(text)?;
    let guard = if create {
        ["if", "not", "exists"].as_slice()
    } else {
        &["if", "exists"]
    };
    let guarded = tokens.keywords(guard);
    let name = tokens.name()?;
    let mut force = false;
    if create {
        create_options(&mut tokens)?;
    } else {
        force = drop_options(&mut tokens)?;
    }
    if let Some(token) = tokens.peek() {
        return Err(SqlError::syntax(format!(
            "syntax error at or near \"{token}\""
        )));
    }
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    let canonical = match (create, guarded) {
        (true, false) => format!("CREATE DATABASE {quoted}"),
        (true, true) => format!("CREATE DATABASE IF NOT EXISTS {quoted}"),
        (false, false) => format!("DROP DATABASE {quoted}"),
        (false, true) => format!("DROP DATABASE IF EXISTS {quoted}"),
    };
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, &canonical)
        .map_err(|error| SqlError::syntax(format!("syntax error: {error}")))?;
    let mut statement = statements.remove(0);
    if let Statement::Drop { temporary, .. } = &mut statement {
        *temporary = force;
    }
    Ok(statement)
}

/// `[WITH] [option [=] value] ...`
fn create_options(tokens: &mut Tokens) -> SqlResult<()> {
    tokens.keywords(&["with"]);
    while let Some(option) = tokens.word() {
        let option = if option == "connection" && tokens.keywords(&["limit"]) {
            "connection limit".to_string()
        } else {
            option
        };
        tokens.eat(&Token::Eq);
        let value = tokens.value().ok_or_else(|| {
            SqlError::syntax(format!(
                "option \"{option}\" of CREATE DATABASE needs a value"
            ))
        })?;
        let default = value.eq_ignore_ascii_case("default");
        match option.as_str() {
            "encoding" => {
                let utf8 = ["utf8", "utf-8", "unicode", "6"]
                    .iter()
                    .any(|name| value.eq_ignore_ascii_case(name));
                if !utf8 && !default {
                    return Err(SqlError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!("encoding \"{value}\" is not supported: databases store UTF8"),
                    ));
                }
            }
            "template" => {
                if !default && value != "template0" && value != "template1" {
                    return Err(SqlError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!(
                            "TEMPLATE {value} is not supported: a new database starts empty \
                             (template0 and template1 are empty)"
                        ),
                    ));
                }
            }
            "connection limit" => {}
            other if IGNORED_OPTIONS.contains(&other) => {}
            other => {
                return Err(SqlError::syntax(format!(
                    "option \"{other}\" not recognized"
                )))
            }
        }
    }
    Ok(())
}

/// `[[WITH] (FORCE [, ...])]`: true with FORCE (the other sessions are ended).
fn drop_options(tokens: &mut Tokens) -> SqlResult<bool> {
    let with = tokens.keywords(&["with"]);
    if !tokens.eat(&Token::LParen) {
        return match with {
            true => Err(SqlError::syntax("syntax error at or near \"WITH\"")),
            false => Ok(false),
        };
    }
    // FORCE is PostgreSQL's only option (it may be repeated).
    loop {
        match tokens.word().as_deref() {
            Some("force") => {}
            Some(other) => {
                return Err(SqlError::syntax(format!(
                    "unrecognized DROP DATABASE option \"{other}\""
                )))
            }
            None => return Err(SqlError::syntax("DROP DATABASE options: (FORCE)")),
        }
        if tokens.eat(&Token::RParen) {
            return Ok(true);
        }
        if !tokens.eat(&Token::Comma) {
            return Err(SqlError::syntax("DROP DATABASE options: (FORCE)"));
        }
    }
}

pub(super) struct Tokens {
    pub(super) tokens: Vec<Token>,
    pub(super) at: usize,
}

impl Tokens {
    /// The tokens of `text` without whitespace, read from the third (past a statement's
    /// two leading keywords, e.g. CREATE DATABASE, SET CONSTRAINTS).
    pub(super) fn after_two_words(text: &str) -> SqlResult<Tokens> {
        let tokens = Tokenizer::new(&PostgreSqlDialect {}, text)
            .tokenize()
            .map_err(|error| SqlError::syntax(format!("syntax error: {error}")))?
            .into_iter()
            .filter(|token| !matches!(token, Token::Whitespace(_)))
            .collect();
        Ok(Tokens { tokens, at: 2 })
    }

    pub(super) fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    pub(super) fn eat(&mut self, token: &Token) -> bool {
        let found = self.peek() == Some(token);
        self.at += usize::from(found);
        found
    }

    /// True (and past them) if the next tokens are these keywords.
    pub(super) fn keywords(&mut self, keywords: &[&str]) -> bool {
        let found = keywords.iter().enumerate().all(|(offset, keyword)| {
            matches!(
                self.tokens.get(self.at + offset),
                Some(Token::Word(Word { value, quote_style: None, .. }))
                    if value.eq_ignore_ascii_case(keyword)
            )
        });
        if found {
            self.at += keywords.len();
        }
        found
    }

    /// The next unquoted word, lower case.
    pub(super) fn word(&mut self) -> Option<String> {
        match self.peek()? {
            Token::Word(Word {
                value,
                quote_style: None,
                ..
            }) => {
                let word = value.to_lowercase();
                self.at += 1;
                Some(word)
            }
            _ => None,
        }
    }

    /// A database name, folded as PostgreSQL folds identifiers.
    pub(super) fn name(&mut self) -> SqlResult<String> {
        let name = match self.peek() {
            Some(Token::Word(Word {
                value,
                quote_style: Some(_),
                ..
            })) => value.clone(),
            Some(Token::Word(Word { value, .. })) => value.to_lowercase(),
            Some(other) => {
                return Err(SqlError::syntax(format!(
                    "syntax error at or near \"{other}\""
                )))
            }
            None => return Err(SqlError::syntax("syntax error: a database name is missing")),
        };
        self.at += 1;
        Ok(name)
    }

    /// An option's value: a word, a string or a number (as written).
    fn value(&mut self) -> Option<String> {
        let value = match self.peek()? {
            Token::Word(word) => word.value.clone(),
            Token::SingleQuotedString(text) => text.clone(),
            Token::Number(number, _) => number.clone(),
            Token::Minus => {
                self.at += 1;
                match self.peek()? {
                    Token::Number(number, _) => format!("-{number}"),
                    _ => return None,
                }
            }
            _ => return None,
        };
        self.at += 1;
        Some(value)
    }
}

impl Session {
    /// CREATE DATABASE: outside a transaction block only, as in PostgreSQL.
    pub(super) fn create_database(
        &mut self,
        name: &str,
        if_not_exists: bool,
    ) -> SqlResult<Outcome> {
        self.refuse_in_block("CREATE DATABASE")?;
        self.catalog
            .cluster()
            .create_database(name, if_not_exists)?;
        Ok(command("CREATE DATABASE"))
    }

    /// DROP DATABASE: outside a transaction block, never the session's own database.
    pub(super) fn drop_database(
        &mut self,
        name: &str,
        if_exists: bool,
        force: bool,
    ) -> SqlResult<Outcome> {
        self.refuse_in_block("DROP DATABASE")?;
        self.catalog
            .cluster()
            .drop_database(name, if_exists, self.catalog.name(), force)?;
        Ok(command("DROP DATABASE"))
    }

    fn refuse_in_block(&self, what: &str) -> SqlResult<()> {
        match self.state {
            State::Idle => Ok(()),
            _ => Err(SqlError::new(
                sqlstate::ACTIVE_SQL_TRANSACTION,
                format!("{what} cannot run inside a transaction block"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(sql: &str) -> SqlResult<String> {
        database_statement(sql)
            .expect("a database statement")
            .map(|statement| statement.to_string())
    }

    #[test]
    fn postgres_forms_are_read() {
        assert_eq!(
            statement("create database Shop").unwrap(),
            "CREATE DATABASE \"shop\""
        );
        assert_eq!(
            statement("CREATE DATABASE \"Shop\" WITH OWNER = app ENCODING = 'UTF8' TEMPLATE = template0 LOCALE_PROVIDER = libc LOCALE = 'C' CONNECTION LIMIT = -1;").unwrap(),
            "CREATE DATABASE \"Shop\""
        );
        assert_eq!(
            statement("DROP DATABASE IF EXISTS shop").unwrap(),
            "DROP DATABASE IF EXISTS \"shop\""
        );
        assert!(database_statement("CREATE TABLE database (x int)").is_none());
        assert!(database_statement("drop database a; select 1").is_none());
    }

    #[test]
    fn bad_forms_are_errors() {
        let code = |sql: &str| statement(sql).unwrap_err().code;
        assert_eq!(
            code("CREATE DATABASE d ENCODING 'LATIN1'"),
            sqlstate::FEATURE_NOT_SUPPORTED
        );
        assert_eq!(
            code("CREATE DATABASE d TEMPLATE other"),
            sqlstate::FEATURE_NOT_SUPPORTED
        );
        assert_eq!(
            code("CREATE DATABASE d COLOUR = 'blue'"),
            sqlstate::SYNTAX_ERROR
        );
        assert_eq!(code("CREATE DATABASE"), sqlstate::SYNTAX_ERROR);
        assert_eq!(
            code("DROP DATABASE d WITH (QUICKLY)"),
            sqlstate::SYNTAX_ERROR
        );
        assert_eq!(code("DROP DATABASE d WITH"), sqlstate::SYNTAX_ERROR);
        assert_eq!(code("DROP DATABASE d e"), sqlstate::SYNTAX_ERROR);
        // FORCE goes on as the `temporary` flag, which the binder reads as FORCE.
        let force = |sql: &str| match database_statement(sql).unwrap().unwrap() {
            Statement::Drop { temporary, .. } => temporary,
            other => panic!("{other}"),
        };
        assert!(force("DROP DATABASE IF EXISTS d WITH (FORCE)"));
        assert!(!force("DROP DATABASE d"));
    }
}
