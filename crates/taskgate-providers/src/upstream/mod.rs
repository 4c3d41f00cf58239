//! Upstream AI providers over HTTP, behind one [`Provider`].
//!
//! Each wire protocol is an adapter in a file of its own (`openai.rs`,
//! `anthropic.rs`, `gemini.rs`, `generic.rs`). An API of the catalog is a
//! route: its primary deployments (weighted) and then its fallbacks, in
//! order. [`Upstream::execute`] walks the route: it picks a deployment by
//! weight, skips targets whose circuit is open, retries passing failures
//! with exponential backoff and jitter (honouring `Retry-After`), and moves
//! on to the next target when one cannot serve. Every attempt is recorded.

mod anthropic;
mod breaker;
pub mod config;
pub mod defaults;
pub mod fetch;
mod gemini;
mod generic;
pub(crate) mod http;
mod openai;
mod redact;
mod template;
#[cfg(test)]
mod testutil;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;
use taskgate_core::task::error_code;
use taskgate_core::trace::Scope;

use breaker::Breaker;
pub use breaker::BreakerState;
pub use config::{HttpApiConfig, Protocol, ProviderConfig, Secret, TargetConfig};
pub use fetch::{FetchPolicy, Fetcher};
/// The TLS a provider's requests, and a webhook's, go out with.
pub use http::tls_config;
use http::{Class, Conn, UpstreamError};

use crate::chat::ChatInput;
use crate::kinds::Kind;
use crate::{
    ApiSpec, ApiStatus, AttemptOutcome, ExecContext, ExecError, Execution, Provider, Unsupported,
};

/// Longest pause between two attempts at one target.
const MAX_BACKOFF: Duration = Duration::from_secs(8);
const BASE_BACKOFF: Duration = Duration::from_millis(250);

/// One wire protocol spoken to one configured provider.
#[async_trait]
pub(crate) trait Adapter: Send + Sync {
    fn conn(&self) -> &Conn;
    fn supports(&self, kind: Kind) -> bool;
    /// What of a chat input this provider cannot carry, if anything.
    fn unsupported(&self, _input: &ChatInput) -> Option<Unsupported> {
        None
    }
    async fn call(&self, call: &mut Call<'_>) -> Result<Execution, UpstreamError>;
}

/// One attempt's request, as an adapter receives it.
pub(crate) struct Call<'a> {
    pub kind: Kind,
    pub model: &'a str,
    pub input: &'a Value,
    /// The input of a chat call, parsed once for every attempt.
    pub chat: Option<&'a ChatInput>,
    pub ctx: &'a mut ExecContext,
    pub fetcher: &'a Fetcher,
    pub http: Option<&'a HttpApiConfig>,
}

impl Call<'_> {
    /// The client's `options` object, if any.
    pub fn options(&self) -> Option<&Value> {
        self.input.get("options")
    }
}

/// A deployment or fallback: a model at a provider.
#[derive(Debug, Clone)]
pub struct Target {
    pub provider: String,
    pub model: String,
    pub weight: u32,
}

/// An API served by upstream providers.
#[derive(Debug, Clone)]
pub struct Route {
    pub spec: ApiSpec,
    pub kind: Kind,
    /// The primary deployments (weighted), then each fallback in order.
    pub groups: Vec<Vec<Target>>,
    /// How `http` providers serve this API.
    pub http: Option<HttpApiConfig>,
}

/// The provider of every upstream API.
pub struct Upstream {
    adapters: HashMap<String, Arc<dyn Adapter>>,
    breaker_settings: HashMap<String, (u32, Duration)>,
    routes: HashMap<String, Route>,
    breakers: HashMap<String, Arc<Breaker>>,
    fetcher: Fetcher,
    /// The TLS of every provider's clients.
    tls: rustls::ClientConfig,
    /// The environment's proxies, read when the process started, as reqwest
    /// reads them: a provider they send through a proxy is reached by
    /// reqwest alone.
    proxies: hyper_util::client::proxy::matcher::Matcher,
}

impl Upstream {
    pub fn new(fetch: FetchPolicy) -> Result<Self, String> {
        Ok(Self {
            adapters: HashMap::new(),
            breaker_settings: HashMap::new(),
            routes: HashMap::new(),
            breakers: HashMap::new(),
            fetcher: Fetcher::new(fetch)?,
            tls: http::tls_config(&[])?,
            proxies: hyper_util::client::proxy::matcher::Matcher::from_system(),
        })
    }

    /// Trusts `root` too in the TLS of the providers added from now on
    /// (a test's own certificate authority).
    #[cfg(test)]
    pub(crate) fn trust(&mut self, root: rustls::pki_types::CertificateDer<'static>) {
        self.tls = http::tls_config(&[root]).unwrap();
    }

    /// Adds a provider; `api_key` is its resolved credential.
    pub fn add_provider(
        &mut self,
        name: &str,
        cfg: &ProviderConfig,
        api_key: Option<String>,
    ) -> Result<(), String> {
        let client = reqwest::Client::builder()
            .connect_timeout(http::CONNECT_TIMEOUT)
            .pool_idle_timeout(http::POOL_IDLE_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(http::AGENT)
            // HTTP/1.1, as before the client could speak HTTP/2 (built in for
            // OTLP/gRPC): what the benchmarks measured; HTTP/2 to providers
            // would be a change of its own.
            .http1_only()
            // reqwest's default policy retries only HTTP/2 and HTTP/3
            // refusals, which an HTTP/1.1 client never meets, yet it copied
            // every request (headers, URL, body) in case it would. Taskgate
            // retries a provider's attempts itself (`max_retries`).
            .retry(reqwest::retry::never().max_retries_per_request(0))
            .use_preconfigured_tls(self.tls.clone())
            .build()
            .map_err(|e| format!("providers.{name}: {e}"))?;
        let default_base = match cfg.protocol {
            Protocol::Openai => Some(openai::DEFAULT_BASE_URL),
            Protocol::Anthropic => Some(anthropic::DEFAULT_BASE_URL),
            Protocol::Gemini => Some(gemini::DEFAULT_BASE_URL),
            Protocol::Http => None,
        };
        let mut conn = Conn::new(name, cfg, api_key, default_base, client)?;
        if http::direct(&conn.base_url, &self.proxies) {
            conn.json_client = Some(http::json_client(self.tls.clone()));
        }
        let adapter: Arc<dyn Adapter> = match cfg.protocol {
            Protocol::Openai => Arc::new(openai::OpenAi::new(conn)),
            Protocol::Anthropic => Arc::new(anthropic::Anthropic::new(conn)),
            Protocol::Gemini => Arc::new(gemini::Gemini::new(conn)),
            Protocol::Http => Arc::new(generic::Generic::new(conn)),
        };
        self.breaker_settings.insert(
            name.to_owned(),
            (
                cfg.breaker_failures.unwrap_or(5),
                Duration::from_millis(cfg.breaker_cooldown_ms.unwrap_or(30_000)),
            ),
        );
        self.adapters.insert(name.to_owned(), adapter);
        Ok(())
    }

    pub fn has_provider(&self, name: &str) -> bool {
        self.adapters.contains_key(name)
    }

    /// Adds an API. Every target's provider must be known and speak the kind.
    pub fn add_route(&mut self, route: Route) -> Result<(), String> {
        let slug = route.spec.slug.clone();
        if route.groups.iter().all(|g| g.is_empty()) {
            return Err(format!("API {slug}: no target"));
        }
        for t in route.groups.iter().flatten() {
            let Some(adapter) = self.adapters.get(&t.provider) else {
                return Err(format!("API {slug}: unknown provider {:?}", t.provider));
            };
            if !adapter.supports(route.kind) {
                return Err(format!(
                    "API {slug}: provider {} ({}) does not serve the kind {}",
                    t.provider,
                    adapter.conn().protocol.as_str(),
                    route.kind.as_str()
                ));
            }
            if adapter.conn().protocol == Protocol::Http {
                let Some(http) = &route.http else {
                    return Err(format!(
                        "API {slug}: provider {} is an http provider: the API needs an `http` section",
                        t.provider
                    ));
                };
                generic::check(http).map_err(|e| format!("API {slug}: {e}"))?;
            }
            let (threshold, cooldown) = self.breaker_settings[&t.provider];
            self.breakers
                .entry(target_key(t))
                .or_insert_with(|| Arc::new(Breaker::new(threshold, cooldown)));
        }
        if self.routes.insert(slug.clone(), route).is_some() {
            return Err(format!("two APIs have the slug {slug}"));
        }
        Ok(())
    }

    /// The state of every target's circuit, for the catalog and operators.
    pub fn breaker_states(&self, api: &str) -> Vec<(Target, BreakerState)> {
        let Some(route) = self.routes.get(api) else {
            return Vec::new();
        };
        route
            .groups
            .iter()
            .flatten()
            .map(|t| (t.clone(), self.breakers[&target_key(t)].state()))
            .collect()
    }

    /// What of `input` some target of `route` cannot carry.
    fn route_unsupported(&self, route: &Route, input: &ChatInput) -> Option<Unsupported> {
        route
            .groups
            .iter()
            .flatten()
            .find_map(|t| self.adapters[&t.provider].unsupported(input))
    }

    async fn run_route(
        &self,
        route: &Route,
        input: &Value,
        ctx: &mut ExecContext,
    ) -> Result<Execution, ExecError> {
        let chat = match route.kind {
            Kind::Chat => Some(ChatInput::parse(input).map_err(|violations| {
                let list: Vec<String> = violations.iter().map(ToString::to_string).collect();
                ExecError::new(
                    error_code::INTERNAL_ERROR,
                    format!("The chat input was not checked: {}", list.join("; ")),
                )
            })?),
            _ => None,
        };
        // The server refuses these before the task exists; a task that
        // slipped past is failed rather than sent with a field dropped.
        if let Some(chat) = &chat
            && let Some(u) = self.route_unsupported(route, chat)
        {
            return Err(ExecError::new(
                "unsupported_parameter",
                format!("{}: {}", u.field, u.message),
            ));
        }
        let mut last: Option<UpstreamError> = None;
        let mut attempts = 0u32;
        for group in &route.groups {
            for target in weighted_order(group) {
                let breaker = &self.breakers[&target_key(target)];
                let adapter = &self.adapters[&target.provider];
                let conn = adapter.conn();
                let mut retries = 0;
                loop {
                    if !breaker.allow() {
                        last.get_or_insert_with(|| circuit_open(target));
                        break;
                    }
                    if ctx.remaining().is_zero() {
                        return Err(timeout_error(last));
                    }
                    let deadline = ctx.deadline();
                    let progress = ctx.progress();
                    ctx.begin(&conn.name, &target.model);
                    attempts += 1;
                    let span = crate::trace::attempt_span(
                        ctx,
                        route.kind,
                        conn,
                        &target.model,
                        chat.as_ref(),
                        attempts,
                    );
                    // The attempt's request carries its span's traceparent.
                    let scope = span.as_ref().map(|s| {
                        Scope::current()
                            .unwrap_or_default()
                            .with_span(Some(s.context().clone()))
                    });
                    let mut call = Call {
                        kind: route.kind,
                        model: &target.model,
                        input,
                        chat: chat.as_ref(),
                        ctx,
                        fetcher: &self.fetcher,
                        http: route.http.as_ref(),
                    };
                    let attempt = until_stalled(
                        adapter.call(&mut call),
                        &progress,
                        conn.attempt_timeout,
                        deadline,
                    );
                    let result = match scope {
                        Some(scope) => scope.run(attempt).await,
                        None => attempt.await,
                    };
                    let error = match result {
                        Ok(Ok(execution)) => {
                            ctx.end(AttemptOutcome::Succeeded, Some(200));
                            crate::trace::attempt_succeeded(
                                span,
                                &execution,
                                ctx.take_response_id(),
                            );
                            breaker.success();
                            return Ok(execution);
                        }
                        Ok(Err(e)) => {
                            ctx.end(AttemptOutcome::Failed, e.status);
                            crate::trace::attempt_failed(span, e.code, e.status);
                            conn.redacted(e)
                        }
                        Err(Stalled::TaskDeadline) => {
                            // The task's own deadline, not the attempt's, ran out.
                            ctx.end(AttemptOutcome::Timeout, None);
                            crate::trace::attempt_failed(span, error_code::TIMEOUT, None);
                            return Err(ExecError::new(
                                error_code::TIMEOUT,
                                format!(
                                    "The task ran out of time waiting for the provider {}.",
                                    conn.name
                                ),
                            ));
                        }
                        Err(Stalled::Attempt) => {
                            ctx.end(AttemptOutcome::Timeout, None);
                            crate::trace::attempt_failed(span, error_code::UPSTREAM_TIMEOUT, None);
                            UpstreamError {
                                class: Class::Retry,
                                code: error_code::UPSTREAM_TIMEOUT,
                                message: format!(
                                    "The provider {} did not answer within {} ms.",
                                    conn.name,
                                    conn.attempt_timeout.as_millis()
                                ),
                                status: None,
                                retry_after: None,
                                breaker: true,
                            }
                        }
                    };
                    if error.breaker {
                        breaker.failure();
                    } else if error.class != Class::Fatal {
                        // The target answered: it is up, whatever it said.
                        breaker.success();
                    }
                    // Output already streamed to a listener cannot be taken back.
                    if error.class == Class::Fatal || ctx.has_streamed() {
                        return Err(error.into_exec());
                    }
                    let retry = error.class == Class::Retry && retries < conn.max_retries;
                    let pause = error.retry_after.unwrap_or_else(|| backoff(retries));
                    last = Some(error);
                    if !retry || pause >= ctx.remaining() {
                        break;
                    }
                    tokio::time::sleep(pause).await;
                    retries += 1;
                }
            }
        }
        Err(last.map(UpstreamError::into_exec).unwrap_or_else(|| {
            ExecError::new(error_code::UPSTREAM_ERROR, "No target could be tried.")
        }))
    }
}

#[async_trait]
impl Provider for Upstream {
    fn name(&self) -> &str {
        "upstream"
    }

    fn apis(&self) -> Vec<ApiSpec> {
        let mut specs: Vec<ApiSpec> = self.routes.values().map(|r| r.spec.clone()).collect();
        specs.sort_by(|a, b| a.slug.cmp(&b.slug));
        specs
    }

    async fn execute(
        &self,
        api: &str,
        input: &Value,
        ctx: &mut ExecContext,
    ) -> Result<Execution, ExecError> {
        let Some(route) = self.routes.get(api) else {
            return Err(ExecError::new(
                error_code::INTERNAL_ERROR,
                format!("no upstream route for the API {api:?}"),
            ));
        };
        self.run_route(route, input, ctx).await
    }

    fn unsupported(&self, api: &str, input: &ChatInput) -> Option<Unsupported> {
        let route = self.routes.get(api).filter(|r| r.kind == Kind::Chat)?;
        self.route_unsupported(route, input)
    }

    /// The schema-derived simulation, made to read as an ordinary answer of
    /// its kind: the model the API is configured with, and for chat a reply
    /// that follows the input (a call of the forced tool, JSON for a JSON
    /// format) or else simply stopped (a simulated `tool_calls` or
    /// `content_filter` would send a client down a path the input never
    /// asked for).
    async fn sandbox(&self, api: &ApiSpec, input: &Value) -> Result<Execution, ExecError> {
        let route = self.routes.get(&api.slug);
        let model = route
            .and_then(|r| r.groups.first())
            .and_then(|g| g.first())
            .map(|t| t.model.clone());
        if let (Some(route), Some(model)) = (route, &model)
            && route.kind == Kind::Chat
        {
            return Ok(crate::sandbox::chat::simulate_chat(api, input, model));
        }
        let mut x = crate::sandbox::simulate(api, input);
        if let (Some(model), Some(output)) = (model, x.output.as_object_mut())
            && output.contains_key("model")
        {
            output.insert("model".to_owned(), Value::String(model));
        }
        Ok(x)
    }

    /// Available while every target's circuit is closed, unavailable when
    /// every one is open, degraded in between.
    fn status(&self, api: &str) -> ApiStatus {
        let states = self.breaker_states(api);
        if states.iter().all(|(_, s)| *s == BreakerState::Closed) {
            ApiStatus::Available
        } else if states.iter().all(|(_, s)| *s == BreakerState::Open) {
            ApiStatus::Unavailable
        } else {
            ApiStatus::Degraded
        }
    }
}

/// Why an attempt was given up.
enum Stalled {
    /// No progress for the attempt timeout.
    Attempt,
    /// The task's deadline came first.
    TaskDeadline,
}

/// Runs an attempt while it makes progress: it may wait `idle` for its
/// answer to start, and as long again between two streamed pieces, but never
/// past the task's `deadline`. So a long streamed reply is not cut off by
/// the attempt timeout while a silent upstream still is.
async fn until_stalled<T>(
    attempt: impl std::future::Future<Output = T>,
    progress: &std::sync::atomic::AtomicU64,
    idle: Duration,
    deadline: Instant,
) -> Result<T, Stalled> {
    use std::sync::atomic::Ordering;
    tokio::pin!(attempt);
    let mut seen = progress.load(Ordering::Relaxed);
    let mut until = (Instant::now() + idle).min(deadline);
    loop {
        tokio::select! {
            r = &mut attempt => return Ok(r),
            _ = tokio::time::sleep_until(until.into()) => {
                let now = progress.load(Ordering::Relaxed);
                if until >= deadline {
                    return Err(Stalled::TaskDeadline);
                }
                if now == seen {
                    return Err(Stalled::Attempt);
                }
                seen = now;
                until = (Instant::now() + idle).min(deadline);
            }
        }
    }
}

fn target_key(t: &Target) -> String {
    format!("{}/{}", t.provider, t.model)
}

fn circuit_open(t: &Target) -> UpstreamError {
    UpstreamError {
        class: Class::Next,
        code: error_code::UPSTREAM_ERROR,
        message: format!(
            "The provider {} is unavailable for {} (circuit open after repeated failures).",
            t.provider, t.model
        ),
        status: None,
        retry_after: None,
        breaker: false,
    }
}

fn timeout_error(last: Option<UpstreamError>) -> ExecError {
    match last {
        Some(e) => e.into_exec(),
        None => ExecError::new(error_code::TIMEOUT, "The task ran out of time."),
    }
}

/// Exponential backoff with "equal jitter": half the step is fixed, half
/// random, so retries of many tasks do not arrive together.
fn backoff(retry: u32) -> Duration {
    let step = BASE_BACKOFF
        .saturating_mul(1u32 << retry.min(16))
        .min(MAX_BACKOFF);
    let half = step / 2;
    half + half.mul_f64(rand::random::<f64>())
}

/// The targets of a group in a random order weighted by `weight`
/// (Efraimidis–Spirakis: sort by `u^(1/w)`), so traffic splits by weight and
/// the others remain as failover.
fn weighted_order(group: &[Target]) -> Vec<&Target> {
    if group.len() <= 1 {
        return group.iter().collect();
    }
    let mut keyed: Vec<(f64, &Target)> = group
        .iter()
        .filter(|t| t.weight > 0)
        .map(|t| (rand::random::<f64>().powf(1.0 / t.weight as f64), t))
        .collect();
    keyed.sort_by(|a, b| b.0.total_cmp(&a.0));
    keyed.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests;
