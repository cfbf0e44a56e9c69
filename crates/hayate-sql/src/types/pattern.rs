//! PostgreSQL's regular expressions (`~`, `~*`, regexp_replace), compiled by the `regex`
//! crate, whose syntax agrees with PostgreSQL's advanced expressions on the common forms and
//! matches in linear time. The forms it does not read, back references (`(a)\1`) and
//! lookaround (`(?=x)`, `(?<!x)`), which PostgreSQL has, go to `fancy-regex`, a backtracking
//! matcher that hands the rest of the pattern to the same engine; a match that backtracks
//! past its limit is 2201B, as PostgreSQL's "regular expression is too complex".

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
    /// Compiles `pattern` (2201B if neither crate reads it; the `regex` crate's reason is
    /// the one given).
    pub fn new(pattern: &str, options: PatternOptions) -> SqlResult<Pattern> {
        let linear = regex::RegexBuilder::new(pattern)
            .case_insensitive(options.case_insensitive)
            .multi_line(options.multi_line)
            .dot_matches_new_line(options.dot_matches_new_line)
            .ignore_whitespace(options.ignore_whitespace)
            .build();
        let error = match linear {
            Ok(regex) => return Ok(Pattern::Linear(regex)),
            Err(error) => error,
        };
        fancy_regex::RegexBuilder::new(pattern)
            .case_insensitive(options.case_insensitive)
            .multi_line(options.multi_line)
            .dot_matches_new_line(options.dot_matches_new_line)
            .ignore_whitespace(options.ignore_whitespace)
            .build()
            .map(Pattern::Backtracking)
            .map_err(|_| invalid(&error))
    }

    /// Whether the pattern matches somewhere in `text`.
    pub fn is_match(&self, text: &str) -> SqlResult<bool> {
        match self {
            Pattern::Linear(regex) => Ok(regex.is_match(text)),
            Pattern::Backtracking(regex) => regex.is_match(text).map_err(|error| invalid(&error)),
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
                .map_err(|error| invalid(&error))?,
        };
        Ok(replaced.into_owned())
    }
}

fn invalid(error: &dyn std::fmt::Display) -> SqlError {
    SqlError::new(
        sqlstate::INVALID_REGULAR_EXPRESSION,
        format!("invalid regular expression: {error}"),
    )
}
