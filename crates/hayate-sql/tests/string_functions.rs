//! PostgreSQL's string and math functions that applications call (lpad, split_part, initcap,
//! translate, chr, to_hex, concat_ws, regexp_replace and ~ (back references too), encode/decode, sign, ln, exp, log (numeric of numeric arguments), cbrt, pi
//! ...): each result is the text PostgreSQL 15 prints for the same expression (taken from
//! psql), and each refused argument gives PostgreSQL's SQLSTATE.

use crate::common;

use common::{error_code, open, rows};

/// The first row of `sql`, its columns as text joined by '|' ("" for NULL, as psql -A).
fn line(session: &mut hayate_sql::Session, sql: &str) -> String {
    let rows = rows(session, sql);
    rows[0]
        .iter()
        .map(|value| value.to_text().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("|")
}

#[test]
fn results_are_postgresqls() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = open(dir.path());
    let cases = [
        (
            "SELECT lpad('hi', 5, 'xy'), rpad('hi', 5) || '|', lpad('hello', 3), lpad('hi', 5, '')",
            "xyxhi|hi   ||hel|hi",
        ),
        (
            "SELECT split_part('a,b,,c', ',', 2), split_part('a,b,,c', ',', 3) = '', \
             split_part('a,b,,c', ',', -1), split_part('abc', '', 1)",
            "b|t|c|abc",
        ),
        (
            "SELECT initcap('hello wORLD-foo1bar'), translate('12345', '143', 'ax'), \
             reverse('abc'), starts_with('alphabet', 'alph'), starts_with('alphabet', 'x')",
            "Hello World-Foo1bar|a2x5|cba|t|f",
        ),
        (
            "SELECT chr(65), chr(233), ascii('x'), ascii('é'), ascii(''), to_hex(255), \
             to_hex(-1), to_hex(2147483647), to_hex(-1::bigint)",
            "A|é|120|233|0|ff|ffffffff|7fffffff|ffffffffffffffff",
        ),
        (
            "SELECT concat_ws(',', 'a', NULL, 'b', 3), concat_ws(NULL, 'a') IS NULL, \
             concat_ws('-', 'x')",
            "a,b,3|t|x",
        ),
        (
            "SELECT regexp_replace('Thomas', '.[mN]a.', 'M'), \
             regexp_replace('foobarbaz', 'b(..)', 'X\\1Y', 'g'), \
             regexp_replace('ABC', 'b', '[\\&]', 'i'), regexp_replace('a.b', '.', '-', 'qg'), \
             regexp_replace('a/b', '/', '\\t')",
            "ThM|fooXarYXazY|A[B]C|a-b|a\\tb",
        ),
        (
            // Back references and lookaround, which PostgreSQL's expressions have.
            "SELECT 'aa' ~ '(a)\\1', 'ab' ~ '(a)\\1', 'Abab' ~* '(ab)\\1', \
             'xyz' !~ '(.)\\1', 'aaaa' ~ '(a*)*\\1b', \
             regexp_replace('hello  world  foo', '(\\s)\\1+', '\\1', 'g'), \
             regexp_replace('abcabc-xyxy', '(\\w+)\\1', '[\\1]', 'g'), \
             regexp_replace('foobar', 'o(?=b)', 'X'), \
             regexp_replace('price: 100 dollars', '(?<!\\d)\\d{3}(?!\\d)', 'N')",
            "t|f|t|t|f|hello world foo|[abc]-[xy]|foXbar|price: N dollars",
        ),
        (
            // `.` matches a newline unless the n flag says otherwise, with a back reference
            // too; x ignores blanks in the pattern.
            "SELECT E'a\\nb' ~ 'a.b', regexp_replace(E'a\\nab', '(a).\\1', 'X'), \
             regexp_replace(E'a\\nab', '(a).\\1', 'X', 'n'), \
             regexp_replace('aa-b', '( a ) \\1', 'X', 'x')",
            "t|Xb|a\nab|X-b",
        ),
        (
            "SELECT encode('\\x0102ff'::bytea, 'hex'), encode('\\x0102ff'::bytea, 'base64'), \
             encode('a\\\\b'::bytea, 'escape'), decode('AQL/', 'base64'), \
             decode('0102ff', 'hex'), decode('a\\\\\\\\b\\001', 'escape')",
            "0102ff|AQL/|a\\\\b|\\x0102ff|\\x0102ff|\\x615c5c6201",
        ),
        (
            "SELECT sign(-3.5), sign(0), sign(2), ln(exp(2)), log(100), log10(1000), pi(), exp(0), \
             sign('NaN'::float8), sign('-0'::float8)",
            "-1|0|1|2|2|3|3.141592653589793|1|0|0",
        ),
        (
            // Of numeric arguments, numeric results at PostgreSQL's scales (at least 16
            // significant digits, more near ln(1)); of integers, double precision.
            "SELECT ln(2.0), ln(2), ln(0.001), exp(1.0), exp(1), exp(-5.0), exp(20.0), \
             log(100.0), log(2, 8.0), log(10, 1000), log(0.5), log10(2), sign(-2.5), \
             sign(-0.00), pg_typeof(ln(2.0)), pg_typeof(ln(2)), pg_typeof(log(2, 8))",
            "0.6931471805599453|0.6931471805599453|-6.9077552789821371|2.7182818284590452|\
             2.718281828459045|0.006737946999085467|485165195.40979028|2.0000000000000000|\
             3.0000000000000000|3.0000000000000000|-0.3010299956639812|0.3010299956639812|-1|\
             0|numeric|double precision|numeric",
        ),
        (
            "SELECT ln(1.05), ln(1.0000001), exp(0.0), ln(1.0), log(8.0, 2.0), exp(30.0), \
             exp(40.5), ln(99999.999), ln(0.00012345), log(3.0, 100000.0), log10(0.001), \
             exp(2.302585092994045684), ln(7.389056), exp(-1.5), log(12.5::numeric(10,4))",
            "0.048790164169432003|0.00000009999999500000033|1.0000000000000000|\
             0.0000000000000000|0.3333333333333333|10686474581524.462|388084696243620324.0|\
             11.512925454970228|-8.9996743421730856|10.479516371446923|-3.0000000000000000|\
             10.000000000000000000|1.9999999866111923|0.2231301601484298|1.0969100130080564",
        ),
        (
            // Just below 1 (no digits lost to cancellation), and a scale from PostgreSQL's
            // estimate of ln's weight (from 22026, under 10: 16 decimals).
            "SELECT ln(0.99999999999), ln(22026.47), log(0.95), exp(9.2103), ln(1.1052), \
             ln(1.2), ln(0.00012345)",
            "-0.000000000010000000000050000|10.0000001909154615|-0.022276394711152234|\
             9999.5962883875453|0.1000263140671244|0.1823215567939546|-8.9996743421730856",
        ),
        (
            "SELECT string_agg(ln(x) || ' ' || exp(x) || ' ' || log(x), ',' ORDER BY x) \
             FROM (VALUES (0.25), (3.14159), (9.9)) v(x)",
            "-1.3862943611198906 1.2840254166877415 -0.6020599913279624,\
             1.1447290411851784 23.140631226954963 0.4971495058611233,\
             2.2925347571405442 19930.370438230289 0.9956351945975499",
        ),
        (
            "SELECT lpad(NULL, 3), split_part('a', NULL, 1) IS NULL",
            "|t",
        ),
    ];
    for (sql, expected) in cases {
        assert_eq!(line(&mut s, sql), expected, "{sql}");
    }
}

#[test]
fn refused_arguments_give_postgresqls_sqlstates() {
    let dir = tempfile::tempdir().unwrap();
    let (_db, mut s) = open(dir.path());
    let cases = [
        ("SELECT ln(0)", "2201E"),
        ("SELECT ln(-1)", "2201E"),
        ("SELECT log(1, 8)", "22012"),
        ("SELECT split_part('a', ',', 0)", "22023"),
        ("SELECT regexp_replace('a', '(', 'b')", "2201B"),
        ("SELECT 'a' ~ '(a)\\2'", "2201B"),
        ("SELECT ln(0.0)", "2201E"),
        ("SELECT ln(-1.0)", "2201E"),
        ("SELECT log(0.0, 5)", "2201E"),
        ("SELECT log(1, 5.0)", "22012"),
        // Forms only the backtracking crate reads, which PostgreSQL refuses.
        ("SELECT 'aa' ~ '(a)\\1\\g<1>'", "2201B"),
        ("SELECT 'aa' ~ '(?>a)\\1'", "2201B"),
        ("SELECT 'aa' ~ '(a)\\1a++'", "2201B"),
        ("SELECT regexp_replace('a', 'a', 'b', 'z')", "22023"),
        ("SELECT chr(0)", "54000"),
        ("SELECT decode('abc', 'hex')", "22023"),
        ("SELECT encode('\\x01'::bytea, 'rot13')", "22023"),
        ("SELECT exp(1000)", "22003"),
        ("SELECT exp(-1000)", "22003"),
        ("SELECT log(1, 0)", "2201E"),
        ("SELECT chr(-1)", "54000"),
        ("SELECT decode('+1', 'hex')", "22023"),
        ("SELECT lpad('a', 1000000000)", "54000"),
        ("SELECT concat_ws()", "42883"),
    ];
    for (sql, code) in cases {
        assert_eq!(error_code(&mut s, sql), code, "{sql}");
    }
}
