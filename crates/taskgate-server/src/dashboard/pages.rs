//! What every dashboard page shares: the frame around it (navigation,
//! account, mode, sign-out), the response headers, redirects and error pages.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::envelope::Raw;

/// The sections of the navigation, by path and label.
pub const SECTIONS: [(&str, &str); 6] = [
    ("/dashboard/keys", "API keys"),
    ("/dashboard/webhooks", "Webhooks"),
    ("/dashboard/tasks", "Tasks"),
    ("/dashboard/usage", "Usage"),
    ("/dashboard/apis", "APIs"),
    ("/dashboard/settings", "Settings"),
];
/// Owners and admins also have this one.
pub const AUDIT_SECTION: (&str, &str) = ("/dashboard/audit", "Audit log");
/// Admins also have this one.
pub const ADMIN_SECTION: (&str, &str) = ("/dashboard/admin", "Admin");

/// The frame of a signed-in page.
pub struct Chrome {
    pub email: String,
    pub account: String,
    pub role: &'static str,
    pub csrf: String,
    /// The path of the current section, for `aria-current`.
    pub current: &'static str,
    /// Test data shown instead of live (the mode toggle).
    pub test_mode: bool,
    pub is_admin: bool,
}

impl Chrome {
    pub fn sections(&self) -> Vec<(&'static str, &'static str)> {
        let mut all = SECTIONS.to_vec();
        if self.is_admin || self.role == "owner" {
            all.push(AUDIT_SECTION);
        }
        if self.is_admin {
            all.push(ADMIN_SECTION);
        }
        all
    }

    pub fn is_current(&self, href: &str) -> bool {
        href == self.current
    }

    /// The current section's path in the other mode.
    pub fn toggle_href(&self) -> String {
        if self.test_mode {
            self.current.to_owned()
        } else {
            format!("{}?mode=test", self.current)
        }
    }
}

/// A page: HTML, never cached, never framed, scripts and styles only from
/// this site.
pub fn html(status: StatusCode, body: String) -> Response {
    let mut r = (status, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r.extensions_mut().insert(Raw);
    r
}

/// Renders `page` as a 200 (or the error page if it cannot be rendered).
pub fn render(page: &impl Template) -> Response {
    render_with(StatusCode::OK, page)
}

pub fn render_with(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => html(status, body),
        Err(e) => {
            tracing::error!(error = %e, "dashboard: a template failed");
            error_page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong on our side.",
            )
        }
    }
}

/// `303 See Other` to `to` (after a form, and to sign in).
pub fn redirect(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r.extensions_mut().insert(Raw);
    r
}

#[derive(Template)]
#[template(path = "dashboard/error.html")]
struct ErrorPage<'a> {
    status: u16,
    reason: &'a str,
    message: &'a str,
}

pub fn error_page(status: StatusCode, message: &str) -> Response {
    let page = ErrorPage {
        status: status.as_u16(),
        reason: status.canonical_reason().unwrap_or("Error"),
        message,
    };
    let body = page
        .render()
        .unwrap_or_else(|_| format!("{} {}", status.as_u16(), message));
    html(status, body)
}

/// The framework's own refusals under `/dashboard` (a query string that does
/// not decode, a wrong method, a body too large) as pages, like ours.
pub async fn html_errors(response: Response) -> Response {
    if response.extensions().get::<Raw>().is_some() {
        return response;
    }
    let status = response.status();
    let message = match status {
        StatusCode::METHOD_NOT_ALLOWED => "This page does not take that kind of request.",
        StatusCode::PAYLOAD_TOO_LARGE => "What was sent is too large.",
        s if s.is_client_error() => "The request was not understood. Go back and try again.",
        _ => "Something went wrong on our side.",
    };
    error_page(status, message)
}

pub fn not_found() -> Response {
    error_page(StatusCode::NOT_FOUND, "There is nothing here.")
}

/// Percent-encodes everything but unreserved characters and `/`.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A JSON value, indented for reading.
pub fn pretty_json(v: &serde_json::Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A time as the dashboard shows it: `2026-11-24 13:45 UTC`.
pub fn when(t: taskgate_core::Timestamp) -> String {
    let s = t.rfc3339();
    format!("{} {} UTC", &s[..10], &s[11..16])
}

pub fn when_opt(t: Option<taskgate_core::Timestamp>) -> String {
    t.map(when).unwrap_or_else(|| "never".to_owned())
}

/// Embedded assets: the stylesheet and the one small script.
pub async fn asset(axum::extract::Path(name): axum::extract::Path<String>) -> Response {
    let (body, content_type) = match name.as_str() {
        "app.css" => (include_str!("assets/app.css"), "text/css; charset=utf-8"),
        "app.js" => (
            include_str!("assets/app.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return not_found(),
    };
    let mut r = body.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=3600"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r.extensions_mut().insert(Raw);
    r
}
