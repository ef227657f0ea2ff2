//! HTTP over turmoil's simulated network: the production router served on a simulated listener,
//! and the small HTTP/1 client the simulated agents, owner and producer speak through.
//!
//! Exists because axum and hyper run on tokio's real sockets by default; in the simulation every
//! byte must cross turmoil's network so partitions, latency and crashes apply to it.

use axum::Router;
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::time::Duration;

/// The port every simulated replica listens on.
pub const PORT: u16 = 80;

/// turmoil's listener as an axum listener, so `axum::serve` runs the router unchanged.
pub struct SimListener(turmoil::net::TcpListener);

impl axum::serve::Listener for SimListener {
    type Io = turmoil::net::TcpStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.0.accept().await {
                Ok(pair) => return pair,
                // Accept errors are transient in the simulation (a peer vanished): keep serving.
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.0.local_addr()
    }
}

/// Serves `router` on this host's `PORT` until the host is crashed.
pub async fn serve(router: Router) -> turmoil::Result {
    let listener = turmoil::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
    axum::serve(SimListener(listener), router).await?;
    Ok(())
}

/// What a request came back with: an HTTP status and a JSON body, or a network failure (the
/// request may or may not have been applied: a lost reply looks the same as a lost request).
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Http(u16, Value),
    Network(String),
}

/// One HTTP request as a simulated client sends it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub bearer: Option<&'a str>,
    pub headers: &'a [(&'a str, String)],
    pub body: Option<&'a Value>,
}

/// `request` on a fresh connection to `host`, given up after `timeout` of simulated time (the
/// client cancels: the server may still be working on it).
pub async fn send(host: &str, request: Request<'_>, timeout: Duration) -> Reply {
    match tokio::time::timeout(timeout, exchange(host, request)).await {
        Ok(Ok(reply)) => reply,
        Ok(Err(error)) => Reply::Network(error),
        Err(_) => Reply::Network("timed out".into()),
    }
}

async fn exchange(host: &str, Request { method, path, bearer, headers, body }: Request<'_>) -> Result<Reply, String> {
    let stream = turmoil::net::TcpStream::connect((host, PORT)).await.map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    // The connection task ends when the exchange is over or the host goes away.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let payload = body.map(|b| b.to_string()).unwrap_or_default();
    let mut builder = hyper::Request::builder().method(method).uri(path).header("host", host);
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    if let Some(token) = bearer {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    let request = builder.body(Full::new(Bytes::from(payload))).map_err(|e| e.to_string())?;
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Ok(Reply::Http(status, value))
}
