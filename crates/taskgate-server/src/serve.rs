//! Accepting connections, with what a slow or idle client may take bounded:
//! at most `http.max_connections` open at once (more wait in the kernel's
//! backlog), a request's headers within `http.header_read_timeout_ms`, and a
//! kept-alive connection closed once no request has come or gone for
//! `http.idle_timeout_ms`. (A body's deadline is the body reader's:
//! `http.body_read_timeout_ms`, answered `408 request_timeout`.)
//!
//! axum's own `serve` sets none of these; this is its loop with them.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::config::HttpConfig;

/// Serves `app` on `listener` until `shutdown` completes, then lets every
/// connection finish its requests in flight and returns.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    http: HttpConfig,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(http.max_connections));
    let connections = TaskTracker::new();
    let stop = CancellationToken::new();
    let mut shutdown = pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let (stream, remote) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: pause, not spin.
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (app, stop) = (app.clone(), stop.clone());
        connections.spawn(async move {
            connection(stream, remote, app, http, stop).await;
            drop(permit);
        });
    }
    stop.cancel();
    connections.close();
    connections.wait().await;
}

async fn connection(
    stream: TcpStream,
    remote: SocketAddr,
    app: Router,
    http: HttpConfig,
    stop: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    // When a request last came or went, in ms since the connection opened.
    let born = Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let touch = {
        let last = last.clone();
        move || last.store(born.elapsed().as_millis() as u64, Ordering::Relaxed)
    };
    let on_request = touch.clone();
    let service = app
        .map_request(move |mut req: Request<hyper::body::Incoming>| {
            on_request();
            req.extensions_mut().insert(ConnectInfo(remote));
            req.map(Body::new)
        })
        .map_response(move |res| {
            touch();
            res
        });
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(http.header_read_timeout_ms));
    builder.http2().timer(TokioTimer::new());
    let mut conn =
        pin!(builder.serve_connection_with_upgrades(
            TokioIo::new(stream),
            TowerToHyperService::new(service)
        ));
    let idle = Duration::from_millis(http.idle_timeout_ms);
    let mut tick =
        tokio::time::interval((idle / 4).clamp(Duration::from_millis(25), Duration::from_secs(1)));
    let mut closing = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = stop.cancelled(), if !closing => {
                closing = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = tick.tick(), if !closing => {
                let quiet = born.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                if quiet >= idle {
                    // Requests in flight finish; the connection then closes.
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
