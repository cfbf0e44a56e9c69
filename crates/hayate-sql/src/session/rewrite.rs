//! PostgreSQL forms sqlparser does not read, rewritten into ones it does when a statement
//! fails to parse as sent (`session::parse`). The rewrites splice the original text by token
//! positions, so literals, quoted names and comments elsewhere in the statement are kept byte
//! for byte.
//!
//! - Row-locking clauses: `FOR UPDATE OF a, b` (a list of tables) becomes one clause per
//!   table, `FOR UPDATE OF a FOR UPDATE OF b`, as PostgreSQL reads both; `FOR NO KEY UPDATE`
//!   and `FOR KEY SHARE` become `FOR UPDATE` and `FOR SHARE`, the stronger locks (Hayate's row
//!   locks have two strengths: a row locked for key share here also blocks a concurrent
//!   update of its other columns, which PostgreSQL lets through).
//! - A locking clause right after a select list (`SELECT 1 FOR UPDATE`, which PostgreSQL
//!   runs, locking nothing): sqlparser reads the FOR as a column alias, so `WHERE true` goes
//!   before it.
//! - `ON CONFLICT (columns) WHERE predicate DO ...`, which infers a partial unique index whose
//!   predicate the WHERE implies: the predicate goes into the column list as one quoted name,
//!   `plan::bind::CONFLICT_PREDICATE` followed by its text, which the binder takes apart
//!   (`Binder::bind_on_conflict`).

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

use crate::plan::bind::CONFLICT_PREDICATE;

/// The tokens of `sql` that are not whitespace or comments, with their byte ranges (None if
/// it does not tokenize).
pub(super) fn words(sql: &str) -> Option<Vec<(Token, std::ops::Range<usize>)>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    let mut locator = Locator {
        sql,
        byte: 0,
        line: 1,
        column: 1,
    };
    let mut words = Vec::new();
    for token in tokens {
        if matches!(token.token, Token::Whitespace(_)) {
            continue;
        }
        let start = locator.offset(token.span.start.line, token.span.start.column)?;
        let end = locator.offset(token.span.end.line, token.span.end.column)?;
        if start >= end {
            return None;
        }
        words.push((token.token, start..end));
    }
    Some(words)
}

/// Whether the word at `index` of `words` is the keyword `wanted`.
fn is_keyword(words: &[(Token, std::ops::Range<usize>)], index: usize, wanted: Keyword) -> bool {
    matches!(words.get(index), Some((Token::Word(word), _)) if word.keyword == wanted)
}

/// Whether `text` holds `word` in any case (ASCII), without a lowered copy of it.
pub(super) fn contains_ignoring_case(text: &str, word: &str) -> bool {
    text.as_bytes()
        .windows(word.len())
        .any(|window| window.eq_ignore_ascii_case(word.as_bytes()))
}

/// Byte offsets of the tokenizer's locations (lines from 1 at each `\n`, characters from 1),
/// asked for in order: one pass over the text in all.
struct Locator<'s> {
    sql: &'s str,
    byte: usize,
    line: u64,
    column: u64,
}

impl Locator<'_> {
    fn offset(&mut self, line: u64, column: u64) -> Option<usize> {
        if (line, column) < (self.line, self.column) {
            return None;
        }
        while (self.line, self.column) < (line, column) {
            let character = self.sql[self.byte..].chars().next()?;
            self.byte += character.len_utf8();
            if character == '\n' {
                (self.line, self.column) = (self.line + 1, 1);
            } else {
                self.column += 1;
            }
        }
        Some(self.byte)
    }
}

/// `sql` rewritten by every form this module knows, or None if it has none of them.
pub(super) fn rewrite(sql: &str) -> Option<String> {
    // Most statements that fail to parse have neither form: spare them the tokenizing.
    if !contains_ignoring_case(sql, "for") && !contains_ignoring_case(sql, "conflict") {
        return None;
    }
    let words = words(sql)?;
    let mut edits = locking_clause_edits(sql, &words);
    edits.extend(conflict_predicate_edits(sql, &words));
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|(range, _)| range.start);
    let mut text = String::with_capacity(sql.len() + 32);
    let mut copied = 0;
    for (range, replacement) in edits {
        if range.start < copied {
            return None; // overlapping edits: leave the statement as it was sent
        }
        text.push_str(&sql[copied..range.start]);
        text.push_str(&replacement);
        copied = range.end;
    }
    text.push_str(&sql[copied..]);
    Some(text)
}

/// The edits (byte range, replacement) that put the locking clauses of `sql` in the forms
/// sqlparser reads.
fn locking_clause_edits(
    sql: &str,
    words: &[(Token, std::ops::Range<usize>)],
) -> Vec<(std::ops::Range<usize>, String)> {
    let keyword = |index: usize, wanted: Keyword| is_keyword(words, index, wanted);
    let mut edits = Vec::new();
    let mut at = 0;
    while at < words.len() {
        if !keyword(at, Keyword::FOR) {
            at += 1;
            continue;
        }
        // FOR [NO KEY] UPDATE | FOR [KEY] SHARE
        let (strength, mut next, renamed) = if keyword(at + 1, Keyword::UPDATE) {
            ("UPDATE", at + 2, false)
        } else if keyword(at + 1, Keyword::SHARE) {
            ("SHARE", at + 2, false)
        } else if keyword(at + 1, Keyword::NO)
            && keyword(at + 2, Keyword::KEY)
            && keyword(at + 3, Keyword::UPDATE)
        {
            ("UPDATE", at + 4, true)
        } else if keyword(at + 1, Keyword::KEY) && keyword(at + 2, Keyword::SHARE) {
            ("SHARE", at + 3, true)
        } else {
            at += 1;
            continue;
        };
        // Right after a select list (no FROM), sqlparser reads FOR as the last item's alias:
        // a WHERE true, which changes nothing, ends the list first.
        if clause_follows_select_list(words, at) {
            edits.push((words[at].1.start..words[at].1.start, "WHERE true ".into()));
        }
        // OF name [, name ...], each name possibly qualified. An OF or a comma with no name
        // after it is left for the parser to report.
        let mut names = Vec::new();
        let mut complete = true;
        if keyword(next, Keyword::OF) {
            next += 1;
            loop {
                let Some(end) = name_end(words, next) else {
                    complete = false;
                    break;
                };
                names.push(words[next].1.start..words[end - 1].1.end);
                next = end;
                match words.get(next) {
                    Some((Token::Comma, _)) => next += 1,
                    _ => break,
                }
            }
        }
        if !complete {
            at = next.max(at + 1);
            continue;
        }
        // NOWAIT | SKIP LOCKED
        let option_start = next;
        if keyword(next, Keyword::NOWAIT) {
            next += 1;
        } else if keyword(next, Keyword::SKIP) && keyword(next + 1, Keyword::LOCKED) {
            next += 2;
        }
        let option = match next > option_start {
            true => &sql[words[option_start].1.start..words[next - 1].1.end],
            false => "",
        };
        if !renamed && names.len() < 2 {
            at = next.max(at + 1);
            continue;
        }
        let clause = |name: Option<&str>| {
            let mut clause = format!("FOR {strength}");
            if let Some(name) = name {
                clause.push_str(" OF ");
                clause.push_str(name);
            }
            if !option.is_empty() {
                clause.push(' ');
                clause.push_str(option);
            }
            clause
        };
        let replacement = match names.is_empty() {
            true => clause(None),
            false => names
                .iter()
                .map(|range| clause(Some(&sql[range.clone()])))
                .collect::<Vec<_>>()
                .join(" "),
        };
        edits.push((words[at].1.start..words[next - 1].1.end, replacement));
        at = next;
    }
    edits
}

/// Whether the FOR at `at` follows its SELECT's list with no clause between them (`SELECT
/// 1 FOR UPDATE`): going back at the same depth of parentheses, SELECT comes before any of
/// FROM (not IS DISTINCT FROM's), WHERE, GROUP, HAVING, WINDOW, ORDER, LIMIT, OFFSET, FETCH,
/// an earlier locking clause's FOR, a set operation and the end of an earlier statement (a
/// parenthesised operand, `UNION (SELECT 2) FOR UPDATE`, is passed over to its UNION).
fn clause_follows_select_list(words: &[(Token, std::ops::Range<usize>)], at: usize) -> bool {
    let mut depth = 0usize;
    for (index, (token, _)) in words[..at].iter().enumerate().rev() {
        match token {
            Token::SemiColon if depth == 0 => return false,
            Token::RParen => depth += 1,
            Token::LParen if depth == 0 => return false,
            Token::LParen => depth -= 1,
            Token::Word(word) if depth == 0 => match word.keyword {
                Keyword::SELECT => return true,
                Keyword::FROM if index > 0 && is_keyword(words, index - 1, Keyword::DISTINCT) => {}
                Keyword::FOR
                | Keyword::UNION
                | Keyword::INTERSECT
                | Keyword::EXCEPT
                | Keyword::FROM
                | Keyword::WHERE
                | Keyword::GROUP
                | Keyword::HAVING
                | Keyword::WINDOW
                | Keyword::ORDER
                | Keyword::LIMIT
                | Keyword::OFFSET
                | Keyword::FETCH => return false,
                _ => {}
            },
            _ => {}
        }
    }
    false
}

/// The edit that moves the WHERE predicate of an `ON CONFLICT (columns) WHERE predicate DO`
/// target into its column list as a quoted name (`CONFLICT_PREDICATE`).
fn conflict_predicate_edits(
    sql: &str,
    words: &[(Token, std::ops::Range<usize>)],
) -> Vec<(std::ops::Range<usize>, String)> {
    let keyword = |index: usize, wanted: Keyword| is_keyword(words, index, wanted);
    let mut edits = Vec::new();
    for at in 0..words.len() {
        if !(keyword(at, Keyword::ON)
            && keyword(at + 1, Keyword::CONFLICT)
            && matches!(words.get(at + 2), Some((Token::LParen, _))))
        {
            continue;
        }
        // The column list's closing parenthesis, then WHERE.
        let Some(close) = (at + 3..words.len()).find(|index| {
            matches!(
                words[*index].0,
                Token::RParen | Token::LParen | Token::SemiColon
            )
        }) else {
            continue;
        };
        if !matches!(words[close].0, Token::RParen) || !keyword(close + 1, Keyword::WHERE) {
            continue;
        }
        // The predicate runs to the DO outside parentheses.
        let mut depth = 0usize;
        let mut end = None;
        for (index, (token, _)) in words.iter().enumerate().skip(close + 2) {
            match token {
                Token::LParen => depth += 1,
                Token::RParen => depth = depth.saturating_sub(1),
                Token::SemiColon => break,
                Token::Word(word) if word.keyword == Keyword::DO && depth == 0 => {
                    end = Some(index);
                    break;
                }
                _ => {}
            }
        }
        let Some(end) = end.filter(|end| *end > close + 2) else {
            continue;
        };
        let predicate = &sql[words[close + 2].1.start..words[end - 1].1.end];
        let name = format!("{CONFLICT_PREDICATE}{predicate}").replace('"', "\"\"");
        edits.push((
            words[close].1.start..words[end - 1].1.end,
            format!(", \"{name}\")"),
        ));
    }
    edits
}

/// The index after a table name starting at `start` (`a`, `s.a`, `"A"`), None if there is
/// none there.
fn name_end(words: &[(Token, std::ops::Range<usize>)], start: usize) -> Option<usize> {
    let is_name = |index: usize| matches!(words.get(index), Some((Token::Word(_), _)));
    if !is_name(start) {
        return None;
    }
    let mut end = start + 1;
    while matches!(words.get(end), Some((Token::Period, _))) && is_name(end + 1) {
        end += 2;
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::{rewrite, CONFLICT_PREDICATE};

    #[test]
    fn lists_become_one_clause_per_table() {
        assert_eq!(
            rewrite("select * from a, b for update of a, b").as_deref(),
            Some("select * from a, b FOR UPDATE OF a FOR UPDATE OF b")
        );
        assert_eq!(
            rewrite("SELECT 1 FROM s.a x, \"B\" FOR SHARE OF x, \"B\" NOWAIT;").as_deref(),
            Some("SELECT 1 FROM s.a x, \"B\" FOR SHARE OF x NOWAIT FOR SHARE OF \"B\" NOWAIT;")
        );
        assert_eq!(
            rewrite("select 'for update of a, b' from a for update of s.a, b skip locked")
                .as_deref(),
            Some(
                "select 'for update of a, b' from a \
                 FOR UPDATE OF s.a skip locked FOR UPDATE OF b skip locked"
            )
        );
    }

    #[test]
    fn weaker_strengths_become_the_stronger_ones() {
        assert_eq!(
            rewrite("select * from a for no key update").as_deref(),
            Some("select * from a FOR UPDATE")
        );
        assert_eq!(
            rewrite("select * from a for key share of a nowait").as_deref(),
            Some("select * from a FOR SHARE OF a nowait")
        );
    }

    #[test]
    fn a_clause_right_after_the_select_list_gets_a_where() {
        assert_eq!(
            rewrite("SELECT 1 FOR UPDATE").as_deref(),
            Some("SELECT 1 WHERE true FOR UPDATE")
        );
        assert_eq!(
            rewrite("select (select f(x) from t), 2 for key share nowait").as_deref(),
            Some("select (select f(x) from t), 2 WHERE true FOR SHARE nowait")
        );
        assert_eq!(
            rewrite("select 1 is distinct from 2 for update").as_deref(),
            Some("select 1 is distinct from 2 WHERE true for update")
        );
        // Two clauses: the WHERE goes before the first only.
        assert_eq!(
            rewrite("SELECT 1 FOR UPDATE FOR SHARE").as_deref(),
            Some("SELECT 1 WHERE true FOR UPDATE FOR SHARE")
        );
        // With a clause between them, after a set operation or another statement, or inside
        // parentheses of their own, nothing is added.
        assert_eq!(rewrite("select 1 from a for update"), None);
        assert_eq!(rewrite("select 1 where x for update"), None);
        assert_eq!(rewrite("select 1 union (select 2) for update"), None);
        assert_eq!(rewrite("select 1 union select 2 from t for update"), None);
        assert_eq!(rewrite("select 1; (select 2) for update"), None);
        // A list ending in a parenthesis is still a list.
        assert_eq!(
            rewrite("select now() for update").as_deref(),
            Some("select now() WHERE true for update")
        );
        assert_eq!(
            rewrite("SELECT (SELECT x FROM t) FOR SHARE").as_deref(),
            Some("SELECT (SELECT x FROM t) WHERE true FOR SHARE")
        );
        assert_eq!(
            rewrite("select * from (select 1 for update) s for no key update").as_deref(),
            Some("select * from (select 1 WHERE true for update) s FOR UPDATE")
        );
    }

    #[test]
    fn an_of_or_comma_without_a_name_is_left_to_the_parser() {
        assert_eq!(rewrite("select * from a for no key update of"), None);
        assert_eq!(rewrite("select * from a, b for update of a, b,"), None);
    }

    #[test]
    fn conflict_predicates_go_into_the_column_list() {
        let predicate = |text: &str| format!("\"{CONFLICT_PREDICATE}{text}\"");
        assert_eq!(
            rewrite("insert into t values (1) on conflict (email) where live do nothing"),
            Some(format!(
                "insert into t values (1) on conflict (email, {}) do nothing",
                predicate("live")
            ))
        );
        assert_eq!(
            rewrite(
                "INSERT INTO t VALUES (1) ON CONFLICT (a, b)\n WHERE (x > 0) AND \"Q\" <> 'do'\n \
                 DO UPDATE SET n = 1 WHERE t.n < 5"
            ),
            Some(format!(
                "INSERT INTO t VALUES (1) ON CONFLICT (a, b, {})\n \
                 DO UPDATE SET n = 1 WHERE t.n < 5",
                predicate("(x > 0) AND \"\"Q\"\" <> 'do'")
            ))
        );
        // Expressions in the target, and no WHERE, are not touched.
        assert_eq!(
            rewrite("insert into t values (1) on conflict ((lower(e))) where live do nothing"),
            None
        );
        assert_eq!(
            rewrite("insert into t values (1) on conflict (e) do nothing"),
            None
        );
    }

    #[test]
    fn forms_sqlparser_reads_are_left_alone() {
        assert_eq!(rewrite("select * from a for update of a"), None);
        assert_eq!(rewrite("select * from a for update"), None);
        assert_eq!(rewrite("select 'for key share' from a"), None);
        assert_eq!(rewrite("select * from a where x = 'é' for share"), None);
    }

    #[test]
    fn multibyte_text_before_the_clause_is_kept() {
        assert_eq!(
            rewrite("select 'héllo\nwörld' from a for update of a, b").as_deref(),
            Some("select 'héllo\nwörld' from a FOR UPDATE OF a FOR UPDATE OF b")
        );
    }
}
