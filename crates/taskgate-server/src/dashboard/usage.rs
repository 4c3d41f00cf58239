//! Usage: requests against the plan's limits (as the limiter holds them
//! now), requests and 429s over the last hour, day or 30 days (a chart drawn
//! here as SVG, every figure also written out), tasks by API and status,
//! spend this month against the limit, usage per key, and task latency
//! percentiles, as the usage service reads them.

use std::fmt::Write;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::Mode;

use super::pages::{Chrome, not_found, render, when};
use super::session::{Session, store_error};
use crate::ratelimit::Window;
use crate::service::Actor;
use crate::service::usage::{self, Span, UsageError};
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub struct UsageQuery {
    #[serde(default)]
    mode: String,
    #[serde(default)]
    range: String,
}

/// A chart's span: its name, its buckets' length and how many.
#[derive(Clone, Copy)]
struct Range {
    key: &'static str,
    label: &'static str,
    bucket_ms: i64,
    buckets: i64,
}

const RANGES: [Range; 3] = [
    Range {
        key: "hour",
        label: "Last hour",
        bucket_ms: 60_000,
        buckets: 60,
    },
    Range {
        key: "day",
        label: "Last 24 hours",
        bucket_ms: 3_600_000,
        buckets: 24,
    },
    Range {
        key: "month",
        label: "Last 30 days",
        bucket_ms: 86_400_000,
        buckets: 30,
    },
];

pub struct Limit {
    pub window: &'static str,
    pub text: String,
}

pub struct TaskRow {
    pub api: String,
    pub counts: String,
    pub total: i64,
}

pub struct KeyRow {
    pub name: String,
    pub hint: String,
    pub requests: i64,
    pub limited: i64,
    pub tasks: i64,
    pub cost: String,
}

#[derive(Template)]
#[template(path = "dashboard/usage.html")]
struct UsagePage {
    chrome: Chrome,
    ranges: Vec<(&'static str, &'static str, bool)>,
    range_label: &'static str,
    plan: String,
    limits: Vec<Limit>,
    requests: i64,
    limited: i64,
    chart: String,
    chart_from: String,
    chart_to: String,
    tasks: Vec<TaskRow>,
    task_total: i64,
    spend: Option<String>,
    keys: Vec<KeyRow>,
    latency: Option<String>,
}

/// A bar per bucket: accepted requests, and the refused ones stacked on top.
fn chart(requests: &[i64], limited: &[i64], title: &str) -> String {
    let (w, h) = (600.0, 160.0);
    let n = requests.len().max(1) as f64;
    let max = requests
        .iter()
        .zip(limited)
        .map(|(a, b)| a + b)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let bar = w / n;
    let mut svg = format!(
        "<svg class=\"chart\" viewBox=\"0 0 {w} {}\" role=\"img\" aria-labelledby=\"chart-title\">\
         <title id=\"chart-title\">{title}</title>",
        h + 20.0
    );
    for (i, (a, b)) in requests.iter().zip(limited).enumerate() {
        let x = i as f64 * bar + 1.0;
        let ha = *a as f64 / max * h;
        let hb = *b as f64 / max * h;
        let _ = write!(
            svg,
            "<rect class=\"ok\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{ha:.1}\"/>",
            h - ha,
            (bar - 2.0).max(1.0)
        );
        if *b > 0 {
            let _ = write!(
                svg,
                "<rect class=\"limited\" x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{hb:.1}\"/>",
                h - ha - hb,
                (bar - 2.0).max(1.0)
            );
        }
    }
    let _ = write!(
        svg,
        "<line x1=\"0\" y1=\"{h}\" x2=\"{w}\" y2=\"{h}\" class=\"axis\"/>\
         <text x=\"0\" y=\"{}\" class=\"label\">0</text><text x=\"{w}\" y=\"12\" class=\"label\" text-anchor=\"end\">{}</text></svg>",
        h + 16.0,
        max as i64
    );
    svg
}

pub async fn page(
    State(app): State<Arc<AppState>>,
    session: Session,
    Query(q): Query<UsageQuery>,
) -> Response {
    let test = q.mode == "test";
    let mode = if test { Mode::Test } else { Mode::Live };
    let range = RANGES
        .iter()
        .copied()
        .find(|r| r.key == q.range)
        .unwrap_or(RANGES[1]);
    let span = Span {
        bucket_ms: range.bucket_ms,
        buckets: range.buckets,
    };
    let actor = Actor::User(&session.user);
    let usage = match usage::read(&app, actor, session.account.id, mode, span).await {
        Ok(u) => u,
        Err(UsageError::Store(e)) => return store_error(e),
        Err(UsageError::AccountNotFound(_)) => return not_found(),
    };
    let requests: i64 = usage.requests.iter().sum();
    let limited: i64 = usage.limited.iter().sum();
    let plan = usage.account.plan.as_str();

    let mut limits: Vec<Limit> = usage
        .windows
        .iter()
        .map(|w| {
            let used = w.limit - w.remaining;
            let (window, span) = match w.window {
                Window::Minute => ("Per minute", "in the last 60 seconds"),
                Window::Day => ("Per day", "today (UTC)"),
            };
            Limit {
                window,
                text: format!("{used} of {} requests {span}", w.limit),
            }
        })
        .collect();
    if limits.is_empty() {
        limits.push(Limit {
            window: "Rate limits",
            text: format!("none on the {plan} plan"),
        });
    }

    let spend = usage.spend.as_ref().map(|s| {
        let mut text = format!("${} spent in {}", s.spent.to_usd_string(), s.month);
        if s.reserved.0 > 0 {
            let _ = write!(
                text,
                " (and ${} held by running calls)",
                s.reserved.to_usd_string()
            );
        }
        match s.limit {
            Some(limit) => {
                let _ = write!(text, " of a ${} limit", limit.to_usd_string());
            }
            None => text.push_str("; no spend limit"),
        }
        text
    });

    let latency = usage.latency.as_ref().map(|l| {
        format!(
            "p50 {} ms, p90 {} ms, p99 {} ms over {} finished tasks",
            l.p50, l.p90, l.p99, l.tasks
        )
    });

    let keys = usage
        .keys
        .iter()
        .map(|k| {
            let (name, hint) = match &k.name {
                Some((name, hint)) => (name.as_str(), hint.as_str()),
                None => ("(deleted key)", ""),
            };
            KeyRow {
                name: name.to_owned(),
                hint: hint.to_owned(),
                requests: k.requests,
                limited: k.limited,
                tasks: k.tasks,
                cost: format!("${}", k.cost.to_usd_string()),
            }
        })
        .collect();
    let title = format!(
        "Requests per {}: {requests} accepted, {limited} refused (429)",
        match range.key {
            "hour" => "minute",
            "day" => "hour",
            _ => "day",
        }
    );
    let tasks: Vec<TaskRow> = usage
        .tasks
        .iter()
        .map(|t| TaskRow {
            total: t.total(),
            counts: t
                .by_status
                .iter()
                .map(|(s, n)| format!("{n} {}", s.as_str()))
                .collect::<Vec<_>>()
                .join(", "),
            api: t.api.as_str().to_owned(),
        })
        .collect();
    render(&UsagePage {
        chrome: session.chrome("/dashboard/usage", test),
        ranges: RANGES
            .iter()
            .map(|r| (r.key, r.label, r.key == range.key))
            .collect(),
        range_label: range.label,
        plan: plan.to_owned(),
        limits,
        requests,
        limited,
        chart: chart(&usage.requests, &usage.limited, &title),
        chart_from: when(usage.since),
        chart_to: when(usage.now),
        task_total: tasks.iter().map(|t| t.total).sum(),
        tasks,
        spend,
        keys,
        latency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_have_a_bar_per_bucket() {
        let svg = chart(&[1, 0, 3], &[0, 2, 0], "t");
        assert_eq!(svg.matches("class=\"ok\"").count(), 3);
        assert_eq!(svg.matches("class=\"limited\"").count(), 1);
        assert!(svg.contains("<title id=\"chart-title\">t</title>"));
    }
}
