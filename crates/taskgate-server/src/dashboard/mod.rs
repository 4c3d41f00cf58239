//! The web dashboard under `/dashboard`: server-rendered pages (askama
//! templates, a stylesheet and one small script, all embedded), signed in
//! with email and password. It shares nothing with the API's hot path but
//! the store: its own sessions, its own sign-in limits.
//!
//! One file per page family; the session and the CSRF check are extractors
//! (`session.rs`), so a handler cannot forget them.

mod admin;
mod apis;
mod audit;
mod keys;
pub mod pages;
mod profile;
pub mod session;
mod settings;
mod sign_in;
mod tasks;
mod usage;
mod webhook_endpoint;
mod webhooks;
mod words;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

/// The route table of `/dashboard`.
pub fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/", get(sign_in::home))
        .route("/sign-in", get(sign_in::page).post(sign_in::submit))
        .route("/sign-out", post(sign_in::sign_out))
        .route("/keys", get(keys::list))
        .route("/keys/new", get(keys::new_form).post(keys::create))
        .route(
            "/keys/{id}/revoke",
            get(keys::confirm_revoke).post(keys::revoke),
        )
        .route("/keys/{id}/roll", get(keys::confirm_roll).post(keys::roll))
        .route("/webhooks", get(webhooks::list))
        .route(
            "/webhooks/new",
            get(webhooks::new_form).post(webhooks::create),
        )
        .route(
            "/webhooks/signing-secret",
            post(webhooks::reveal_signing_secret),
        )
        .route(
            "/webhooks/signing-secret/rotate",
            post(webhooks::rotate_signing_secret),
        )
        .route("/webhooks/{id}", get(webhook_endpoint::details))
        .route(
            "/webhooks/{id}/edit",
            get(webhooks::edit_form).post(webhooks::save),
        )
        .route(
            "/webhooks/{id}/secret",
            post(webhook_endpoint::reveal_secret),
        )
        .route(
            "/webhooks/{id}/rotate-secret",
            post(webhook_endpoint::rotate_secret),
        )
        .route("/webhooks/{id}/test", post(webhook_endpoint::send_test))
        .route("/webhooks/{id}/enable", post(webhook_endpoint::enable))
        .route("/webhooks/{id}/disable", post(webhook_endpoint::disable))
        .route(
            "/webhooks/{id}/delete",
            get(webhook_endpoint::confirm_delete).post(webhook_endpoint::delete),
        )
        .route(
            "/webhooks/{id}/deliveries/{delivery}/retry",
            post(webhook_endpoint::retry),
        )
        .route("/tasks", get(tasks::list))
        .route("/tasks/{id}", get(tasks::details))
        .route("/tasks/{id}/cancel", post(tasks::cancel))
        .route("/usage", get(usage::page))
        .route("/apis", get(apis::list))
        .route("/apis/{slug}", get(apis::details))
        .route("/apis/{slug}/try", post(apis::try_it))
        .route("/password", get(profile::page).post(profile::change))
        .route("/settings", get(settings::page))
        .route("/settings/spend-limit", post(settings::set_spend_limit))
        .route("/audit", get(audit::page))
        .route("/admin", get(admin::page))
        .route("/admin/accounts", post(admin::create_account))
        .route("/admin/accounts/{id}", post(admin::update_account))
        .route("/admin/users", post(admin::create_user))
        .route("/admin/users/{id}", post(admin::update_user))
        .route("/assets/{name}", get(pages::asset))
        .fallback(|| async { pages::not_found() })
        .layer(axum::middleware::map_response(pages::html_errors))
}
