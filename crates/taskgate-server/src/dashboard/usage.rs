//! Usage: requests against the plan's limits (as the limiter holds them
//! now), requests and 429s over the last hour, day or 30 days (a chart drawn
//! here as SVG, every figure also written out), tasks by API and status,
//! spend this month against the limit, usage per key, and task latency
//! percentiles. Read from the request counts and the tasks table, never
//! counted on a request's path.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use taskgate_core::{KeyId, Micros, Mode, Timestamp};

use super::pages::{Chrome, render, when};
use super::session::{Session, store_error};
use crate::config::PlanLimits;
use crate::ratelimit::Window;
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

/// The `p`-th percentile (nearest rank) of sorted `values`.
fn percentile(sorted: &[i64], p: f64) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
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
    let account = &session.account;
    let now = app.clock.now();
    let last = now.unix_ms() - now.unix_ms().rem_euclid(range.bucket_ms);
    let since = Timestamp::from_unix_ms(last - (range.buckets - 1) * range.bucket_ms);

    let store = &app.store;
    let (buckets, counts, durations, keys) = match tokio::try_join!(
        store.request_buckets(account.id, mode, since, range.bucket_ms),
        store.task_counts(account.id, mode, since),
        store.task_durations(account.id, mode, since, 10_000),
        store.list_keys(account.id),
    ) {
        Ok(all) => all,
        Err(e) => return store_error(e),
    };

    let n = range.buckets as usize;
    let (mut req_series, mut lim_series) = (vec![0i64; n], vec![0i64; n]);
    let mut per_key: BTreeMap<KeyId, (i64, i64, i64, i64)> = BTreeMap::new();
    for b in &buckets {
        let i =
            ((b.bucket - since.unix_ms()) / range.bucket_ms).clamp(0, range.buckets - 1) as usize;
        req_series[i] += b.requests;
        lim_series[i] += b.limited;
        let k = per_key.entry(b.key_id).or_default();
        k.0 += b.requests;
        k.1 += b.limited;
    }
    let mut by_api: BTreeMap<String, BTreeMap<&'static str, i64>> = BTreeMap::new();
    for c in &counts {
        *by_api
            .entry(c.api.as_str().to_owned())
            .or_default()
            .entry(c.status.as_str())
            .or_default() += c.tasks;
        let k = per_key.entry(c.key_id).or_default();
        k.2 += c.tasks;
        k.3 += c.cost_micros;
    }
    let requests: i64 = req_series.iter().sum();
    let limited: i64 = lim_series.iter().sum();

    // The limits as the limiter holds them now (one account, both modes).
    let plan_limits = PlanLimits::of(&app.config.plans, &account.plan);
    // Without an answer from the limiter (Redis unreachable), no windows.
    let decision = app
        .limiter
        .peek(account.id, plan_limits)
        .await
        .unwrap_or_else(|_| crate::ratelimit::Decision::unlimited());
    let mut limits: Vec<Limit> = decision
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
            text: format!("none on the {} plan", account.plan.as_str()),
        });
    }

    let spend = if test {
        None
    } else {
        let month = now.month_key();
        let (spent, reserved) = match tokio::try_join!(
            store.month_spend(account.id, &month),
            store.month_reserved(account.id, &month),
        ) {
            Ok(v) => v,
            Err(e) => return store_error(e),
        };
        let mut text = format!("${} spent in {month}", Micros(spent).to_usd_string());
        if reserved > 0 {
            let _ = write!(
                text,
                " (and ${} held by running calls)",
                Micros(reserved).to_usd_string()
            );
        }
        match account.effective_spend_limit_micros() {
            Some(limit) => {
                let _ = write!(text, " of a ${} limit", Micros(limit).to_usd_string());
            }
            None => text.push_str("; no spend limit"),
        }
        Some(text)
    };

    let mut sorted = durations;
    sorted.sort_unstable();
    let latency = (!sorted.is_empty()).then(|| {
        format!(
            "p50 {} ms, p90 {} ms, p99 {} ms over {} finished tasks",
            percentile(&sorted, 50.0),
            percentile(&sorted, 90.0),
            percentile(&sorted, 99.0),
            sorted.len()
        )
    });

    let names: BTreeMap<KeyId, (&str, &str)> = keys
        .iter()
        .map(|k| (k.id, (k.name.as_str(), k.hint.as_str())))
        .collect();
    let keys = per_key
        .iter()
        .map(|(id, (r, l, t, c))| {
            let (name, hint) = names.get(id).copied().unwrap_or(("(deleted key)", ""));
            KeyRow {
                name: name.to_owned(),
                hint: hint.to_owned(),
                requests: *r,
                limited: *l,
                tasks: *t,
                cost: format!("${}", Micros(*c).to_usd_string()),
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
    let tasks: Vec<TaskRow> = by_api
        .into_iter()
        .map(|(api, statuses)| TaskRow {
            total: statuses.values().sum(),
            counts: statuses
                .iter()
                .map(|(s, n)| format!("{n} {s}"))
                .collect::<Vec<_>>()
                .join(", "),
            api,
        })
        .collect();
    render(&UsagePage {
        chrome: session.chrome("/dashboard/usage", test),
        ranges: RANGES
            .iter()
            .map(|r| (r.key, r.label, r.key == range.key))
            .collect(),
        range_label: range.label,
        plan: account.plan.as_str().to_owned(),
        limits,
        requests,
        limited,
        chart: chart(&req_series, &lim_series, &title),
        chart_from: when(since),
        chart_to: when(now),
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
    fn percentiles_by_nearest_rank() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50);
        assert_eq!(percentile(&v, 99.0), 99);
        assert_eq!(percentile(&[7], 90.0), 7);
        assert_eq!(percentile(&[], 50.0), 0);
    }

    #[test]
    fn charts_have_a_bar_per_bucket() {
        let svg = chart(&[1, 0, 3], &[0, 2, 0], "t");
        assert_eq!(svg.matches("class=\"ok\"").count(), 3);
        assert_eq!(svg.matches("class=\"limited\"").count(), 1);
        assert!(svg.contains("<title id=\"chart-title\">t</title>"));
    }
}
