//! The generic adapter against fakes in the style of Replicate's and fal's
//! job APIs and of a plain synchronous JSON service.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method as HttpMethod, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use parking_lot::Mutex;

use super::super::config::Protocol;
use super::super::testutil::{http_route, provider, run, serve, upstream};
use super::*;
use crate::schema::CompiledSchema;
use crate::{ExecContext, Provider};

const ID: &str = "ufawqhfynnddngldkgtslldrkq";
const OUT: &str = "https://replicate.delivery/xezq/fHw8Kq3fd1ZJqkqXxmG4aQ/out-0.webp";

/// One request the fake saw.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    auth: Option<String>,
    body: Bytes,
    at: Instant,
}

/// Replicate's predictions API: the poll answers walk through `statuses`
/// (the last one repeats); `Err(code)` answers that HTTP error instead.
#[derive(Clone)]
struct Replicate {
    statuses: Arc<Mutex<Vec<Result<&'static str, u16>>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Replicate {
    async fn start(statuses: Vec<Result<&'static str, u16>>) -> (Self, String) {
        let fake = Self {
            statuses: Arc::new(Mutex::new(statuses)),
            seen: Arc::default(),
        };
        let app = Router::new()
            .route("/v1/models/{owner}/{name}/predictions", post(create))
            .route("/v1/predictions/{id}", get(poll))
            .route("/v1/predictions/{id}/cancel", post(cancel))
            .fallback(|| async { StatusCode::NOT_FOUND })
            .with_state(fake.clone());
        (fake, serve(app).await)
    }

    fn record(&self, method: &HttpMethod, uri: &Uri, headers: &HeaderMap, body: Bytes) {
        self.seen.lock().push(Seen {
            method: method.to_string(),
            path: uri.to_string(),
            auth: headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body,
            at: Instant::now(),
        });
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    fn cancels(&self) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.path.ends_with("/cancel"))
            .count()
    }
}

fn prediction(status: &str, model: &str, input: Value) -> Value {
    let mut p = json!({
        "id": ID,
        "model": model,
        "version": "5599ed30703defd1d160a25a63321b4dec97101d98b4674bcc56e41f62f35637",
        "input": input,
        "logs": "",
        "output": null,
        "data_removed": false,
        "error": null,
        "status": status,
        "created_at": "2024-11-21T18:30:02.186Z",
        "urls": {
            "cancel": format!("https://api.replicate.com/v1/predictions/{ID}/cancel"),
            "get": format!("https://api.replicate.com/v1/predictions/{ID}"),
            "stream": "https://stream.replicate.com/v1/files/bcwr-3okdfv3o2wehstv5f2okyftwxy57hhypqsi6osiim5iaq5yebb3q"
        }
    });
    match status {
        "succeeded" => {
            p["output"] = json!([OUT]);
            p["started_at"] = json!("2024-11-21T18:30:02.412Z");
            p["completed_at"] = json!("2024-11-21T18:30:03.612Z");
            p["metrics"] = json!({"image_count": 1, "predict_time": 1.2, "total_time": 1.426});
        }
        "failed" => {
            p["error"] = json!("CUDA out of memory");
            p["logs"] = json!("Traceback (most recent call last): ...");
        }
        _ => {}
    }
    p
}

async fn create(
    State(f): State<Replicate>,
    Path((owner, name)): Path<(String, String)>,
    method: HttpMethod,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    f.record(&method, &uri, &headers, body.clone());
    let input = serde_json::from_slice::<Value>(&body).unwrap_or_default()["input"].clone();
    let p = prediction("starting", &format!("{owner}/{name}"), input);
    (StatusCode::CREATED, axum::Json(p)).into_response()
}

async fn poll(
    State(f): State<Replicate>,
    Path(id): Path<String>,
    method: HttpMethod,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    f.record(&method, &uri, &headers, Bytes::new());
    if id != ID {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"detail": "Not found."})),
        )
            .into_response();
    }
    let next = {
        let mut s = f.statuses.lock();
        if s.len() > 1 { s.remove(0) } else { s[0] }
    };
    match next {
        Ok(status) => axum::Json(prediction(
            status,
            "black-forest-labs/flux-schnell",
            json!({"prompt": "a lighthouse"}),
        ))
        .into_response(),
        Err(code) => (
            StatusCode::from_u16(code).unwrap(),
            axum::Json(json!({"detail": "temporarily unavailable"})),
        )
            .into_response(),
    }
}

async fn cancel(
    State(f): State<Replicate>,
    method: HttpMethod,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    f.record(&method, &uri, &headers, Bytes::new());
    axum::Json(prediction(
        "canceled",
        "black-forest-labs/flux-schnell",
        json!({}),
    ))
    .into_response()
}

/// flux-schnell on Replicate, as an `image_generation` API.
fn replicate_api() -> HttpApiConfig {
    HttpApiConfig {
        method: None,
        path: "/v1/models/black-forest-labs/{{model}}/predictions".into(),
        body: Some(json!({"input": {
            "prompt": "{{input.prompt}}",
            "num_outputs": "{{input.n}}",
            "aspect_ratio": "{{input.options.aspect_ratio}}",
            "seed": "{{input.options.seed}}"
        }})),
        output: json!({"images": [{"url": "{{response.output.0}}"}], "model": "{{response.model}}"}),
        usage: BTreeMap::from([("units".into(), "{{response.metrics.image_count}}".into())]),
        job: Some(JobConfig {
            id: "{{response.id}}".into(),
            status_path: "/v1/predictions/{{job.id}}".into(),
            status: "{{response.status}}".into(),
            done: vec!["succeeded".into()],
            failed: vec!["failed".into(), "canceled".into()],
            result_path: None,
            cancel_path: Some("/v1/predictions/{{job.id}}/cancel".into()),
            cancel_method: None,
            poll_interval_ms: Some(20),
        }),
    }
}

fn image_upstream(base: &str, http: HttpApiConfig) -> super::super::Upstream {
    let mut route = http_route("flux", Kind::ImageGeneration, "replicate", http);
    route.groups[0][0].model = "flux-schnell".into();
    upstream(
        &[("replicate", provider(Protocol::Http, base))],
        vec![route],
    )
}

#[tokio::test]
async fn replicate_prediction_is_polled_until_it_succeeds() {
    let (fake, base) =
        Replicate::start(vec![Ok("starting"), Ok("processing"), Ok("succeeded")]).await;
    let u = image_upstream(&base, replicate_api());
    let (r, _) = run(
        &u,
        "flux",
        json!({"prompt": "a lighthouse", "options": {"aspect_ratio": "16:9"}}),
    )
    .await;
    let e = r.unwrap();
    assert_eq!(
        e.output,
        json!({"images": [{"url": OUT}], "model": "black-forest-labs/flux-schnell"})
    );
    assert!(
        CompiledSchema::compile(&Kind::ImageGeneration.output_schema())
            .unwrap()
            .is_valid(&e.output)
    );
    assert_eq!(e.usage.units, 1);
    assert_eq!(e.usage.input_tokens, None);

    let seen = fake.seen();
    let calls: Vec<(&str, &str)> = seen
        .iter()
        .map(|s| (s.method.as_str(), s.path.as_str()))
        .collect();
    let poll = format!("/v1/predictions/{ID}");
    assert_eq!(
        calls,
        [
            (
                "POST",
                "/v1/models/black-forest-labs/flux-schnell/predictions"
            ),
            ("GET", poll.as_str()),
            ("GET", poll.as_str()),
            ("GET", poll.as_str()),
        ]
    );
    // Optional inputs the client left out are not sent as nulls.
    let body: Value = serde_json::from_slice(&seen[0].body).unwrap();
    assert_eq!(
        body,
        json!({"input": {"prompt": "a lighthouse", "aspect_ratio": "16:9"}})
    );
    assert!(seen[1].body.is_empty());
    assert!(
        seen.iter()
            .all(|s| s.auth.as_deref() == Some("Bearer test-key"))
    );
    // Polls are paced by the interval.
    assert!(seen[3].at - seen[2].at >= Duration::from_millis(15));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(fake.cancels(), 0, "a finished job is not cancelled");
}

#[tokio::test]
async fn a_failed_job_reports_the_upstream_message() {
    let (fake, base) = Replicate::start(vec![Ok("processing"), Ok("failed")]).await;
    let u = image_upstream(&base, replicate_api());
    let (r, ctx) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, error_code::UPSTREAM_ERROR);
    assert!(e.message.contains("CUDA out of memory"), "{}", e.message);
    assert!(e.message.contains(ID), "{}", e.message);
    // The job failed upstream: not submitted again to the same target.
    assert_eq!(ctx.attempts().len(), 1);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(fake.cancels(), 0);
}

#[tokio::test]
async fn a_dropped_job_is_cancelled_upstream() {
    let (fake, base) = Replicate::start(vec![Ok("starting"), Ok("processing")]).await;
    let u = image_upstream(&base, replicate_api());
    let mut ctx = ExecContext::with_timeout(Duration::from_secs(30));
    let input = json!({"prompt": "a lighthouse"});
    let r = tokio::time::timeout(
        Duration::from_millis(300),
        u.execute("flux", &input, &mut ctx),
    )
    .await;
    assert!(r.is_err(), "the job never ends");
    let stopped = Instant::now();
    while fake.cancels() == 0 && stopped.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let seen = fake.seen();
    let cancel = seen
        .iter()
        .find(|s| s.path.ends_with("/cancel"))
        .expect("the job was cancelled upstream within 2 s");
    assert_eq!(cancel.method, "POST");
    assert_eq!(cancel.path, format!("/v1/predictions/{ID}/cancel"));
    assert_eq!(cancel.auth.as_deref(), Some("Bearer test-key"));
    assert!(seen.iter().filter(|s| s.method == "GET").count() >= 2);
    assert_eq!(fake.cancels(), 1);
}

#[tokio::test]
async fn polls_ride_out_a_5xx_but_not_a_4xx() {
    let (_, base) = Replicate::start(vec![Ok("processing"), Err(503), Ok("succeeded")]).await;
    let u = image_upstream(&base, replicate_api());
    let (r, ctx) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    assert_eq!(r.unwrap().output["images"][0]["url"], OUT);
    assert_eq!(ctx.attempts().len(), 1, "the job was not submitted again");

    let (fake, base) = Replicate::start(vec![Ok("processing"), Err(404)]).await;
    let u = image_upstream(&base, replicate_api());
    let (r, _) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    let e = r.unwrap_err();
    assert_eq!(e.upstream_status, Some(404));
    let polls = fake.seen().iter().filter(|s| s.method == "GET").count();
    assert_eq!(polls, 2, "a 4xx poll is not retried");
    // The job's fate is unknown: it is cancelled.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fake.cancels(), 1);
}

#[tokio::test]
async fn a_long_job_outlives_the_attempt_timeout_while_it_answers_polls() {
    let mut statuses = vec![Ok("processing"); 30];
    statuses.push(Ok("succeeded"));
    let (fake, base) = Replicate::start(statuses).await;
    let mut p = provider(Protocol::Http, &base);
    p.timeout_ms = Some(200);
    let mut route = http_route("flux", Kind::ImageGeneration, "replicate", replicate_api());
    route.groups[0][0].model = "flux-schnell".into();
    let u = upstream(&[("replicate", p)], vec![route]);
    let started = Instant::now();
    let (r, _) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    assert!(r.is_ok(), "{r:?}");
    assert!(started.elapsed() > Duration::from_millis(400));
    assert_eq!(fake.cancels(), 0);
}

#[tokio::test]
async fn a_job_without_an_id_is_an_invalid_answer() {
    let (_, base) = Replicate::start(vec![Ok("succeeded")]).await;
    let mut http = replicate_api();
    http.job.as_mut().unwrap().id = "{{response.prediction_id}}".into();
    let u = image_upstream(&base, http);
    let (r, _) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    assert_eq!(r.unwrap_err().code, error_code::INVALID_UPSTREAM_RESPONSE);

    let (_, base) = Replicate::start(vec![Ok("succeeded")]).await;
    let mut http = replicate_api();
    http.job.as_mut().unwrap().id = "pred-{{response.prediction_id}}".into();
    let u = image_upstream(&base, http);
    let (r, _) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    assert_eq!(r.unwrap_err().code, error_code::INVALID_UPSTREAM_RESPONSE);

    let (_, base) = Replicate::start(vec![Ok("succeeded")]).await;
    let mut http = replicate_api();
    http.job.as_mut().unwrap().status = "{{response.state}}".into();
    let u = image_upstream(&base, http);
    let (r, _) = run(&u, "flux", json!({"prompt": "a lighthouse"})).await;
    let e = r.unwrap_err();
    assert_eq!(e.code, error_code::INVALID_UPSTREAM_RESPONSE);
    assert!(e.message.contains("status"), "{}", e.message);
}

/// fal's queue: the status and the result are separate resources.
#[tokio::test]
async fn a_queued_job_fetches_its_result_when_done() {
    const REQ: &str = "764cabcf-b745-4b3e-ae38-1200304cf45b";
    let polls = Arc::new(Mutex::new(0u32));
    let p = polls.clone();
    let app = Router::new()
        .route(
            "/fal-ai/flux/dev",
            post(|| async {
                axum::Json(json!({
                    "status": "IN_QUEUE", "request_id": REQ,
                    "response_url": format!("https://queue.fal.run/fal-ai/flux/requests/{REQ}"),
                    "status_url": format!("https://queue.fal.run/fal-ai/flux/requests/{REQ}/status"),
                    "cancel_url": format!("https://queue.fal.run/fal-ai/flux/requests/{REQ}/cancel"),
                    "queue_position": 0
                }))
            }),
        )
        .route(
            "/fal-ai/flux/requests/{id}/status",
            get(move || async move {
                let mut n = p.lock();
                *n += 1;
                let status = if *n < 3 { "IN_PROGRESS" } else { "COMPLETED" };
                axum::Json(json!({"status": status, "request_id": REQ, "logs": null}))
            }),
        )
        .route(
            "/fal-ai/flux/requests/{id}",
            get(|| async {
                axum::Json(json!({
                    "images": [{"url": "https://v3.fal.media/files/rabbit/out.jpg",
                                "width": 1024, "height": 768, "content_type": "image/jpeg"}],
                    "timings": {"inference": 1.13}, "seed": 42,
                    "has_nsfw_concepts": [false], "prompt": "a lighthouse"
                }))
            }),
        );
    let base = serve(app).await;
    let http = HttpApiConfig {
        method: Some("post".into()),
        path: "/fal-ai/flux/dev".into(),
        body: Some(json!({"prompt": "{{input.prompt}}", "num_images": "{{input.n}}"})),
        output: json!({"images": [{"url": "{{response.images.0.url}}"}], "model": "fal-ai/flux/{{model}}"}),
        usage: BTreeMap::from([("units".into(), "{{input.n}}".into())]),
        job: Some(JobConfig {
            id: "{{response.request_id}}".into(),
            status_path: "/fal-ai/flux/requests/{{job.id}}/status".into(),
            status: "{{response.status}}".into(),
            done: vec!["COMPLETED".into()],
            failed: vec![],
            result_path: Some("/fal-ai/flux/requests/{{job.id}}".into()),
            cancel_path: None,
            cancel_method: None,
            poll_interval_ms: Some(10),
        }),
    };
    let u = upstream(
        &[("fal", provider(Protocol::Http, &base))],
        vec![http_route("flux", Kind::ImageGeneration, "fal", http)],
    );
    let (r, _) = run(&u, "flux", json!({"prompt": "a lighthouse", "n": 2})).await;
    let e = r.unwrap();
    assert_eq!(
        e.output,
        json!({"images": [{"url": "https://v3.fal.media/files/rabbit/out.jpg"}], "model": "fal-ai/flux/m"})
    );
    assert_eq!(e.usage.units, 2);
    assert_eq!(*polls.lock(), 3);
}

/// A moderation service that answers at once.
#[tokio::test]
async fn a_synchronous_service_is_mapped_into_the_kind() {
    let seen = Arc::new(Mutex::new(None::<(HeaderMap, Value)>));
    let s = seen.clone();
    let app = Router::new().route(
        "/v2/classify/{model}",
        post(
            move |headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
                *s.lock() = Some((headers, body));
                axum::Json(json!({
                    "id": "clf_01HZX3",
                    "model_version": "toxic-bert-2024-06",
                    "top": {"label": "threat", "score": 0.91},
                    "flagged": true,
                    "results": [{"label": "threat", "score": 0.91}, {"label": "insult", "score": 0.42}],
                    "usage": {"tokens": 5}
                }))
            },
        ),
    );
    let base = serve(app).await;
    let http = HttpApiConfig {
        method: None,
        path: "/v2/classify/{{model}}?lang={{input.options.lang}}".into(),
        body: Some(json!({"inputs": "{{input.text}}", "threshold": "{{input.options.threshold}}"})),
        output: json!({
            "label": "{{response.top.label}}",
            "score": "{{response.top.score}}",
            "labels": "{{response.results}}",
            "flagged": "{{response.flagged}}",
            "model": "{{model}}@{{response.model_version}}"
        }),
        usage: BTreeMap::from([
            ("input_tokens".into(), "{{response.usage.tokens}}".into()),
            ("output_tokens".into(), "{{response.usage.output}}".into()),
        ]),
        job: None,
    };
    let u = upstream(
        &[("clf", provider(Protocol::Http, &base))],
        vec![http_route("moderate", Kind::Classification, "clf", http)],
    );
    let (r, _) = run(
        &u,
        "moderate",
        json!({"text": "I will hurt you", "options": {"lang": "en us"}}),
    )
    .await;
    let e = r.unwrap();
    assert_eq!(
        e.output,
        json!({"label": "threat", "score": 0.91, "flagged": true,
               "labels": [{"label": "threat", "score": 0.91}, {"label": "insult", "score": 0.42}],
               "model": "m@toxic-bert-2024-06"})
    );
    assert!(
        CompiledSchema::compile(&Kind::Classification.output_schema())
            .unwrap()
            .is_valid(&e.output)
    );
    assert_eq!(
        e.usage,
        Usage {
            units: 1,
            input_tokens: Some(5),
            output_tokens: None,
            ..Usage::default()
        }
    );
    let (headers, body) = seen.lock().clone().unwrap();
    assert_eq!(body, json!({"inputs": "I will hurt you"}));
    assert_eq!(headers["authorization"], "Bearer test-key");
}

#[tokio::test]
async fn a_bad_configuration_sends_nothing() {
    // A bad section is refused when the API is added, before any request.
    let (fake, base) = Replicate::start(vec![Ok("succeeded")]).await;
    let mut http = replicate_api();
    http.usage.insert("tokens".into(), "{{response.x}}".into());
    let mut u = crate::upstream::Upstream::new(Default::default()).unwrap();
    u.add_provider(
        "replicate",
        &provider(Protocol::Http, &base),
        Some("k".into()),
    )
    .unwrap();
    let e = u
        .add_route(http_route("flux", Kind::ImageGeneration, "replicate", http))
        .unwrap_err();
    assert!(e.contains("usage.tokens"), "{e}");
    assert!(fake.seen().is_empty());

    let mut http = replicate_api();
    http.method = Some("TRACE".into());
    assert!(check(&http).is_err());
    http.method = Some("get".into());
    assert_eq!(check(&http), Ok(Method::GET));
    http.job.as_mut().unwrap().done.clear();
    assert!(check(&http).is_err());
    let mut http = replicate_api();
    http.path = "v1/predictions".into();
    assert!(check(&http).is_err());
}

#[test]
fn usage_counts_must_be_whole_numbers() {
    let mut http = replicate_api();
    let cx =
        json!({"response": {"a": 3, "b": 4.0, "c": "12", "d": 1.5, "e": -1, "f": "x", "g": null}});
    for (t, want) in [
        ("{{response.a}}", Ok(Some(3))),
        ("{{response.b}}", Ok(Some(4))),
        ("{{response.c}}", Ok(Some(12))),
        ("7", Ok(Some(7))),
        ("{{response.g}}", Ok(None)),
        ("{{response.zz}}", Ok(None)),
        ("n={{response.zz}}", Ok(None)),
        ("{{response.d}}", Err(())),
        ("{{response.e}}", Err(())),
        ("{{response.f}}", Err(())),
    ] {
        http.usage.insert("units".into(), t.into());
        let got = count(&http, "units", &cx).map_err(|e| {
            assert_eq!(e.code, error_code::INVALID_UPSTREAM_RESPONSE);
        });
        assert_eq!(got, want, "{t}");
    }
    assert_eq!(count(&http, "input_tokens", &cx).ok(), Some(None));
}
