//! Fresh stores for the checks: a temporary SQLite file, or a PostgreSQL
//! database created for the test and dropped after it, pass or fail.

use std::future::Future;
use std::panic::resume_unwind;
use std::sync::Arc;
use std::time::Duration;

use sqlx::AssertSqlSafe;
use sqlx::{Connection, PgConnection};
use taskgate_core::RequestId;
use taskgate_store::Store;

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Runs `check` against a store in a new SQLite file, then deletes the file.
pub async fn sqlite<F, Fut>(check: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    sqlite_with_url(move |store, _| check(store)).await
}

/// Runs `check` against a store in a new PostgreSQL database, then drops it.
///
/// Without a reachable server this skips (prints `SKIPPED: …`), or fails when
/// `CI=true`.
pub async fn postgres<F, Fut>(check: F)
where
    F: FnOnce(Arc<dyn Store>) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    postgres_with_url(move |store, _| check(store)).await
}

/// [`sqlite`], for checks that also open the database themselves (its URL).
pub async fn sqlite_with_url<F, Fut>(check: F)
where
    F: FnOnce(Arc<dyn Store>, String) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let path = std::env::temp_dir().join(format!("taskgate_conf_{}.db", unique_suffix()));
    let url = format!("sqlite://{}", path.display());
    let outcome = tokio::spawn(run(url, "sqlite", check)).await;
    for suffix in ["", "-wal", "-shm"] {
        let mut file = path.clone().into_os_string();
        file.push(suffix);
        let _ = std::fs::remove_file(file);
    }
    if let Err(e) = outcome {
        resume_unwind(e.into_panic());
    }
}

/// [`postgres`], for checks that also open the database themselves.
pub async fn postgres_with_url<F, Fut>(check: F)
where
    F: FnOnce(Arc<dyn Store>, String) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let admin_url = std::env::var("TASKGATE_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_owned());
    // One admin connection; a server that does not answer within 5 s counts
    // as absent.
    let connected =
        match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(&admin_url)).await
        {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("no answer within 5 s".to_owned()),
        };
    let mut admin = match connected {
        Ok(conn) => conn,
        Err(e) => {
            let shown = redact(&admin_url);
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!(
                    "PostgreSQL conformance: no server at {shown} ({e}); CI=true requires one \
                     (set TASKGATE_TEST_POSTGRES_URL)"
                );
            }
            eprintln!("SKIPPED: PostgreSQL conformance (no server at {shown}: {e})");
            return;
        }
    };

    let database = format!("taskgate_conf_{}", unique_suffix());
    sqlx::query(AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await
        .unwrap_or_else(|e| panic!("CREATE DATABASE {database}: {e}"));

    let url = with_database(&admin_url, &database);
    let outcome = tokio::spawn(run(url, "postgres", check)).await;

    let dropped = sqlx::query(AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {database} WITH (FORCE)"
    )))
    .execute(&mut admin)
    .await;
    let _ = admin.close().await;
    if let Err(e) = outcome {
        resume_unwind(e.into_panic());
    }
    if let Err(e) = dropped {
        panic!("DROP DATABASE {database}: {e}");
    }
}

/// Connects, migrates twice (migrations must be idempotent) and runs the check.
async fn run<F, Fut>(url: String, backend: &'static str, check: F)
where
    F: FnOnce(Arc<dyn Store>, String) -> Fut,
    Fut: Future<Output = ()>,
{
    let store = taskgate_store::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("connect to {backend} store: {e}"));
    assert_eq!(store.backend(), backend);
    store.migrate().await.expect("first migrate");
    store.migrate().await.expect("second migrate is a no-op");
    store.ping().await.expect("ping");
    check(store, url).await;
}

/// A name part unique across tests and processes: a fresh ULID, lowercased.
pub fn unique_suffix() -> String {
    let id = RequestId::new().to_string();
    id.trim_start_matches(RequestId::PREFIX)
        .to_ascii_lowercase()
}

/// `url` with its database path replaced by `database` (query kept).
fn with_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[authority_start..]
        .find('/')
        .map_or(base.len(), |i| authority_start + i);
    let mut out = format!("{}/{database}", &base[..authority_end]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[scheme_end..];
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    match authority.rfind('@') {
        Some(at) => match authority[..at].split_once(':') {
            Some((user, _password)) => {
                format!("{}{user}:***{}", &url[..scheme_end], &rest[at..])
            }
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}
