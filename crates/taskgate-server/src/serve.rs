//! Accepting connections, with what a slow or idle client may take bounded:
//! at most `http.max_connections` open at once (more wait in the kernel's
//! backlog), a request's headers within `http.header_read_timeout_ms`, and a
//! kept-alive connection closed once no request has come or gone for
//! `http.idle_timeout_ms`. (A body's deadline is the body reader's:
//! `http.body_read_timeout_ms`, answered `408 request_timeout`.)
//!
//! axum's own `serve` sets none of these; this is its loop with them.
//!
//! A stop is made so that a proxy in front never sees a request dropped:
//! connections the kernel completed but nobody accepted yet are accepted and
//! served, then the listener closes (a new connection is refused, so a proxy
//! tries another instance instead of waiting on a socket nobody reads);
//! every answer after the stop says `Connection: close`; and a kept-alive
//! connection closes only after [`DRAIN_LINGER`] without a request, so one a
//! proxy had already sent when the stop came is answered, not reset.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderValue, Request, Version, header};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use crate::config::HttpConfig;
use crate::repoll::Repoll;

/// How long a kept-alive connection stays open after a stop without a
/// request before it closes.
const DRAIN_LINGER: Duration = Duration::from_millis(500);

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
        connections.spawn(Repoll::new(async move {
            connection(stream, remote, app, http, stop).await;
            drop(permit);
        }));
    }
    // What the kernel accepted before the stop is served; then the port closes.
    while let Some((stream, remote)) = std::future::poll_fn(|cx| match listener.poll_accept(cx) {
        std::task::Poll::Ready(Ok(accepted)) => std::task::Poll::Ready(Some(accepted)),
        _ => std::task::Poll::Ready(None),
    })
    .await
    {
        let (app, stop) = (app.clone(), stop.clone());
        connections.spawn(Repoll::new(connection(stream, remote, app, http, stop)));
    }
    drop(listener);
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
    let http2 = Arc::new(AtomicBool::new(false));
    let (on_request_http2, stopping) = (http2.clone(), stop.clone());
    let service = app
        .map_request(move |mut req: Request<hyper::body::Incoming>| {
            on_request();
            if req.version() == Version::HTTP_2 {
                on_request_http2.store(true, Ordering::Relaxed);
            }
            req.extensions_mut().insert(ConnectInfo(remote));
            req.map(Body::new)
        })
        .map_response(move |mut res: axum::response::Response| {
            touch();
            // HTTP/2 says it with GOAWAY; the header is not allowed there.
            if stopping.is_cancelled() && !http2.load(Ordering::Relaxed) {
                res.headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            res
        });
    let idle = Duration::from_millis(http.idle_timeout_ms);
    // Nothing sent within the idle timeout (or, after a stop, the linger):
    // closed, as a kept-alive connection with nothing to do would be.
    let version = tokio::select! {
        version = speaks(&stream) => version,
        _ = tokio::time::sleep(idle) => return,
        _ = stop.cancelled() => {
            match tokio::time::timeout(DRAIN_LINGER.min(idle), speaks(&stream)).await {
                Ok(version) => version,
                Err(_) => return,
            }
        }
    };
    let mut builder = Builder::new(TokioExecutor::new());
    builder = match version {
        Some(Speaks::Http1) => builder.http1_only(),
        Some(Speaks::Http2) => builder.http2_only(),
        None => builder,
    };
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(http.header_read_timeout_ms));
    builder.http2().timer(TokioTimer::new());
    let mut conn =
        pin!(builder.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)));
    let mut tick =
        tokio::time::interval((idle / 4).clamp(Duration::from_millis(25), Duration::from_secs(1)));
    let (mut closing, mut draining) = (false, false);
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                return;
            }
            _ = stop.cancelled(), if !draining && !closing => {
                // A request may be on its way: the quiet is counted from now.
                draining = true;
                last.store(born.elapsed().as_millis() as u64, Ordering::Relaxed);
                tick = tokio::time::interval(DRAIN_LINGER / 5);
            }
            _ = tick.tick(), if !closing => {
                let quiet = born.elapsed().saturating_sub(Duration::from_millis(last.load(Ordering::Relaxed)));
                if quiet >= if draining { DRAIN_LINGER.min(idle) } else { idle } {
                    // Requests in flight finish; the connection then closes.
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// HTTP/2's connection preface: a client speaking HTTP/2 without an upgrade
/// (cleartext, prior knowledge) starts with it.
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Speaks {
    Http1,
    Http2,
}

/// What a connection speaks, told from its first bytes without reading them;
/// `None` when they do not tell yet (a part of HTTP/2's preface) or the
/// connection closed, and hyper-util's builder then finds out by reading.
///
/// Why not leave it to the builder: it reads the first bytes into a buffer
/// of 24 and hands them to hyper as a read of their own, after which hyper's
/// read buffer cannot make room for its next 8 KB and doubles, to 16 KB on
/// every connection (8 MB at 1,000 connections, in a heap profile). A
/// connection whose version is known is served with the bytes still unread.
async fn speaks(stream: &TcpStream) -> Option<Speaks> {
    let mut first = [0u8; HTTP2_PREFACE.len()];
    let n = stream.peek(&mut first).await.ok()?;
    match n {
        0 => None,
        n if first[..n] != HTTP2_PREFACE[..n] => Some(Speaks::Http1),
        n if n == HTTP2_PREFACE.len() => Some(Speaks::Http2),
        _ => None,
    }
}
