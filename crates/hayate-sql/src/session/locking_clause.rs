//! Row-locking clauses in PostgreSQL's forms sqlparser does not read, rewritten into ones it
//! does: `FOR UPDATE OF a, b` (a list of tables) becomes one clause per table, `FOR UPDATE OF
//! a FOR UPDATE OF b`, as PostgreSQL reads both; `FOR NO KEY UPDATE` and `FOR KEY SHARE` become
//! `FOR UPDATE` and `FOR SHARE`, the stronger locks (Hayate's row locks have two strengths: a
//! row locked for key share here also blocks a concurrent update of its other columns, which
//! PostgreSQL lets through).
//!
//! The rewrite splices the original text by token positions, so literals, quoted names and
//! comments elsewhere in the statement are kept byte for byte.

use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

/// `sql` with its locking clauses in the forms sqlparser reads, or None if it has none of the
/// other forms (or does not tokenize).
pub(super) fn rewrite_locking_clauses(sql: &str) -> Option<String> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql)
        .tokenize_with_location()
        .ok()?;
    // The tokens that are not whitespace or comments, with their byte ranges in `sql`.
    let line_starts: Vec<usize> = std::iter::once(0)
        .chain(sql.match_indices('\n').map(|(at, _)| at + 1))
        .collect();
    let mut words = Vec::new();
    for token in &tokens {
        if matches!(token.token, Token::Whitespace(_)) {
            continue;
        }
        words.push((&token.token, byte_range(sql, &line_starts, token)?));
    }
    let keyword = |index: usize, wanted: Keyword| matches!(words.get(index), Some((Token::Word(word), _)) if word.keyword == wanted);
    let mut text = String::with_capacity(sql.len() + 32);
    let mut copied = 0;
    let mut changed = false;
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
        // OF name [, name ...], each name possibly qualified.
        let mut names = Vec::new();
        if keyword(next, Keyword::OF) {
            next += 1;
            loop {
                let Some(end) = name_end(&words, next) else {
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
        let start = words[at].1.start;
        let end = words[next - 1].1.end;
        text.push_str(&sql[copied..start]);
        text.push_str(&replacement);
        copied = end;
        changed = true;
        at = next;
    }
    if !changed {
        return None;
    }
    text.push_str(&sql[copied..]);
    Some(text)
}

/// The index after a table name starting at `start` (`a`, `s.a`, `"A"`), None if there is
/// none there.
fn name_end(words: &[(&Token, std::ops::Range<usize>)], start: usize) -> Option<usize> {
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

/// The bytes of `sql` a token covers (its span's locations count lines and characters from 1;
/// the end is the location just past it).
fn byte_range(
    sql: &str,
    line_starts: &[usize],
    token: &TokenWithSpan,
) -> Option<std::ops::Range<usize>> {
    let offset = |line: u64, column: u64| -> Option<usize> {
        let start = *line_starts.get(usize::try_from(line).ok()?.checked_sub(1)?)?;
        let column = usize::try_from(column).ok()?.checked_sub(1)?;
        match sql[start..].char_indices().nth(column) {
            Some((at, _)) => Some(start + at),
            None => Some(sql.len()),
        }
    };
    let start = offset(token.span.start.line, token.span.start.column)?;
    let end = offset(token.span.end.line, token.span.end.column)?;
    (start < end && end <= sql.len()).then_some(start..end)
}

#[cfg(test)]
mod tests {
    use super::rewrite_locking_clauses as rewrite;

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
