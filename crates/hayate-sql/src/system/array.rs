//! Arrays in their PostgreSQL text form (`{a,b,"c d",NULL}`), carried in text values.
//!
//! The catalog's array columns (`indkey`, `conkey`, `datacl`...) and `current_schemas()` need
//! only a few array operations (`= ANY`, `array_position`, `array_to_string`, subscripts);
//! this keeps them out of the value model until arrays become a real type.

/// Parses an array's text form; None if `text` is not one. Elements keep their text form;
/// None is NULL.
pub fn parse(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut elements = Vec::new();
    if inner.trim().is_empty() {
        return Some(elements);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut element = String::new();
        let mut quoted = false;
        if chars.peek() == Some(&'"') {
            quoted = true;
            chars.next();
            loop {
                match chars.next()? {
                    '\\' => element.push(chars.next()?),
                    '"' => break,
                    c => element.push(c),
                }
            }
        }
        while let Some(&c) = chars.peek() {
            if c == ',' {
                break;
            }
            chars.next();
            match c {
                '\\' => element.push(chars.next()?),
                c if quoted && c.is_whitespace() => {}
                c => element.push(c),
            }
        }
        // An unquoted brace starts another dimension: one-dimensional arrays only.
        if !quoted && element.contains(['{', '}']) {
            return None;
        }
        let element = if quoted {
            element
        } else {
            element.trim_end().to_string()
        };
        if !quoted && element.eq_ignore_ascii_case("null") {
            elements.push(None);
        } else {
            elements.push(Some(element));
        }
        match chars.next() {
            Some(',') => continue,
            None => return Some(elements),
            Some(_) => return None,
        }
    }
}

/// Writes elements in the array text form, quoting where PostgreSQL does.
pub fn format<S: AsRef<str>>(elements: &[Option<S>]) -> String {
    let mut out = String::from("{");
    for (position, element) in elements.iter().enumerate() {
        if position > 0 {
            out.push(',');
        }
        match element {
            None => out.push_str("NULL"),
            Some(element) => {
                let element = element.as_ref();
                let needs_quotes = element.is_empty()
                    || element.eq_ignore_ascii_case("null")
                    || element
                        .chars()
                        .any(|c| matches!(c, '{' | '}' | ',' | '"' | '\\') || c.is_whitespace());
                if needs_quotes {
                    out.push('"');
                    for c in element.chars() {
                        if c == '"' || c == '\\' {
                            out.push('\\');
                        }
                        out.push(c);
                    }
                    out.push('"');
                } else {
                    out.push_str(element);
                }
            }
        }
    }
    out.push('}');
    out
}

/// The elements of an array's text form or of an int2vector/oidvector's (numbers separated
/// by spaces, as pg_index.indkey holds them); None if `text` is neither.
pub fn elements(text: &str) -> Option<Vec<Option<String>>> {
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        return parse(text);
    }
    // A record's text form, `(x,n)`: its fields.
    if let Some(fields) = trimmed.strip_prefix('(').and_then(|t| t.strip_suffix(')')) {
        return parse(&format!("{{{fields}}}"));
    }
    let numbers: Vec<Option<String>> = text
        .split_whitespace()
        .map(|e| Some(e.to_string()))
        .collect();
    numbers
        .iter()
        .flatten()
        .all(|e| e.parse::<i64>().is_ok())
        .then_some(numbers)
}

/// An int2vector/oidvector's text form: the numbers separated by spaces.
pub fn vector<I: IntoIterator<Item = i64>>(values: I) -> String {
    values
        .into_iter()
        .map(|value| value.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let elements = vec![
            Some("pg_catalog".to_string()),
            None,
            Some("a b".into()),
            Some("".into()),
            Some("q\"x".into()),
        ];
        let text = format(&elements);
        assert_eq!(text, r#"{pg_catalog,NULL,"a b","","q\"x"}"#);
        assert_eq!(parse(&text), Some(elements));
        assert_eq!(parse("{}"), Some(vec![]));
        assert_eq!(parse("{0}"), Some(vec![Some("0".into())]));
        assert_eq!(parse("not an array"), None);
        assert_eq!(parse("{\"unterminated}"), None);
        assert_eq!(vector([1, 2]), "1 2");
    }
}
