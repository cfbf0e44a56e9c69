//! CREATE SEQUENCE with its options in any order, as PostgreSQL takes them and pg_dump
//! writes them (`AS integer START WITH 1 INCREMENT BY 1 NO MINVALUE NO MAXVALUE CACHE 1`),
//! and ALTER SEQUENCE (OWNED BY; the options of CREATE SEQUENCE and RESTART [WITH]): read
//! here; CREATE SEQUENCE goes on to sqlparser with its options in the one order it parses,
//! and so do ALTER SEQUENCE's options, as a CREATE SEQUENCE naming only them.

use sqlparser::ast::Statement;
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Word};

use super::{command, Session};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;

/// A sequence statement read here.
pub(super) enum SequenceStatement {
    /// CREATE SEQUENCE, its options put in sqlparser's order.
    Create(Box<Statement>),
    /// ALTER SEQUENCE name OWNED BY table.column | NONE.
    OwnedBy {
        name: String,
        owner: Option<(String, String)>,
        if_exists: bool,
    },
    /// ALTER SEQUENCE name [options] [RESTART [[WITH] value]]: the options as a CREATE
    /// SEQUENCE of the same name naming only them; `restart` Some(None) restarts at START.
    Options {
        name: String,
        if_exists: bool,
        options: Box<Statement>,
        restart: Option<Option<i64>>,
    },
}

/// The options of CREATE SEQUENCE in the order sqlparser reads them.
const ORDER: &[&str] = &[
    "as",
    "increment",
    "minvalue",
    "maxvalue",
    "start",
    "cache",
    "cycle",
    "owned",
];

fn keyword(token: &Token) -> Option<String> {
    match token {
        Token::Word(Word {
            value,
            quote_style: None,
            ..
        }) => Some(value.to_lowercase()),
        _ => None,
    }
}

/// The statement if `sql` is a single CREATE SEQUENCE or ALTER SEQUENCE.
pub(super) fn sequence_statement(sql: &str) -> Option<SqlResult<SequenceStatement>> {
    let text = sql.trim().trim_end_matches(';').trim();
    let mut words = text.split_whitespace().map(str::to_ascii_lowercase);
    let (first, second) = (words.next()?, words.next()?);
    if !matches!(first.as_str(), "create" | "alter") || second != "sequence" || text.contains(';') {
        return None;
    }
    let dialect = PostgreSqlDialect {};
    let tokens: Vec<Token> = match Tokenizer::new(&dialect, text).tokenize() {
        Ok(tokens) => tokens
            .into_iter()
            .filter(|token| !matches!(token, Token::Whitespace(_)))
            .collect(),
        Err(error) => return Some(Err(SqlError::syntax(format!("syntax error: {error}")))),
    };
    Some(if first == "create" {
        create(&tokens)
    } else {
        alter(&tokens)
    })
}

/// Where each option starts: its rank in `ORDER` and its first token.
fn option_at(tokens: &[Token], at: usize) -> Option<usize> {
    let word = keyword(&tokens[at])?;
    let word = match word.as_str() {
        "no" => keyword(tokens.get(at + 1)?)?,
        _ => word,
    };
    ORDER.iter().position(|option| *option == word)
}

fn create(tokens: &[Token]) -> SqlResult<SequenceStatement> {
    let first_option = (2..tokens.len())
        .find(|at| option_at(tokens, *at).is_some())
        .unwrap_or(tokens.len());
    let mut options: Vec<(usize, Vec<&Token>)> = Vec::new();
    let mut at = first_option;
    while at < tokens.len() {
        let rank = option_at(tokens, at).ok_or_else(|| {
            SqlError::syntax(format!("syntax error at or near \"{}\"", tokens[at]))
        })?;
        if options.iter().any(|(seen, _)| *seen == rank) {
            return Err(SqlError::syntax("conflicting or redundant options"));
        }
        // An option runs to the next option's keyword (NO takes the word after it).
        let mut end = at + 1 + usize::from(keyword(&tokens[at]).as_deref() == Some("no"));
        while end < tokens.len() && option_at(tokens, end).is_none() {
            end += 1;
        }
        options.push((rank, tokens[at..end].iter().collect()));
        at = end;
    }
    options.sort_by_key(|(rank, _)| *rank);
    let join = |tokens: &[&Token]| {
        tokens
            .iter()
            .map(|token| token.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    let head: Vec<&Token> = tokens[..first_option].iter().collect();
    let mut canonical = join(&head);
    for (_, option) in &options {
        canonical.push(' ');
        canonical.push_str(&join(option));
    }
    let mut statements = Parser::parse_sql(&PostgreSqlDialect {}, &canonical)
        .map_err(|error| SqlError::syntax(format!("syntax error: {error}")))?;
    match statements.pop() {
        Some(statement) if statements.is_empty() => {
            Ok(SequenceStatement::Create(Box::new(statement)))
        }
        _ => Err(SqlError::syntax("one CREATE SEQUENCE expected")),
    }
}

/// A name token, folded as PostgreSQL folds identifiers.
fn name(token: Option<&Token>) -> SqlResult<String> {
    match token {
        Some(Token::Word(Word {
            value,
            quote_style: Some(_),
            ..
        })) => Ok(value.clone()),
        Some(Token::Word(Word { value, .. })) => Ok(value.to_lowercase()),
        other => Err(SqlError::syntax(format!(
            "syntax error at or near \"{}\"",
            other.map_or(String::new(), ToString::to_string)
        ))),
    }
}

/// `[schema.]name` from `at`: the name and the position after it (a schema other than
/// public is left for the caller's lookup to refuse).
fn qualified(tokens: &[Token], at: usize) -> SqlResult<(Vec<String>, usize)> {
    let mut parts = vec![name(tokens.get(at))?];
    let mut at = at + 1;
    while tokens.get(at) == Some(&Token::Period) {
        parts.push(name(tokens.get(at + 1))?);
        at += 2;
    }
    Ok((parts, at))
}

fn alter(tokens: &[Token]) -> SqlResult<SequenceStatement> {
    let mut at = 2;
    let if_exists = keyword(&tokens[at.min(tokens.len() - 1)]).as_deref() == Some("if")
        && tokens.get(at + 1).and_then(keyword).as_deref() == Some("exists");
    if if_exists {
        at += 2;
    }
    let name_at = at;
    let (parts, after) = qualified(tokens, at)?;
    let sequence = unqualified(parts)?;
    let words: Vec<Option<String>> = tokens[after..].iter().map(keyword).collect();
    if words.len() < 3 || words[0].as_deref() != Some("owned") || words[1].as_deref() != Some("by")
    {
        return alter_options(tokens, name_at, after, sequence, if_exists);
    }
    let owner = if words[2].as_deref() == Some("none") && words.len() == 3 {
        None
    } else {
        let (mut parts, end) = qualified(tokens, after + 2)?;
        if end != tokens.len() || parts.len() < 2 {
            return Err(SqlError::syntax("OWNED BY takes table.column or NONE"));
        }
        let column = parts.pop().expect("two parts at least");
        Some((unqualified(parts)?, column))
    };
    Ok(SequenceStatement::OwnedBy {
        name: sequence,
        owner,
        if_exists,
    })
}

/// ALTER SEQUENCE's options (`tokens[after..]`): RESTART [[WITH] value] taken out, the rest
/// read as the options of a CREATE SEQUENCE of the sequence's name (`tokens[name_at..after]`).
fn alter_options(
    tokens: &[Token],
    name_at: usize,
    after: usize,
    name: String,
    if_exists: bool,
) -> SqlResult<SequenceStatement> {
    let mut rest: Vec<Token> = Vec::new();
    let mut restart = None;
    let mut at = after;
    while at < tokens.len() {
        if keyword(&tokens[at]).as_deref() != Some("restart") {
            rest.push(tokens[at].clone());
            at += 1;
            continue;
        }
        if restart.is_some() {
            return Err(SqlError::syntax("conflicting or redundant options"));
        }
        at += 1;
        let with = tokens.get(at).and_then(keyword).as_deref() == Some("with");
        if with {
            at += 1;
        }
        let negative = tokens.get(at) == Some(&Token::Minus);
        if negative || tokens.get(at) == Some(&Token::Plus) {
            at += 1;
        }
        restart = Some(match tokens.get(at) {
            Some(Token::Number(digits, _)) => {
                let value: i64 = digits.parse().map_err(|_| {
                    SqlError::syntax(format!("RESTART takes an integer, not {digits}"))
                })?;
                at += 1;
                Some(if negative { -value } else { value })
            }
            _ if negative || with => return Err(SqlError::syntax("RESTART WITH takes an integer")),
            _ => None,
        });
    }
    if rest.is_empty() && restart.is_none() {
        return Err(SqlError::syntax("ALTER SEQUENCE names no option"));
    }
    let head = [
        Token::make_keyword("CREATE"),
        Token::make_keyword("SEQUENCE"),
    ];
    let create_tokens: Vec<Token> = head
        .into_iter()
        .chain(tokens[name_at..after].iter().cloned())
        .chain(rest)
        .collect();
    let SequenceStatement::Create(options) = create(&create_tokens).map_err(|error| {
        // Words CREATE SEQUENCE does not take (RENAME TO, SET SCHEMA, ...).
        if error.code == sqlstate::SYNTAX_ERROR {
            SqlError::unsupported(format!(
                "ALTER SEQUENCE {}",
                tokens[after..]
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
        } else {
            error
        }
    })?
    else {
        unreachable!("create() reads a CREATE SEQUENCE")
    };
    Ok(SequenceStatement::Options {
        name,
        if_exists,
        options,
        restart,
    })
}

/// The name of `[public.]name`.
fn unqualified(mut parts: Vec<String>) -> SqlResult<String> {
    match parts.len() {
        1 => Ok(parts.pop().expect("one part")),
        2 if parts[0] == crate::system::PUBLIC_SCHEMA => Ok(parts.pop().expect("two parts")),
        _ => Err(SqlError::new(
            sqlstate::UNDEFINED_TABLE,
            format!("relation \"{}\" does not exist", parts.join(".")),
        )),
    }
}

impl Session {
    /// ALTER SEQUENCE's options and RESTART: the sequence's options are changed as
    /// PostgreSQL does (`SequenceOptions::altered`) and written at once with the next value.
    /// A SERIAL or identity column's sequence takes RESTART only (its options follow from
    /// the column). Sequences are not transactional here: it holds at once.
    pub(super) fn alter_sequence(
        &mut self,
        name: &str,
        if_exists: bool,
        options: &Statement,
        restart: Option<Option<i64>>,
    ) -> SqlResult<Outcome> {
        if matches!(self.state, super::State::Failed(_)) {
            return Err(super::in_failed_block());
        }
        let sequence = match self.catalog.sequence(name) {
            Ok(sequence) => sequence,
            Err(_) if if_exists => return Ok(command("ALTER SEQUENCE")),
            Err(error) => return Err(error),
        };
        let Statement::CreateSequence {
            data_type,
            sequence_options,
            owned_by,
            ..
        } = options
        else {
            unreachable!("ALTER SEQUENCE's options are read as a CREATE SEQUENCE");
        };
        if owned_by.is_some() {
            return Err(SqlError::unsupported(
                "OWNED BY with other options (send ALTER SEQUENCE ... OWNED BY on its own)",
            ));
        }
        let mut binder = crate::plan::bind::Binder::new(&self.catalog, &[]);
        let changes = binder.bind_sequence_changes(data_type.as_ref(), sequence_options)?;
        let altered = if sequence.tree.is_none() {
            if changes != crate::catalog::SequenceChanges::default() {
                return Err(SqlError::new(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    format!(
                        "sequence \"{name}\" belongs to its SERIAL or identity column: only \
                         RESTART changes it here"
                    ),
                ));
            }
            sequence.options()
        } else {
            sequence.options().altered(changes)?
        };
        sequence.alter(altered, restart)?;
        self.catalog.bump_version();
        Ok(command("ALTER SEQUENCE"))
    }

    /// ALTER SEQUENCE name OWNED BY table.column | NONE: a CREATE SEQUENCE sequence goes with
    /// the table (DROP TABLE drops it; pg_depend shows it, so pg_dump writes it back).
    /// Sequences are not transactional here: it holds at once, also inside a block.
    pub(super) fn set_sequence_owner(
        &mut self,
        name: &str,
        owner: Option<(String, String)>,
        if_exists: bool,
    ) -> SqlResult<Outcome> {
        if matches!(self.state, super::State::Failed(_)) {
            return Err(super::in_failed_block());
        }
        let sequence = match self.catalog.sequence(name) {
            Ok(sequence) if sequence.tree.is_some() => sequence,
            Ok(_) => {
                return Err(SqlError::new(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    format!("sequence \"{name}\" belongs to its SERIAL or identity column"),
                ))
            }
            Err(_) if if_exists => return Ok(command("ALTER SEQUENCE")),
            Err(error) => return Err(error),
        };
        if let Some((table, column)) = &owner {
            let found = self.catalog.table(table)?;
            if found.def.column_index(column).is_none() {
                return Err(SqlError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{column}\" of relation \"{table}\" does not exist"),
                ));
            }
        }
        sequence.set_owner(owner)?;
        self.catalog.bump_version();
        Ok(command("ALTER SEQUENCE"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pg_dump_forms_are_read() {
        let Some(Ok(SequenceStatement::Create(statement))) = sequence_statement(
            "CREATE SEQUENCE public.a_id_seq\n    AS integer\n    START WITH 1\n    \
             INCREMENT BY 1\n    NO MINVALUE\n    NO MAXVALUE\n    CACHE 1;",
        ) else {
            panic!("not read");
        };
        assert_eq!(
            statement.to_string(),
            "CREATE SEQUENCE public.a_id_seq AS INTEGER INCREMENT BY 1 NO MINVALUE NO MAXVALUE \
             START WITH 1 CACHE 1"
        );
        let Some(Ok(SequenceStatement::OwnedBy { name, owner, .. })) =
            sequence_statement("ALTER SEQUENCE public.a_id_seq OWNED BY public.a.id;")
        else {
            panic!("not read");
        };
        assert_eq!(
            (name.as_str(), owner),
            ("a_id_seq", Some(("a".into(), "id".into())))
        );
        assert!(matches!(
            sequence_statement("ALTER SEQUENCE s OWNED BY NONE"),
            Some(Ok(SequenceStatement::OwnedBy { owner: None, .. }))
        ));
        let Some(Ok(SequenceStatement::Options {
            name,
            options,
            restart,
            ..
        })) = sequence_statement("ALTER SEQUENCE public.s INCREMENT 5 RESTART WITH -3 CYCLE")
        else {
            panic!("not read");
        };
        assert_eq!((name.as_str(), restart), ("s", Some(Some(-3))));
        assert_eq!(
            options.to_string(),
            "CREATE SEQUENCE public.s INCREMENT 5 CYCLE"
        );
        assert!(matches!(
            sequence_statement("ALTER SEQUENCE s RESTART"),
            Some(Ok(SequenceStatement::Options {
                restart: Some(None),
                ..
            }))
        ));
        for refused in [
            "ALTER SEQUENCE s",
            "ALTER SEQUENCE s RESTART 1 RESTART 2",
            "ALTER SEQUENCE s RESTART WITH",
            "ALTER SEQUENCE s RENAME TO t",
        ] {
            assert!(sequence_statement(refused).unwrap().is_err(), "{refused}");
        }
        assert!(sequence_statement("CREATE SEQUENCE s START 1 START 2")
            .unwrap()
            .is_err());
        assert!(sequence_statement("CREATE TABLE sequence (x int)").is_none());
    }
}
