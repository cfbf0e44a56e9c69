//! HTML building blocks of the report: escaping, number formats, tables and the page's style.
//!
//! Every piece of text that comes from a results file (engine names, settings, command lines,
//! file names) goes through `escape` before it is put into HTML or SVG.

use std::fmt::Write;

/// Escapes text for HTML and SVG content and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for character in text.chars() {
        match character {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// A number with at most `decimals` decimals, trailing zeros removed ("12.5", "3", "0.25").
pub fn format_decimal(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// A short number for axis ticks and bar labels: "1.2M", "350k", "12.5", "0.05".
pub fn format_short(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 1e9 {
        format!("{}G", format_decimal(value / 1e9, 1))
    } else if magnitude >= 1e6 {
        format!("{}M", format_decimal(value / 1e6, 1))
    } else if magnitude >= 1e4 {
        format!("{}k", format_decimal(value / 1e3, 0))
    } else if magnitude >= 1e3 {
        format!("{}k", format_decimal(value / 1e3, 1))
    } else if magnitude >= 10.0 {
        format_decimal(value, 0)
    } else if magnitude >= 1.0 {
        format_decimal(value, 1)
    } else {
        format_decimal(value, 2)
    }
}

/// A count or rate with thousands separators, rounded to an integer ("1,234,567").
pub fn format_grouped(value: f64) -> String {
    if !value.is_finite() {
        return "-".to_string();
    }
    let rounded = value.round();
    let digits = format!("{}", rounded.abs() as u64);
    let mut out = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    if rounded < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// A figure for tables: one decimal below 1,000, grouped digits above ("12.3", "1,250").
pub fn format_number(value: f64) -> String {
    if value >= 1000.0 {
        format_grouped(value)
    } else {
        format_decimal(value, 1)
    }
}

/// A share 0..1 as a percentage ("93.1%").
pub fn format_percent(share: f64) -> String {
    format!("{}%", format_decimal(share * 100.0, 1))
}

/// "-" for a missing figure.
pub fn or_dash(value: Option<String>) -> String {
    value.unwrap_or_else(|| "-".to_string())
}

/// A table. `headers` are text (escaped here); cells are HTML (escape text with `escape`).
pub fn table(headers: &[&str], rows: &[Vec<String>], class: &str) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<div class=\"table-wrap\"><table class=\"{}\"><thead><tr>",
        escape(class)
    );
    for header in headers {
        let _ = write!(out, "<th>{}</th>", escape(header));
    }
    out.push_str("</tr></thead><tbody>");
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// The date and time (UTC) of a Unix timestamp, "2024-05-01 13:45 UTC".
pub fn format_unix_time(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let second_of_day = seconds % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let shifted = days + 719_468;
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        second_of_day / 3600,
        second_of_day % 3600 / 60
    )
}

/// The page's style sheet: system fonts, a light neutral palette, readable tables.
pub const STYLE: &str = r#"
:root { --ink: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; --accent: #0072b2; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--ink); font: 14px/1.5 system-ui, -apple-system,
  "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1320px; margin: 0 auto; padding: 28px 32px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; letter-spacing: -0.01em; }
h2 { font-size: 20px; margin: 40px 0 8px; padding-bottom: 6px;
  border-bottom: 1px solid var(--line); }
h3 { font-size: 16px; margin: 24px 0 8px; }
p, li { max-width: 900px; }
.subtitle { color: var(--muted); margin: 0 0 20px; }
.muted { color: var(--muted); }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12.5px; }
nav.toc { background: var(--soft); border: 1px solid var(--line); border-radius: 6px;
  padding: 10px 16px; margin: 16px 0; }
nav.toc a { margin-right: 18px; color: var(--accent); text-decoration: none; }
.cards { display: grid; grid-template-columns: repeat(3, 1fr); gap: 12px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; background: #fff; }
.card.wide { grid-column: 1 / -1; }
.card h4 { margin: 0 0 4px; font-size: 12px; text-transform: uppercase; letter-spacing: .04em;
  color: var(--muted); }
.notice { border-left: 4px solid #e69f00; background: #fff8e6; padding: 8px 14px; margin: 14px 0;
  border-radius: 0 6px 6px 0; }
.badge { display: inline-block; padding: 0 6px; border-radius: 10px; font-size: 11.5px;
  white-space: nowrap; }
.badge.emulated { background: #fff1cc; color: #7a4b00; border: 1px solid #e69f00; }
.badge.real { background: #e6f2fa; color: #004d7a; border: 1px solid #56b4e9; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(600px, 1fr)); gap: 18px;
  align-items: start; }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 8px;
  background: #fff; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { color: var(--muted); font-size: 12.5px; padding: 4px 6px 2px; }
.table-wrap { overflow-x: auto; margin: 8px 0 16px; }
table { border-collapse: collapse; font-size: 12.5px; font-variant-numeric: tabular-nums; }
th, td { padding: 4px 8px; border-bottom: 1px solid var(--line); text-align: right;
  vertical-align: top; white-space: nowrap; }
table.runs td:nth-child(-n+4), table.runs th:nth-child(-n+4) { text-align: left; }
th { background: var(--soft); font-weight: 600; position: sticky; top: 0; white-space: nowrap; }
td:first-child, th:first-child { text-align: left; }
table.text td, table.text th { text-align: left; }
table.text td { white-space: normal; }
tbody tr:hover { background: #f3f7fb; }
.skipped li { color: #8a1c1c; }
footer { margin-top: 48px; color: var(--muted); font-size: 12px; }
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_neutralizes_markup() {
        assert_eq!(
            escape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;"
        );
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(format_short(1_234_567.0), "1.2M");
        assert_eq!(format_short(350_000.0), "350k");
        assert_eq!(format_short(2_500.0), "2.5k");
        assert_eq!(format_short(12.0), "12");
        assert_eq!(format_short(0.05), "0.05");
        assert_eq!(format_grouped(1_234_567.4), "1,234,567");
        assert_eq!(format_grouped(-1000.0), "-1,000");
        assert_eq!(format_percent(0.931), "93.1%");
        assert_eq!(format_unix_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(format_unix_time(1_714_571_100), "2024-05-01 13:45 UTC");
    }
}
