//! PostgreSQL's regular expressions (`~`, `~*`, regexp_replace), compiled by the `regex`
//! crate, whose syntax agrees with PostgreSQL's advanced expressions on the common forms and
//! matches in linear time. The forms it refuses that PostgreSQL has, back references
//! (`(a)\1`) and lookaround (`(?=x)`, `(?<!x)`), go to `fancy-regex`, a backtracking matcher
//! that hands the rest of the pattern to the same engine. Only those: fancy-regex also reads
//! forms PostgreSQL refuses (subroutine calls, atomic groups, possessive quantifiers...),
//! which stay 2201B, and its programs are bounded in size. A match that backtracks past the
//! limit fails with 2201B ("regular expression failed"), where PostgreSQL, which does not
//! backtrack this way, would answer.
use crate::error::{sqlstate, SqlError, SqlResult};

/// How a pattern is read: PostgreSQL's flags i, n (or m), s and x as the crates name them.
#[derive(Debug, Clone, Copy)]
pub struct PatternOptions {
    pub case_insensitive: bool,
    /// ^ and $ match at lines (newline-sensitive).
    pub multi_line: bool,
    pub dot_matches_new_line: bool,
    /// Expanded syntax: blanks and # comments ignored.
    pub ignore_whitespace: bool,
}

impl Default for PatternOptions {
    /// PostgreSQL's defaults: case matters, `.` matches a newline, ^ and $ only at the ends.
    fn default() -> Self {
        PatternOptions {
            case_insensitive: false,
            multi_line: false,
            dot_matches_new_line: true,
            ignore_whitespace: false,
        }
    }
}

/// A compiled regular expression.
#[derive(Debug)]
pub enum Pattern {
    Linear(regex::Regex),
    Backtracking(fancy_regex::Regex),
}

impl Pattern {
    /// Compiles `pattern` (2201B if neither crate reads it: the `regex` crate's reason, or
    /// fancy-regex's for a back reference or lookaround it refuses too, `(a)\2`).
    pub fn new(pattern: &str, options: PatternOptions) -> SqlResult<Pattern> {
        let linear = regex::RegexBuilder::new(pattern)
            .case_insensitive(options.case_insensitive)
            .multi_line(options.multi_line)
            .dot_matches_new_line(options.dot_matches_new_line)
            .ignore_whitespace(options.ignore_whitespace)
            .build();
        let error = match linear {
            Ok(regex) => return Ok(Pattern::Linear(regex)),
            Err(error) => error.to_string(),
        };
        let backtracking_form =
            error.contains("backreferences are not supported") || error.contains("look-around");
        if !backtracking_form || has_form_postgresql_refuses(pattern) {
            return Err(invalid(&error));
        }
        fancy_regex::RegexBuilder::new(pattern)
            .case_insensitive(options.case_insensitive)
            .multi_line(options.multi_line)
            .dot_matches_new_line(options.dot_matches_new_line)
            .ignore_whitespace(options.ignore_whitespace)
            .max_prog_size(PROGRAM_SIZE_MAX)
            .delegate_size_limit(DELEGATE_BYTES_MAX)
            .backtrack_limit(BACKTRACK_LIMIT)
            .build()
            .map(Pattern::Backtracking)
            .map_err(|error| invalid(&error))
    }

    /// Whether the pattern matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> SqlResult<bool> {
        match self {
            Pattern::Linear(regex) => Ok(regex.is_match(text)),
            Pattern::Backtracking(regex) => regex.is_match(text).map_err(|error| failed(&error)),
        }
    }

    /// `text` with its first `limit` matches (every one if 0) replaced by what `expand`
    /// writes, given each match's groups (0 the whole match; None for a group that took
    /// no part).
    pub fn replacen(
        &self,
        text: &str,
        limit: usize,
        mut expand: impl FnMut(&[Option<&str>], &mut String),
    ) -> SqlResult<String> {
        let replaced = match self {
            Pattern::Linear(regex) => regex.replacen(text, limit, |captures: &regex::Captures| {
                let groups: Vec<_> = captures.iter().map(|m| m.map(|m| m.as_str())).collect();
                let mut out = String::new();
                expand(&groups, &mut out);
                out
            }),
            Pattern::Backtracking(regex) => regex
                .try_replacen(text, limit, |captures: &fancy_regex::Captures<'_, str>| {
                    let groups: Vec<_> = captures.iter().map(|m| m.map(|m| m.as_str())).collect();
                    let mut out = String::new();
                    expand(&groups, &mut out);
                    out
                })
                .map_err(|error| failed(&error))?,
        };
        Ok(replaced.into_owned())
    }
}

/// Instructions of a backtracking program, at most (subroutine-like expansion could
/// otherwise grow a short pattern without bound).
const PROGRAM_SIZE_MAX: usize = 100_000;
/// Bytes of the linear engine's part of a backtracking pattern, as the regex crate's own
/// default limit.
const DELEGATE_BYTES_MAX: usize = 10 << 20;
/// Backtracking steps of one search, across the whole text.
const BACKTRACK_LIMIT: usize = 10_000_000;

/// Whether `pattern` holds a form fancy-regex reads and PostgreSQL refuses or reads
/// otherwise: `\g` `\k` `\K` `\G` `\Z` `\h` `\R` `\N` `\O` escapes, `(?>`, `(?(`, `(?R`
/// groups and possessive quantifiers (`a++`, `a*+`, `a?+`, `a{2}+`).
fn has_form_postgresql_refuses(pattern: &str) -> bool {
    let bytes = pattern.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'\\' => {
                if matches!(
                    bytes.get(at + 1),
                    Some(b'g' | b'k' | b'K' | b'G' | b'Z' | b'h' | b'R' | b'N' | b'O')
                ) {
                    return true;
                }
                at += 2;
                continue;
            }
            b'(' if bytes.get(at + 1) == Some(&b'?')
                && matches!(bytes.get(at + 2), Some(b'>' | b'(' | b'R')) =>
            {
                return true;
            }
            b'*' | b'+' | b'?' | b'}' if bytes.get(at + 1) == Some(&b'+') => return true,
            _ => {}
        }
        at += 1;
    }
    false
}

fn failed(error: &dyn std::fmt::Display) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_REGULAR_EXPRESSION,
        format!("regular expression failed: {error}"),
    )
}

fn invalid(error: &dyn std::fmt::Display) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_REGULAR_EXPRESSION,
        format!("invalid regular expression: {error}"),
    )
}
