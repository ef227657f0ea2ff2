//! The HTTP/1 accept loop, with a deadline on reading a request's headers (issue #14, item 3).
//!
//! `axum::serve` (axum 0.8) installs no timer in hyper, so hyper's header-read timeout is inert
//! and a client that dribbles a request head holds its connection, and its memory, for ever
//! (slowloris). This loop is `axum::serve`'s, with one difference: each connection is served
//! by hyper's HTTP/1 builder with a Tokio timer and `header_read_timeout` set. On shutdown it
//! stops accepting and waits for the connections it serves to finish, as `axum::serve` does.

use crate::serve::stopping;
use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves `app` on `listener` (no protocol upgrades: nothing here uses them) until `shutdown` turns true, then drains open connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_read_timeout: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    // Out of file descriptors and the like: pause rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopping(&mut shutdown) => break,
        };
        let _ = stream.set_nodelay(true);
        let connection = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(header_read_timeout)
            .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
