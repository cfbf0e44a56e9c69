//! SQL errors: a PostgreSQL SQLSTATE code and a message, so the server can report them as
//! PostgreSQL does.

use hayate_engine::Error as EngineError;

/// The SQLSTATE codes the SQL layer raises (see PostgreSQL's errcodes appendix).
pub mod sqlstate {
    pub const SYNTAX_ERROR: &str = "42601";
    pub const UNDEFINED_TABLE: &str = "42P01";
    pub const UNDEFINED_COLUMN: &str = "42703";
    pub const UNDEFINED_FUNCTION: &str = "42883";
    pub const DUPLICATE_TABLE: &str = "42P07";
    pub const DUPLICATE_COLUMN: &str = "42701";
    pub const AMBIGUOUS_COLUMN: &str = "42702";
    pub const DATATYPE_MISMATCH: &str = "42804";
    pub const CANNOT_COERCE: &str = "42846";
    pub const GROUPING_ERROR: &str = "42803";
    pub const INVALID_TABLE_DEFINITION: &str = "42P16";
    pub const UNDEFINED_OBJECT: &str = "42704";
    pub const UNIQUE_VIOLATION: &str = "23505";
    pub const NOT_NULL_VIOLATION: &str = "23502";
    pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
    pub const GENERATED_ALWAYS: &str = "428C9";
    pub const CARDINALITY_VIOLATION: &str = "21000";
    pub const SEQUENCE_GENERATOR_LIMIT_EXCEEDED: &str = "2200H";
    pub const SERIALIZATION_FAILURE: &str = "40001";
    pub const DEADLOCK_DETECTED: &str = "40P01";
    pub const LOCK_NOT_AVAILABLE: &str = "55P03";
    pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
    pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
    pub const DIVISION_BY_ZERO: &str = "22012";
    pub const STRING_DATA_RIGHT_TRUNCATION: &str = "22001";
    pub const INVALID_DATETIME_FORMAT: &str = "22007";
    pub const DATETIME_FIELD_OVERFLOW: &str = "22008";
    pub const DATETIME_VALUE_OUT_OF_RANGE: &str = "22008";
    pub const INVALID_BINARY_REPRESENTATION: &str = "22P03";
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    pub const INVALID_REGULAR_EXPRESSION: &str = "2201B";
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    pub const IN_FAILED_SQL_TRANSACTION: &str = "25P02";
    pub const ACTIVE_SQL_TRANSACTION: &str = "25001";
    pub const NO_ACTIVE_SQL_TRANSACTION: &str = "25P01";
    pub const READ_ONLY_SQL_TRANSACTION: &str = "25006";
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    pub const STATEMENT_TOO_COMPLEX: &str = "54001";
    pub const SNAPSHOT_TOO_OLD: &str = "72000";
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    pub const QUERY_CANCELED: &str = "57014";
    pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
    pub const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";
    pub const INVALID_PASSWORD: &str = "28P01";
    pub const INVALID_AUTHORIZATION_SPECIFICATION: &str = "28000";
    pub const TOO_MANY_CONNECTIONS: &str = "53300";
    pub const IO_ERROR: &str = "58030";
    pub const DATA_CORRUPTED: &str = "XX001";
    pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
    pub const INVALID_CURSOR_NAME: &str = "34000";
    pub const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
    pub const INVALID_SAVEPOINT_SPECIFICATION: &str = "3B001";
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
    pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
    pub const FOREIGN_KEY_VIOLATION: &str = "23503";
    pub const CHECK_VIOLATION: &str = "23514";
    pub const INVALID_FOREIGN_KEY: &str = "42830";
    pub const DUPLICATE_OBJECT: &str = "42710";
    pub const DUPLICATE_DATABASE: &str = "42P04";
    pub const INVALID_CATALOG_NAME: &str = "3D000";
    pub const OBJECT_IN_USE: &str = "55006";
    pub const CANT_CHANGE_RUNTIME_PARAM: &str = "55P02";
    pub const WRONG_OBJECT_TYPE: &str = "42809";
    pub const INVALID_SCHEMA_NAME: &str = "3F000";
    pub const INTERNAL_ERROR: &str = "XX000";
    pub const INVALID_OBJECT_DEFINITION: &str = "42P17";
    /// The server stops serving this session (a primary that lost its role).
    pub const ADMIN_SHUTDOWN: &str = "57P01";
}

/// An error of a statement, with the SQLSTATE a PostgreSQL client expects for it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SqlError {
    pub code: &'static str,
    pub message: String,
    /// PostgreSQL's DETAIL field (e.g. which key was duplicated).
    pub detail: Option<String>,
}

pub type SqlResult<T> = std::result::Result<T, SqlError>;

impl SqlError {
    pub fn new(code: &'static str, message: impl Into<String>) -> SqlError {
        SqlError {
            code,
            message: message.into(),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> SqlError {
        self.detail = Some(detail.into());
        self
    }

    pub fn syntax(message: impl Into<String>) -> SqlError {
        SqlError::new(sqlstate::SYNTAX_ERROR, message)
    }

    pub fn unsupported(what: impl std::fmt::Display) -> SqlError {
        SqlError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            format!("{what} is not supported yet"),
        )
    }

    pub fn mismatch(message: impl Into<String>) -> SqlError {
        SqlError::new(sqlstate::DATATYPE_MISMATCH, message)
    }

    /// True for errors after which the client should retry the whole transaction.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.code,
            sqlstate::SERIALIZATION_FAILURE | sqlstate::DEADLOCK_DETECTED
        )
    }
}

impl From<EngineError> for SqlError {
    fn from(error: EngineError) -> SqlError {
        let code = match &error {
            EngineError::SerializationFailure | EngineError::ReadWriteConflict => {
                sqlstate::SERIALIZATION_FAILURE
            }
            EngineError::Deadlock => sqlstate::DEADLOCK_DETECTED,
            EngineError::LockTimeout(_) => sqlstate::LOCK_NOT_AVAILABLE,
            EngineError::DuplicateKey => sqlstate::UNIQUE_VIOLATION,
            EngineError::NoSuchTable(_) => sqlstate::UNDEFINED_TABLE,
            EngineError::TableExists(_) => sqlstate::DUPLICATE_TABLE,
            EngineError::ReadOnlyTransaction | EngineError::Standby => {
                sqlstate::READ_ONLY_SQL_TRANSACTION
            }
            EngineError::NotPrimary(_) => sqlstate::ADMIN_SHUTDOWN,
            EngineError::ValueTooLarge { .. } | EngineError::InvalidArgument(_) => {
                sqlstate::PROGRAM_LIMIT_EXCEEDED
            }
            EngineError::SnapshotTooOld => sqlstate::SNAPSHOT_TOO_OLD,
            EngineError::Unsupported(_) => sqlstate::FEATURE_NOT_SUPPORTED,
            EngineError::Io { .. } | EngineError::DiskFull { .. } => sqlstate::IO_ERROR,
            EngineError::Corruption { .. } => sqlstate::DATA_CORRUPTED,
            EngineError::Poisoned(_) | EngineError::TransactionClosed => sqlstate::INTERNAL_ERROR,
        };
        let message = match &error {
            EngineError::DuplicateKey => {
                "duplicate key value violates unique constraint".to_string()
            }
            other => other.to_string(),
        };
        SqlError::new(code, message)
    }
}
