//! The services' unit tests run over a real state: a server on port 0 over
//! a fresh SQLite file, with one account and a clock the test moves.

use std::path::PathBuf;
use std::sync::Arc;

use taskgate_core::{Clock, RequestId};
use taskgate_store::{Account, Store};

use super::Actor;
use super::accounts::{self, NewAccount};
use crate::app::{self, Server};
use crate::config::Config;
use crate::state::AppState;

pub struct TestState {
    pub app: Arc<AppState>,
    pub clock: Clock,
    /// An account of the default plan.
    pub account: Account,
    server: Server,
    path: PathBuf,
}

impl TestState {
    /// A running state; `configure` adjusts its configuration first.
    pub async fn start(configure: impl FnOnce(&mut Config)) -> TestState {
        let path = std::env::temp_dir().join(format!(
            "taskgate_service_{}_{}.db",
            std::process::id(),
            RequestId::new().to_string().to_lowercase()
        ));
        let mut config = Config {
            listen: "127.0.0.1:0".to_owned(),
            database_url: format!("sqlite://{}", path.display()),
            shutdown_grace_ms: 1_000,
            ..Config::default()
        };
        configure(&mut config);
        let store = app::open_store(&config).await.expect("open store");
        let new = NewAccount {
            name: "acme".to_owned(),
            plan: config.default_plan.clone(),
            monthly_spend_limit: None,
        };
        let account = accounts::create(&*store, &config, Actor::Operator, &Default::default(), new)
            .await
            .expect("account");
        let clock = Clock::adjustable();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("listen");
        let server = app::start_with(
            config,
            store,
            Some(listener),
            Arc::new(|_: &str| None),
            clock.clone(),
        )
        .await
        .expect("server starts");
        TestState {
            app: server.state.clone(),
            clock,
            account,
            server,
            path,
        }
    }

    pub fn store(&self) -> &dyn Store {
        &*self.app.store
    }

    /// Stops the server and removes its store.
    pub async fn stop(self) {
        drop(self.app);
        self.server.stop().await.expect("clean stop");
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", self.path.display()));
        }
    }
}
