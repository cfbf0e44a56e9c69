//! The `Session` methods that run a COPY (the steps of the `copy` module doc).
//!
//! 1. `copy_in` resolves the table and columns (`copy_target`), prepares the INSERT the rows
//!    go through and opens their transaction; `check_copy` does the checks alone.
//! 2. `copy_data` inserts the complete records of each CopyData message (`copy_records`);
//!    `copy_done` the last one, then commits; `copy_fail` aborts.
//! 3. `copy_out` runs a SELECT of the columns and formats its rows (`output`).

use super::input::{invalid_utf8, CopyIn, TargetColumn, RECORD_BYTES_MAX};
use super::output::encode_record;
use super::{CopyDirection, CopyFailure, CopyFormat, CopyStatement, Field};
use crate::error::{sqlstate, SqlError, SqlResult};
use crate::exec::Outcome;
use crate::session::Session;
use crate::types::{DataType, Value};

fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Session {
    /// Starts COPY FROM STDIN: resolves the table and columns and opens the transaction
    /// the rows go into.
    pub fn copy_in(&mut self, statement: &CopyStatement) -> SqlResult<CopyIn> {
        if statement.direction != CopyDirection::FromStdin {
            return Err(SqlError::new(
                sqlstate::INTERNAL_ERROR,
                "copy_in of a COPY TO",
            ));
        }
        let prepared = self.copy_target(statement).and_then(|(columns, sql)| {
            let insert = crate::session::parse(&sql)?
                .pop()
                .ok_or_else(|| SqlError::syntax("empty query"))?;
            let types: Vec<DataType> = columns.iter().map(|c| c.data_type).collect();
            Ok((columns, self.prepare(insert, &types)?))
        });
        let (columns, insert) = prepared.inspect_err(|_| self.note_error())?;
        let implicit = self.begin_implicit()?;
        let text = format!("COPY {} FROM STDIN", statement.table);
        self.note_statement_start(&std::sync::Arc::from(text.as_str()));
        Ok(CopyIn {
            table: statement.table.clone(),
            columns,
            options: statement.options.clone(),
            insert,
            implicit,
            pending: Vec::new(),
            scanned: 0,
            in_quotes: false,
            line: 0,
            rows: 0,
            ended: false,
        })
    }

    /// Checks that the table and columns of a COPY exist (the extended protocol reports
    /// this at Parse, before the client starts sending data).
    pub fn check_copy(&self, statement: &CopyStatement) -> SqlResult<()> {
        self.copy_target(statement).map(|_| ())
    }

    /// The target columns of a COPY and the INSERT statement that stores a row.
    fn copy_target(&self, statement: &CopyStatement) -> SqlResult<(Vec<TargetColumn>, String)> {
        let table = self.catalog.table(&statement.table)?;
        let names: Vec<String> = if statement.columns.is_empty() {
            table.def.columns.iter().map(|c| c.name.clone()).collect()
        } else {
            statement.columns.clone()
        };
        let options = &statement.options;
        let mut columns: Vec<TargetColumn> = Vec::with_capacity(names.len());
        for name in &names {
            let index = table.def.column_index(name).ok_or_else(|| {
                SqlError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!(
                        "column \"{name}\" of relation \"{}\" does not exist",
                        statement.table
                    ),
                )
            })?;
            if columns.iter().any(|c| c.name == *name) {
                return Err(SqlError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{name}\" specified more than once"),
                ));
            }
            let data_type = table.def.columns[index].data_type;
            columns.push(TargetColumn {
                name: name.clone(),
                data_type,
                enum_type: match data_type {
                    DataType::Enum(oid) => self.catalog.enum_type_by_oid(oid),
                    _ => None,
                },
                force_not_null: options.force_not_null.contains(name),
                force_null: options.force_null.contains(name),
            });
        }
        for forced in options.force_not_null.iter().chain(&options.force_null) {
            if !names.contains(forced) {
                return Err(SqlError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("FORCE_NOT_NULL/FORCE_NULL column \"{forced}\" not referenced by COPY"),
                ));
            }
        }
        let quoted: Vec<String> = names.iter().map(|n| quote_identifier(n)).collect();
        let params: Vec<String> = (1..=names.len()).map(|n| format!("${n}")).collect();
        let sql = format!(
            "INSERT INTO {} ({}) VALUES ({})",
            quote_identifier(&table.def.name),
            quoted.join(", "),
            params.join(", ")
        );
        Ok((columns, sql))
    }

    /// Takes one CopyData message: inserts every record it completes. On an error the
    /// COPY is over (its transaction aborted, or the client's block failed).
    pub fn copy_data(&mut self, copy: &mut CopyIn, data: &[u8]) -> Result<(), CopyFailure> {
        let result = self.copy_records(copy, data, false);
        if result.is_err() {
            self.copy_abort(copy);
            self.note_statement_end();
        }
        result
    }

    /// Ends the data: inserts a last record without a newline and commits a COPY that runs
    /// in its own transaction. Returns the number of rows.
    pub fn copy_done(&mut self, mut copy: CopyIn) -> Result<u64, CopyFailure> {
        if let Err(failure) = self.copy_records(&mut copy, &[], true) {
            self.copy_abort(&copy);
            self.note_statement_end();
            return Err(failure);
        }
        let ended = match copy.implicit {
            true => self.end_implicit(true),
            false => Ok(()),
        };
        self.note_statement_end();
        ended?;
        Ok(copy.rows)
    }

    /// The client gave up (CopyFail): the COPY's rows are rolled back.
    pub fn copy_fail(&mut self, copy: CopyIn, message: &str) -> SqlError {
        self.copy_abort(&copy);
        self.note_statement_end();
        SqlError::new(
            sqlstate::QUERY_CANCELED,
            format!("COPY from stdin failed: {message}"),
        )
    }

    fn copy_abort(&mut self, copy: &CopyIn) {
        if copy.implicit {
            let _ = self.end_implicit(false);
        } else {
            self.note_error();
        }
    }

    fn copy_records(
        &mut self,
        copy: &mut CopyIn,
        data: &[u8],
        last: bool,
    ) -> Result<(), CopyFailure> {
        crate::interrupt::check()?;
        if copy.ended {
            return Ok(());
        }
        copy.pending.extend_from_slice(data);
        // Records are taken from `start` on; the consumed bytes leave the buffer at the end.
        let mut start = 0;
        loop {
            let (end, next) = match copy.find_record_end() {
                Some((end, next)) => (end, next.max(start)),
                None if last && start < copy.pending.len() => {
                    if copy.in_quotes {
                        copy.line += 1;
                        return Err(copy.failure(SqlError::new(
                            sqlstate::BAD_COPY_FILE_FORMAT,
                            "unterminated CSV quoted field",
                        )));
                    }
                    let len = copy.pending.len();
                    copy.scanned = len;
                    let end = if copy.pending.ends_with(b"\r") {
                        len - 1
                    } else {
                        len
                    };
                    (end.max(start), len)
                }
                None => break,
            };
            let record = copy.pending[start..end].to_vec();
            start = next;
            copy.line += 1;
            crate::interrupt::check().map_err(|error| copy.failure(error))?;
            self.copy_record(copy, &record)?;
            if copy.ended {
                break;
            }
        }
        if copy.ended {
            copy.pending = Vec::new();
            copy.scanned = 0;
            return Ok(());
        }
        copy.pending.drain(..start);
        copy.scanned -= start;
        if copy.pending.len() > RECORD_BYTES_MAX {
            copy.line += 1;
            return Err(copy.failure(SqlError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!("COPY record longer than {RECORD_BYTES_MAX} bytes"),
            )));
        }
        Ok(())
    }

    fn copy_record(&mut self, copy: &mut CopyIn, record: &[u8]) -> Result<(), CopyFailure> {
        if record == b"\\." {
            copy.ended = true;
            return Ok(());
        }
        if copy.line == 1 && copy.options.header {
            return Ok(());
        }
        let text = std::str::from_utf8(record).map_err(|error| {
            let start = error.valid_up_to();
            copy.failure(invalid_utf8(&record[start..(start + 2).min(record.len())]))
        })?;
        let fields = copy.fields(text).map_err(|error| copy.failure(error))?;
        let values = copy.values(fields)?;
        self.execute_params_listed(&copy.insert, &values)
            .map_err(|error| copy.failure(error))?;
        copy.rows += 1;
        Ok(())
    }

    /// COPY TO STDOUT: the number of columns, and the table's rows as encoded records
    /// (after a CSV header line if asked for).
    pub fn copy_out(&mut self, statement: &CopyStatement) -> SqlResult<(usize, Vec<Vec<u8>>)> {
        let table = self.catalog.table(&statement.table)?;
        let names: Vec<String> = if statement.columns.is_empty() {
            table.def.columns.iter().map(|c| c.name.clone()).collect()
        } else {
            statement.columns.clone()
        };
        let quoted: Vec<String> = names.iter().map(|n| quote_identifier(n)).collect();
        let sql = format!(
            "SELECT {} FROM {}",
            quoted.join(", "),
            quote_identifier(&table.def.name)
        );
        let mut outcomes = self.execute_sql(&sql);
        let rows = match outcomes.pop() {
            Some(Ok(Outcome::Rows { rows, .. })) => rows,
            Some(Err(error)) => return Err(error),
            _ => return Err(SqlError::new(sqlstate::INTERNAL_ERROR, "COPY TO: no rows")),
        };
        let options = &statement.options;
        let mut records = Vec::with_capacity(rows.len() + 1);
        if options.header && options.format == CopyFormat::Csv {
            let header: Vec<Field> = names.iter().cloned().map(Some).collect();
            records.push(encode_record(&header, options));
        }
        for row in rows {
            let fields: Vec<Field> = row.iter().map(Value::to_text).collect();
            records.push(encode_record(&fields, options));
        }
        Ok((names.len(), records))
    }
}
