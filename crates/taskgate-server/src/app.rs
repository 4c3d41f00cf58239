//! The wiring: the service built from its configuration and store, its
//! housekeeping rounds, and the handle that stops it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;
use taskgate_core::{Clock, RunnerId};
use taskgate_store::Store;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::catalog::{self, Catalog, EnvLookup};
use crate::config::{self, Config};
use crate::executor::{self, Executor};
use crate::outbox::Outbox;
use crate::principal::KeyCache;
use crate::ratelimit::{self, RateLimiter};
use crate::state::AppState;
use crate::telemetry::Telemetry;
use crate::{
    body, client_addr, follow, metrics, openapi, redis, router, serve, stream_slots, usage,
};

/// Opens the store named by the config and brings its schema up to date.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let store = taskgate_store::connect_with(&config.database_url, config.database.pool())
        .await
        .with_context(|| {
            format!(
                "cannot open the store ({})",
                redact_url(&config.database_url)
            )
        })?;
    store.migrate().await.context("cannot migrate the store")?;
    Ok(store)
}

/// The database URL without its password, for messages.
pub fn redact_url(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}://{}:***@{}", &url[..s], user, &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// A running server: its address, and a handle to stop it.
pub struct Server {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    shutdown: CancellationToken,
    done: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Server {
    /// Stops accepting, drains requests, waits for running tasks.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.done.await?
    }

    /// Waits until the server stops (it runs until `stop` or a signal).
    pub async fn wait(self) -> anyhow::Result<()> {
        self.done.await?
    }

    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }
}

/// Starts the service on `listener` (or binds `config.listen`). Provider
/// credentials named by the configuration are read from the process
/// environment.
pub async fn start(
    config: Config,
    store: Arc<dyn Store>,
    listener: Option<TcpListener>,
) -> anyhow::Result<Server> {
    start_with_env(config, store, listener, catalog::process_env()).await
}

/// [`start`], reading provider credentials through `env` instead.
pub async fn start_with_env(
    config: Config,
    store: Arc<dyn Store>,
    listener: Option<TcpListener>,
    env: EnvLookup,
) -> anyhow::Result<Server> {
    start_with(config, store, listener, env, Clock::system()).await
}

/// [`start_with_env`], reading the time from `clock` (tests move it).
pub async fn start_with(
    config: Config,
    store: Arc<dyn Store>,
    listener: Option<TcpListener>,
    env: EnvLookup,
    clock: Clock,
) -> anyhow::Result<Server> {
    config.validate().map_err(anyhow::Error::msg)?;
    let catalog = Catalog::from_config(&config, &env).map_err(anyhow::Error::msg)?;
    start_with_catalog(config, store, listener, catalog, clock).await
}

/// [`start_with`] serving `catalog` (made with [`Catalog::from_config_with`]
/// from the same configuration, when it has providers of its own).
pub async fn start_with_catalog(
    config: Config,
    store: Arc<dyn Store>,
    listener: Option<TcpListener>,
    catalog: Catalog,
    clock: Clock,
) -> anyhow::Result<Server> {
    config.validate().map_err(anyhow::Error::msg)?;
    metrics::install();
    let listener = match listener {
        Some(l) => l,
        None => TcpListener::bind(&config.listen)
            .await
            .with_context(|| format!("cannot listen on {}", config.listen))?,
    };
    let addr = listener.local_addr()?;
    let catalog = Arc::new(catalog);
    let upstream: Vec<String> = catalog
        .all()
        .iter()
        .filter(|e| e.spec.provider != taskgate_providers::builtin::PROVIDER_NAME)
        .map(|e| format!("{} ({})", e.spec.slug, e.spec.provider))
        .collect();
    tracing::info!(
        apis = catalog.all().len(),
        upstream = %if upstream.is_empty() { "none (set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY, or declare providers)".to_owned() } else { upstream.join(", ") },
        "catalog ready"
    );
    let runner = config
        .instance_id
        .clone()
        .unwrap_or_else(|| default_instance_id(addr));
    let redis = match &config.redis_url {
        Some(url) => Some(Arc::new(
            redis::Redis::new(url).map_err(anyhow::Error::msg)?,
        )),
        None => None,
    };
    let runner_of_outbox = runner.clone();
    let telemetry = Arc::new(Telemetry::start(
        &config.telemetry,
        runner.as_str(),
        config.log_format == config::LogFormat::Json,
    )?);
    let settings = executor::Settings {
        runner,
        workers: executor::Workers {
            live: config.workers,
            test: config.test_workers(),
        },
        plans: config.plans.clone(),
        lease: Duration::from_millis(config.task_lease_ms),
        telemetry: telemetry.clone(),
    };
    let executor = Executor::start(
        store.clone(),
        catalog.clone(),
        settings,
        redis.clone(),
        clock.clone(),
    )
    .await?;
    let shutdown = CancellationToken::new();
    let outbox = Outbox::start(
        store.clone(),
        config.webhooks.clone(),
        runner_of_outbox,
        clock.clone(),
        shutdown.clone(),
        telemetry.tracer.clone(),
    )?;
    executor.purge_tasks_past(executor::Retention {
        days: config.task_retention_days,
        test_days: config.test_task_retention_days,
    });
    let openapi = openapi::Documents::new(&catalog);
    let sign_in_failures = ratelimit::SignInFailures::new(&config.dashboard, &clock);
    let state_http = config.http;
    let catalog_largest_input = catalog.largest_input_bytes();
    let max_body_bytes = config.max_body_bytes as u64;
    let state = Arc::new(AppState {
        clock: clock.clone(),
        limiter: match &redis {
            None => RateLimiter::memory(clock.clone()),
            Some(redis) => RateLimiter::Redis(ratelimit::RedisLimiter::new(
                redis.clone(),
                config.redis_failure == config::RedisFailure::Open,
            )),
        },
        auth_failures: ratelimit::AuthLimiter::new(
            config.auth_failures_per_minute,
            redis.clone(),
            clock,
        ),
        trusted_proxies: client_addr::TrustedProxies::new(
            &config.trusted_proxies,
            config.client_ip_header,
        ),
        stream_slots: stream_slots::StreamSlots::new(&config.limits),
        followers: follow::Followers::new(store.clone()),
        config: Arc::new(config),
        store,
        catalog,
        executor,
        outbox,
        telemetry,
        keys: KeyCache::default(),
        openapi,
        sign_in_failures,
        requests: usage::RequestCounter::default(),
        call_bodies: body::CallBodies::new(
            catalog_largest_input,
            max_body_bytes,
            Duration::from_millis(state_http.body_read_timeout_ms),
            state_http.max_large_body_bytes_in_flight,
        ),
        draining: AtomicBool::new(false),
    });
    tokio::spawn(flush_key_usage(state.clone(), shutdown.clone()));
    let app = router::router(state.clone());
    let token = shutdown.clone();
    let st = state.clone();
    let draining = state.clone();
    let http = state.config.http;
    let grace = Duration::from_millis(state.config.shutdown_grace_ms);
    let done = tokio::spawn(async move {
        let stopping = token.clone();
        let serving = serve::serve(listener, app, http, async move {
            stopping.cancelled().await;
            // Not ready from the first moment of the stop.
            draining
                .draining
                .store(true, std::sync::atomic::Ordering::Relaxed);
        });
        let mut serving = std::pin::pin!(serving);
        let served = tokio::select! {
            _ = &mut serving => true,
            _ = token.cancelled() => false,
        };
        // One grace for both: requests in flight (sync calls waiting for
        // their tasks) and running tasks; what is left then is handed back.
        let drained = async {
            if !served
                && tokio::time::timeout(grace + Duration::from_secs(1), &mut serving)
                    .await
                    .is_err()
            {
                tracing::warn!(
                    "requests still in flight at the end of the shutdown grace were cut off"
                );
            }
        };
        tokio::join!(drained, st.executor.shutdown(grace));
        flush_once(&st).await;
        st.telemetry.shutdown().await;
        Ok(())
    });
    Ok(Server {
        addr,
        state,
        shutdown,
        done,
    })
}

/// The instance's id in a shared store: host name and port, stable across
/// restarts, so a restarted instance recognizes the tasks it left running.
fn default_instance_id(addr: SocketAddr) -> RunnerId {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    RunnerId::host_port(&host, addr.port())
}

/// `last_used_at` is written in batches, once a second, not on every request.
/// So are the request counts of the dashboard's Usage; and every ten minutes
/// the counts past their keeping and the dashboard's stale sessions go (the
/// executor deletes tasks past their retention).
async fn flush_key_usage(state: Arc<AppState>, stop: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut ticks: u64 = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => {
                flush_once(&state).await;
                return;
            }
            _ = tick.tick() => {
                flush_once(&state).await;
                if ticks.is_multiple_of(600) {
                    purge_once(&state).await;
                }
                ticks += 1;
            }
        }
    }
}

async fn flush_once(state: &AppState) {
    let used = state.keys.take_used();
    if !used.is_empty()
        && let Err(e) = state.store.touch_keys(&used).await
    {
        tracing::warn!(error = %e, "cannot record key usage");
    }
    let counts = state.requests.take();
    if !counts.is_empty()
        && let Err(e) = state.store.add_request_counts(&counts).await
    {
        tracing::warn!(error = %e, "cannot record request counts; retrying with the next");
        state.requests.restore(counts);
    }
}

/// Request counts are kept 35 days (the Usage page shows 30).
const REQUEST_COUNTS_KEPT_MS: i64 = 35 * 86_400_000;

async fn purge_once(state: &AppState) {
    let now = state.clock.now();
    if let Err(e) = state
        .store
        .purge_request_counts(now.minus_ms(REQUEST_COUNTS_KEPT_MS))
        .await
    {
        tracing::warn!(error = %e, "cannot purge old request counts");
    }
    let idle = state.config.dashboard.session_idle_minutes as i64 * 60_000;
    if let Err(e) = state.store.purge_sessions(now, now.minus_ms(idle)).await {
        tracing::warn!(error = %e, "cannot purge ended sessions");
    }
    let days = state.config.audit_retention_days;
    if let Err(e) = crate::service::audit::purge(&*state.store, days, now).await {
        tracing::warn!(error = %e, "cannot purge old audit events");
    }
    let kept = i64::from(state.config.webhooks.retention_days) * 86_400_000;
    loop {
        match state
            .store
            .purge_deliveries(now.minus_ms(kept), 1_000)
            .await
        {
            Ok(1_000) => continue,
            Ok(_) => break,
            Err(e) => {
                tracing::warn!(error = %e, "cannot purge old webhook deliveries");
                break;
            }
        }
    }
    // The in-memory limiter forgets accounts idle for a day (Redis expires
    // its keys by itself).
    if let RateLimiter::Memory(m) = &state.limiter {
        m.prune(now.unix_ms());
    }
}
