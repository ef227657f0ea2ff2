//! HTTP over the simulation's own network: the production router served by hyper on in-memory
//! connections, and the small HTTP/1 client the simulated agents, owner and producer speak
//! through. Every byte and every end of stream crosses a `Pipe`, so latency, partitions and
//! crashes apply to them.
//!
//! Exists because axum and hyper run on real sockets by default; in the simulation every request
//! must take seeded simulated time and be lost the way a network loses it.
//!
//! The network's rules: opening a connection takes one latency; every write is on its way at
//! once (the sender never waits, and cannot take it back) and arrives after its own latency, 1 to
//! 25 ms drawn from the seed in the order the writes happen, never before the write sent ahead of
//! it; so does the end of a stream when an end closes. A replica that is down refuses
//! connections. A partition between two hosts is silence: connections between them stop
//! carrying bytes for good (a write is dropped, a read waits), and a new connection across it is
//! never answered, so the client's timeout is what ends the request. A crashed replica's
//! connections go silent the same way; the requests it was serving stop where they were.

use crate::rng::Rng;
use axum::Router;
use axum::body::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Latency of one connection set-up or one write, in simulated milliseconds.
const LATENCY_MS_MIN: u64 = 1;
const LATENCY_MS_MAX: u64 = 25;

/// The network of one run. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct Net(Arc<Mutex<Wires>>);

struct Wires {
    rng: Rng,
    /// Replicas that accept connections, by host name.
    listening: BTreeMap<String, mpsc::UnboundedSender<Pipe>>,
    /// Pairs of hosts that cannot reach each other (each pair sorted).
    cut: BTreeSet<(String, String)>,
    /// Open connections: the hosts at either end and the line they share.
    open: Vec<(String, String, Weak<Line>)>,
}

/// What both ends of one connection share: whether it still carries bytes, and what is on its
/// way in each direction (0: towards the end that connected, 1: towards the one that accepted).
#[derive(Default)]
struct Line {
    dead: AtomicBool,
    ways: Mutex<[Way; 2]>,
}

/// One direction of a line: chunks in the order sent, each with the instant it arrives.
#[derive(Default)]
struct Way {
    in_flight: VecDeque<(Instant, Chunk)>,
    /// The reader waiting for the next chunk.
    reader: Option<Waker>,
    closed: bool,
}

enum Chunk {
    Bytes(Bytes),
    End,
}

impl Line {
    fn ways(&self) -> MutexGuard<'_, [Way; 2]> {
        self.ways.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sends `chunk` towards end `to`: it arrives after `latency`, and not before what was sent
    /// ahead of it.
    fn send(&self, to: usize, chunk: Chunk, latency: Duration) {
        let mut ways = self.ways();
        let way = &mut ways[to];
        let after = way.in_flight.back().map_or_else(Instant::now, |(at, _)| *at);
        way.in_flight.push_back(((Instant::now() + latency).max(after), chunk));
        if let Some(reader) = way.reader.take() {
            reader.wake();
        }
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b { (a.to_string(), b.to_string()) } else { (b.to_string(), a.to_string()) }
}

impl Net {
    /// A network with nothing listening; latencies come from `seed`.
    pub fn new(seed: u64) -> Net {
        Net(Arc::new(Mutex::new(Wires {
            rng: Rng::new(seed ^ 0x4E37),
            listening: BTreeMap::new(),
            cut: BTreeSet::new(),
            open: vec![],
        })))
    }

    fn lock(&self) -> MutexGuard<'_, Wires> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn latency(&self) -> Duration {
        let drawn = self.lock().rng.below(LATENCY_MS_MAX - LATENCY_MS_MIN + 1);
        Duration::from_millis(LATENCY_MS_MIN + drawn)
    }

    /// `host` accepts connections from now on (until it crashes).
    fn listen(&self, host: &str) -> mpsc::UnboundedReceiver<Pipe> {
        let (sender, incoming) = mpsc::unbounded_channel();
        self.lock().listening.insert(host.to_string(), sender);
        incoming
    }

    /// `host` is down: it refuses new connections, and the ones it had go silent.
    pub fn crash(&self, host: &str) {
        let mut wires = self.lock();
        wires.listening.remove(host);
        wires.silence(|a, b| a == host || b == host);
    }

    /// Hosts `a` and `b` cannot reach each other until `repair`.
    pub fn partition(&self, a: &str, b: &str) {
        let mut wires = self.lock();
        wires.cut.insert(pair(a, b));
        wires.silence(|x, y| (x == a && y == b) || (x == b && y == a));
    }

    /// New connections between `a` and `b` work again (the silenced ones stay silent).
    pub fn repair(&self, a: &str, b: &str) {
        self.lock().cut.remove(&pair(a, b));
    }

    /// A connection from host `from` to host `to`, once it is set up; None if `to` refused it.
    /// Across a partition it never completes.
    async fn connect(&self, from: &str, to: &str) -> Option<Pipe> {
        tokio::time::sleep(self.latency()).await;
        let listener = {
            let wires = self.lock();
            if wires.cut.contains(&pair(from, to)) { None } else { Some(wires.listening.get(to).cloned()) }
        };
        let Some(listener) = listener else {
            return std::future::pending().await;
        };
        let listener = listener?;
        let line = Arc::new(Line::default());
        {
            let mut wires = self.lock();
            wires.open.retain(|(_, _, line)| line.strong_count() > 0);
            wires.open.push((from.to_string(), to.to_string(), Arc::downgrade(&line)));
        }
        let pipe = |end| Pipe { line: line.clone(), end, net: self.clone(), arriving: None };
        listener.send(pipe(1)).ok()?;
        Some(pipe(0))
    }
}

impl Wires {
    fn silence(&mut self, between: impl Fn(&str, &str) -> bool) {
        for (a, b, line) in &self.open {
            if between(a, b)
                && let Some(line) = line.upgrade()
            {
                line.dead.store(true, Ordering::SeqCst);
            }
        }
    }
}

/// One end of a connection: a byte stream whose bytes take simulated time to arrive.
pub struct Pipe {
    line: Arc<Line>,
    /// Which end this is: it reads `line.ways[end]` and writes the other way.
    end: usize,
    net: Net,
    /// The arrival of the next chunk, while it is still on its way.
    arriving: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Pipe {
    fn dead(&self) -> bool {
        self.line.dead.load(Ordering::SeqCst)
    }

    /// Sends the end of the stream the other way, once.
    fn close(&self) {
        let to = 1 - self.end;
        if !std::mem::replace(&mut self.line.ways()[to].closed, true) && !self.dead() {
            self.line.send(to, Chunk::End, self.net.latency());
        }
    }
}

impl AsyncRead for Pipe {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        loop {
            if self.dead() {
                // Silence: nothing more arrives, and nothing says so.
                return Poll::Pending;
            }
            if let Some(arriving) = self.arriving.as_mut() {
                ready!(arriving.as_mut().poll(cx));
                self.arriving = None;
            }
            let line = self.line.clone();
            let mut ways = line.ways();
            let way = &mut ways[self.end];
            let Some((at, chunk)) = way.in_flight.front_mut() else {
                way.reader = Some(cx.waker().clone());
                return Poll::Pending;
            };
            if *at > Instant::now() {
                let at = *at;
                drop(ways);
                self.arriving = Some(Box::pin(tokio::time::sleep_until(at)));
                continue;
            }
            return match chunk {
                Chunk::End => Poll::Ready(Ok(())),
                Chunk::Bytes(bytes) => {
                    let taken = bytes.len().min(buf.remaining());
                    buf.put_slice(&bytes.split_to(taken));
                    if bytes.is_empty() {
                        way.in_flight.pop_front();
                    }
                    Poll::Ready(Ok(()))
                }
            };
        }
    }
}

impl AsyncWrite for Pipe {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        // On a dead line the bytes are lost on the way; the sender cannot tell.
        if !self.dead() && !buf.is_empty() {
            self.line.send(1 - self.end, Chunk::Bytes(Bytes::copy_from_slice(buf)), self.net.latency());
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.close();
        Poll::Ready(Ok(()))
    }
}

impl Drop for Pipe {
    fn drop(&mut self) {
        self.close();
    }
}

/// Every task one life of a replica runs: its server, its connections, its sweeps and its hook
/// calls. A crash aborts them all, as a process's death ends its threads. A task the router
/// spawns by itself (the detach of an MCP event stream when it drops) is not among them; the
/// simulation opens no such stream. Cheap to clone.
#[derive(Clone, Default)]
pub struct HostTasks(Arc<Mutex<JoinSet<()>>>);

impl HostTasks {
    fn lock(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Runs `task` as part of this host until it ends or the host crashes.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.lock();
        // Forget the tasks that have ended, so a long life does not pile them up.
        while tasks.try_join_next().is_some() {}
        tasks.spawn(task);
    }

    /// The host is gone: every task of it stops at its next await.
    pub fn abort(&self) {
        self.lock().abort_all();
    }
}

/// Serves `router` as host `host` until the host crashes: every connection on a task of `tasks`.
pub async fn serve(net: Net, host: String, router: Router, tasks: HostTasks) {
    let mut incoming = net.listen(&host);
    while let Some(pipe) = incoming.recv().await {
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tasks.spawn(async move {
            // As the production server builds it, with a timer: its header-read timeout ends a
            // connection silenced by a partition. A connection ends in an error when its client
            // goes away; the server carries on.
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .serve_connection(TokioIo::new(pipe), service)
                .await;
        });
    }
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

impl Net {
    /// `request` from host `from` on a fresh connection to `host`, given up after `timeout` of
    /// simulated time (the client cancels: the server may still be working on it).
    pub async fn send(&self, from: &str, host: &str, request: Request<'_>, timeout: Duration) -> Reply {
        match tokio::time::timeout(timeout, self.exchange(from, host, request)).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(error)) => Reply::Network(error),
            Err(_) => Reply::Network("timed out".into()),
        }
    }

    async fn exchange(
        &self,
        from: &str,
        host: &str,
        Request { method, path, bearer, headers, body }: Request<'_>,
    ) -> Result<Reply, String> {
        let stream = self.connect(from, host).await.ok_or_else(|| "connection refused".to_string())?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
        // The connection task ends when the exchange is over (or waits out a silenced line).
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use serde_json::json;

    const PATIENT: Duration = Duration::from_secs(3);

    fn get_root() -> Request<'static> {
        Request { method: "GET", path: "/", bearer: None, headers: &[], body: None }
    }

    /// One replica `r0` answering `{"ok": true}` at once on `/` and after a second on `/slow`, on
    /// the simulation's runtime.
    fn with_replica(test: impl AsyncFnOnce(Net, HostTasks)) {
        crate::sim_time::runtime(7).block_on(async {
            crate::sim_time::start();
            let net = Net::new(7);
            let tasks = HostTasks::default();
            let ok = || async { axum::Json(json!({"ok": true})) };
            let slow = move || async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                ok().await
            };
            let router = Router::new().route("/", get(ok)).route("/slow", get(slow));
            tasks.spawn(serve(net.clone(), "r0".into(), router, tasks.clone()));
            tokio::task::yield_now().await;
            test(net, tasks).await;
            crate::sim_time::stop();
        });
    }

    #[test]
    fn a_request_is_answered_after_seeded_latencies() {
        with_replica(async |net, _| {
            let sent = tokio::time::Instant::now();
            assert_eq!(net.send("a0", "r0", get_root(), PATIENT).await, Reply::Http(200, json!({"ok": true})));
            // At least the connection set-up, the request and the reply, each 1 to 25 ms.
            let took = sent.elapsed();
            assert!(took >= Duration::from_millis(3 * LATENCY_MS_MIN), "{took:?}");
            assert!(took < Duration::from_secs(1), "{took:?}");
        });
    }

    #[test]
    fn a_partition_is_silence_until_repaired() {
        with_replica(async |net, _| {
            net.partition("a0", "r0");
            assert_eq!(net.send("a0", "r0", get_root(), PATIENT).await, Reply::Network("timed out".into()));
            // Another client still gets through.
            assert!(matches!(net.send("a1", "r0", get_root(), PATIENT).await, Reply::Http(200, _)));
            net.repair("a0", "r0");
            assert!(matches!(net.send("a0", "r0", get_root(), PATIENT).await, Reply::Http(200, _)));
        });
    }

    #[test]
    fn a_crashed_replica_refuses_connections_and_its_tasks_stop() {
        with_replica(async |net, tasks| {
            let (ran, heard) = std::sync::mpsc::channel();
            tasks.spawn(async move {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = ran.send(());
            });
            tasks.abort();
            net.crash("r0");
            let reply = net.send("a0", "r0", get_root(), PATIENT).await;
            assert_eq!(reply, Reply::Network("connection refused".into()));
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert!(heard.try_recv().is_err(), "a task of the crashed replica ran on");
        });
    }

    #[test]
    fn a_partition_silences_a_connection_already_open() {
        with_replica(async |net, _| {
            let cut = net.clone();
            let slow = Request { path: "/slow", ..get_root() };
            let request = tokio::spawn(async move { net.send("a0", "r0", slow, PATIENT).await });
            // Connected and the request delivered (two latencies at most), the reply not yet sent.
            tokio::time::sleep(Duration::from_millis(2 * LATENCY_MS_MAX + 1)).await;
            cut.partition("a0", "r0");
            assert_eq!(request.await.ok(), Some(Reply::Network("timed out".into())));
        });
    }
}
