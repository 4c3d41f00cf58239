//! The route table, and nothing else.

use std::sync::Arc;

use axum::routing::{get, post};
use axum::{Router, middleware};

use crate::state::AppState;
use crate::{anthropic, auth, dashboard, envelope, meta, openai, v1};

pub fn router(app: Arc<AppState>) -> Router {
    let api = Router::new()
        .route("/call", post(v1::call::create))
        .route("/call/{id}", get(v1::call::status))
        .route("/tasks", get(v1::tasks::list))
        .route("/tasks/{id}", get(v1::tasks::details))
        .route("/tasks/{id}/cancel", post(v1::tasks::cancel))
        .route("/tasks/{id}/stream", get(v1::tasks::stream))
        .route("/apis", get(v1::apis::list))
        .route("/apis/{slug}", get(v1::apis::details))
        .route(
            "/webhook_endpoints",
            get(v1::webhooks::list).post(v1::webhooks::create),
        )
        .route(
            "/webhook_endpoints/{id}",
            get(v1::webhooks::details)
                .patch(v1::webhooks::update)
                .delete(v1::webhooks::delete),
        )
        .route("/webhook_endpoints/{id}/secret", get(v1::webhooks::secret))
        .route(
            "/webhook_endpoints/{id}/rotate_secret",
            post(v1::webhooks::rotate_secret),
        )
        .route("/webhook_endpoints/{id}/test", post(v1::webhooks::test))
        .route("/webhooks/secret", get(v1::webhooks::signing_secret))
        .route(
            "/webhooks/secret/rotate",
            post(v1::webhooks::rotate_signing_secret),
        )
        .route("/webhook_deliveries", get(v1::webhooks::deliveries))
        .route("/webhook_deliveries/{id}", get(v1::webhooks::delivery))
        .route("/webhook_deliveries/{id}/retry", post(v1::webhooks::retry))
        .route_layer(middleware::from_fn_with_state(
            app.clone(),
            auth::authenticate,
        ))
        .route("/openapi.json", get(meta::openapi));

    Router::new()
        .nest("/api/v1", api)
        .nest("/openai/v1", openai::router(app.clone()))
        .nest("/anthropic/v1", anthropic::router(app.clone()))
        .route("/healthz", get(meta::healthz))
        .route("/readyz", get(meta::readyz))
        .route("/metrics", get(meta::metrics))
        .route("/docs", get(meta::docs))
        .nest("/dashboard", dashboard::router())
        .fallback(meta::not_found)
        .layer(middleware::from_fn_with_state(
            app.clone(),
            envelope::envelope,
        ))
        .with_state(app)
}
