//! The catalog: search and kind/provider filters as GET /apis has them; an
//! API's page with its description, pricing, status, limits, schemas and
//! examples, and a Try it form that runs a test-mode task.

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use taskgate_core::Mode;

use super::pages::{Chrome, error_page, not_found, pretty_json, redirect, render, render_with};
use super::session::{Changes, Session, store_error};
use super::words;
use crate::catalog::ApiEntry;
use crate::catalog::PricingView;
use crate::config::PlanLimits;
use crate::principal::Principal;
use crate::query::{self, QueryPairs};
use crate::service::Actor;
use crate::service::{calls, keys};
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub struct Filters {
    #[serde(default)]
    mode: String,
    #[serde(default)]
    q: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    provider: String,
}

struct Row {
    slug: String,
    name: String,
    description: String,
    kind: String,
    provider: String,
    status: &'static str,
    price: String,
}

/// `$0.0001 per call`, `$0.0025 / $0.0100 per 1K input / output tokens`,
/// `…, cached input $0.0003`.
fn price_of(entry: &ApiEntry) -> String {
    match PricingView::new(entry.spec.pricing) {
        PricingView::PerCall { price_usd, .. } => format!("${price_usd} per call"),
        PricingView::PerKiloTokens {
            cached_input_price_usd,
            input_price_usd,
            output_price_usd,
            ..
        } => {
            let tokens =
                format!("${input_price_usd} / ${output_price_usd} per 1K input / output tokens");
            match cached_input_price_usd {
                Some(cached) => format!("{tokens}, cached input ${cached}"),
                None => tokens,
            }
        }
    }
}

impl Row {
    fn new(e: &ApiEntry) -> Self {
        Row {
            slug: e.slug.as_str().to_owned(),
            name: e.spec.name.clone(),
            description: e.spec.description.clone(),
            kind: e.spec.kind.clone(),
            provider: e.spec.provider.clone(),
            status: e.provider.status(&e.spec.slug).as_str(),
            price: price_of(e),
        }
    }
}

#[derive(Template)]
#[template(path = "dashboard/apis.html")]
struct ApisPage {
    chrome: Chrome,
    filters: Filters,
    kinds: Vec<String>,
    providers: Vec<String>,
    rows: Vec<Row>,
}

fn distinct(app: &AppState, f: impl Fn(&ApiEntry) -> &str) -> Vec<String> {
    let mut v: Vec<String> = app.catalog.all().iter().map(|e| f(e).to_owned()).collect();
    v.sort();
    v.dedup();
    v
}

pub async fn list(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(filters): Query<Filters>,
) -> Response {
    let mut pairs = vec![("limit".to_owned(), "100".to_owned())];
    for (k, v) in [
        ("q", &filters.q),
        ("kind", &filters.kind),
        ("provider", &filters.provider),
    ] {
        if !v.is_empty() {
            pairs.push((k.to_owned(), v.clone()));
        }
    }
    // The whole catalog, in pages of GET /apis's largest size.
    let mut rows = Vec::new();
    loop {
        let (page, next) = match query::api_page(&app.catalog, None, &QueryPairs(pairs.clone())) {
            Ok(p) => p,
            Err(e) => return error_page(StatusCode::BAD_REQUEST, &e.message),
        };
        rows.extend(page.iter().map(|e| Row::new(e)));
        let Some(cursor) = next else { break };
        pairs.retain(|(k, _)| k != "cursor");
        pairs.push(("cursor".to_owned(), cursor));
    }
    render(&ApisPage {
        chrome: session.chrome("/dashboard/apis", filters.mode == "test"),
        kinds: distinct(&app, |e| &e.spec.kind),
        providers: distinct(&app, |e| &e.spec.provider),
        filters,
        rows,
    })
}

#[derive(Template)]
#[template(path = "dashboard/api.html")]
struct ApiPage {
    chrome: Chrome,
    api: Row,
    timeout_ms: u64,
    max_input_bytes: u64,
    input_schema: String,
    output_schema: String,
    examples: Vec<(String, String)>,
    try_input: String,
    error: Option<String>,
}

fn api_page(
    session: &Session,
    entry: &ApiEntry,
    test: bool,
    input: Option<String>,
    error: Option<String>,
) -> ApiPage {
    let s = &entry.spec;
    let example = s
        .examples
        .first()
        .map(|e| pretty_json(&e.input))
        .unwrap_or_else(|| "{}".to_owned());
    ApiPage {
        chrome: session.chrome("/dashboard/apis", test),
        api: Row::new(entry),
        timeout_ms: s.timeout_ms,
        max_input_bytes: s.max_input_bytes,
        input_schema: pretty_json(&s.input_schema),
        output_schema: pretty_json(&s.output_schema),
        examples: s
            .examples
            .iter()
            .map(|e| (pretty_json(&e.input), pretty_json(&e.output)))
            .collect(),
        try_input: input.unwrap_or(example),
        error,
    }
}

#[derive(Deserialize, Default)]
pub struct ModeQuery {
    #[serde(default)]
    mode: String,
}

pub async fn details(
    State(app): State<Arc<AppState>>,
    session: Session,
    Path(slug): Path<String>,
    Query(q): Query<ModeQuery>,
) -> Response {
    match app.catalog.get(&slug) {
        Some(entry) => render(&api_page(&session, entry, q.mode == "test", None, None)),
        None => not_found(),
    }
}

#[derive(Deserialize)]
pub struct TryForm {
    #[serde(default)]
    input: String,
}

/// Runs the API in test mode with the form's input, as a sync POST /call
/// with a test key would (the account's rate limits count it), and shows the
/// task.
pub async fn try_it(
    State(app): State<Arc<AppState>>,
    Path(slug): Path<String>,
    changes: Changes<TryForm>,
) -> Response {
    let Changes {
        session,
        form,
        origin,
    } = changes;
    let Some(entry) = app.catalog.get(&slug) else {
        return not_found();
    };
    let again = |message: String| {
        render_with(
            StatusCode::BAD_REQUEST,
            &api_page(
                &session,
                entry,
                true,
                Some(form.input.clone()),
                Some(message),
            ),
        )
    };
    if session.account.status != taskgate_core::AccountStatus::Active {
        // As the API answers a suspended account's keys (403 account_suspended).
        return again("This account is suspended: it cannot run tasks.".to_owned());
    }
    let input: Value = match serde_json::from_str(&form.input) {
        Ok(v) => v,
        Err(e) => return again(format!("The input is not JSON: {e}.")),
    };
    let actor = Actor::User(&session.user);
    let key = match keys::try_it_key(
        &*app.store,
        actor,
        &origin,
        session.account.id,
        app.clock.now(),
    )
    .await
    {
        Ok(k) => k,
        Err(e) => {
            return match words::key_error(e) {
                Ok(message) => error_page(StatusCode::SERVICE_UNAVAILABLE, &message),
                Err(e) => store_error(e),
            };
        }
    };
    let limits = PlanLimits::of(&app.config.plans, &session.account.plan);
    let Ok(decision) = app.limiter.check(session.account.id, limits).await else {
        return again("The rate limiter cannot be reached just now; try again shortly.".to_owned());
    };
    let allowed = decision.allowed;
    // Counted like the API's requests, so that Usage matches the limiter.
    app.requests.count(
        session.account.id,
        key.id,
        Mode::Test,
        app.clock.now().unix_ms(),
        !allowed,
    );
    if !allowed {
        return render_with(
            StatusCode::TOO_MANY_REQUESTS,
            &api_page(
                &session,
                entry,
                true,
                Some(form.input.clone()),
                Some("The account's rate limit is reached. Try again in a minute.".to_owned()),
            ),
        );
    }
    let principal = Principal::of(&key, &session.account, limits);
    let mut body = Map::new();
    body.insert("api".into(), json!(slug));
    body.insert("input".into(), input);
    let ran = match calls::validate(&app.catalog, &principal, body) {
        Ok(call) => calls::run(&app, &principal, call).await,
        Err(e) => Err(e),
    };
    match ran {
        Ok(task) => redirect(&format!("/dashboard/tasks/{}", task.id)),
        Err(e) => match words::call_error(e) {
            Ok(message) => again(message),
            Err(e) => store_error(e),
        },
    }
}
