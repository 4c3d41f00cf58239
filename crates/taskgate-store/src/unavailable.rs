//! Which storage failures mean "the database cannot serve just now" rather
//! than "this operation is wrong": the first are answered `503
//! storage_unavailable` with `Retry-After` (a client retries and succeeds
//! once the database is back), the others are bugs or broken data (`500`).
//!
//! Every driver error enters [`crate::StoreError`] through `From`, which asks
//! this module, so no path of either backend can forget to classify: a
//! PostgreSQL stopped by its operator (`pg_ctl stop -m fast` sends `57P01`
//! to every session) is the same `Unavailable` whether a read, a batch of
//! writes or a connection attempt met it.

use sqlx::postgres::PgDatabaseError;
use sqlx::sqlite::SqliteError;

/// Whether `e` is a passing condition of the database or the way to it.
pub(crate) fn sqlx_unavailable(e: &sqlx::Error) -> bool {
    match e {
        // The way to the database: the socket, TLS, the pool waiting for a
        // connection (every one busy or none can be made), the pool closed
        // at shutdown, SQLite's worker thread gone.
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => {
            if let Some(pg) = db.try_downcast_ref::<PgDatabaseError>() {
                sqlstate_unavailable(pg.code())
            } else if db.try_downcast_ref::<SqliteError>().is_some() {
                // SQLite's code is its extended result code, in decimal.
                db.code()
                    .and_then(|c| c.parse::<i32>().ok())
                    .is_some_and(sqlite_code_unavailable)
            } else {
                false
            }
        }
        _ => false,
    }
}

/// PostgreSQL's SQLSTATE classes and codes that pass by themselves or by
/// an operator's hand, never by changing the request:
///
/// - `08` connection exception (the connection failed or was lost);
/// - `53` insufficient resources (disk full, out of memory, too many
///   connections);
/// - `57` operator intervention (`57P01` admin shutdown, `57P02` crash
///   shutdown, `57P03` cannot connect now, `57014` a statement cancelled
///   by the operator or a timeout);
/// - `58030` I/O error;
/// - `25006` read-only transaction: a standby after a failover;
/// - `40001` / `40P01` serialization failure and deadlock, met again after
///   the store's own retries, and `55P03` a lock not available in time.
pub(crate) fn sqlstate_unavailable(code: &str) -> bool {
    let class = code.get(..2).unwrap_or("");
    matches!(class, "08" | "53" | "57")
        || matches!(code, "58030" | "25006" | "40001" | "40P01" | "55P03")
}

/// SQLite's result codes (the primary code is the low byte of an extended
/// one) that pass or are the operator's to fix, not the request's: busy
/// and locked past the busy timeout, out of memory, I/O errors, disk full,
/// the file cannot be opened, the database is read-only (a file system
/// remounted, a file's mode changed).
pub(crate) fn sqlite_code_unavailable(code: i32) -> bool {
    use rusqlite::ffi;
    matches!(
        code & 0xff,
        ffi::SQLITE_BUSY
            | ffi::SQLITE_LOCKED
            | ffi::SQLITE_NOMEM
            | ffi::SQLITE_READONLY
            | ffi::SQLITE_IOERR
            | ffi::SQLITE_FULL
            | ffi::SQLITE_CANTOPEN
            | ffi::SQLITE_PROTOCOL
    )
}

/// The same for rusqlite's errors (the SQLite writer and readers).
pub(crate) fn rusqlite_unavailable(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => sqlite_code_unavailable(f.extended_code),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;

    #[test]
    fn postgresql_errors_are_classified_by_sqlstate_class() {
        for code in [
            "08000", "08003", "08006", "08001", "08004", "08P01", // connection
            "53000", "53100", "53200", "53300", "53400", // resources
            "57000", "57014", "57P01", "57P02", "57P03", "57P05", // operator
            "58030", "25006", "40001", "40P01", "55P03",
        ] {
            assert!(sqlstate_unavailable(code), "{code}");
        }
        for code in [
            "23505", "23503", "22P02", "42601", "42P01", "XX000", "XX001", "58P01", "0A000", "",
            "5",
        ] {
            assert!(!sqlstate_unavailable(code), "{code}");
        }
    }

    #[test]
    fn sqlite_errors_are_classified_by_primary_code() {
        use rusqlite::ffi;
        for code in [
            ffi::SQLITE_BUSY,
            ffi::SQLITE_BUSY_SNAPSHOT,
            ffi::SQLITE_BUSY_TIMEOUT,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_NOMEM,
            ffi::SQLITE_READONLY,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_IOERR_WRITE,
            ffi::SQLITE_IOERR_FSYNC,
            ffi::SQLITE_FULL,
            ffi::SQLITE_CANTOPEN,
        ] {
            assert!(sqlite_code_unavailable(code), "{code}");
            let e = rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
            assert!(StoreError::from(e).is_unavailable(), "{code}");
        }
        for code in [
            ffi::SQLITE_CONSTRAINT,
            ffi::SQLITE_CONSTRAINT_PRIMARYKEY,
            ffi::SQLITE_CONSTRAINT_UNIQUE,
            ffi::SQLITE_CORRUPT,
            ffi::SQLITE_NOTADB,
            ffi::SQLITE_ERROR,
            ffi::SQLITE_MISMATCH,
            ffi::SQLITE_TOOBIG,
        ] {
            assert!(!sqlite_code_unavailable(code), "{code}");
            let e = rusqlite::Error::SqliteFailure(ffi::Error::new(code), None);
            assert!(!StoreError::from(e).is_unavailable(), "{code}");
        }
        assert!(!StoreError::from(rusqlite::Error::QueryReturnedNoRows).is_unavailable());
    }

    #[test]
    fn driver_errors_of_the_way_to_the_database_are_unavailable() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        for e in [
            sqlx::Error::Io(io()),
            sqlx::Error::Tls("handshake".into()),
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::WorkerCrashed,
        ] {
            let shown = e.to_string();
            assert!(StoreError::from(e).is_unavailable(), "{shown}");
        }
        for e in [
            sqlx::Error::RowNotFound,
            sqlx::Error::Protocol("unexpected message".to_owned()),
            sqlx::Error::ColumnNotFound("x".to_owned()),
        ] {
            let shown = e.to_string();
            assert!(!StoreError::from(e).is_unavailable(), "{shown}");
        }
        assert!(StoreError::WriterStopped.is_unavailable());
        assert!(!StoreError::NotFound.is_unavailable());
        assert!(!StoreError::Conflict("x".to_owned()).is_unavailable());
    }
}
