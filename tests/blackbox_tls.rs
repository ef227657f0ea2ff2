//! TLS for the CLI and the configured public base URL, end to end (issue #14 item 7): the real
//! `switchboard serve` on a throwaway database, the real binary as the operator CLI, and, in front
//! of the server, a TLS terminator this test runs with a private CA it generates on the spot (as a
//! self-hoster behind an internal CA would have). Proves that `serve --public-url` is the base of
//! the URLs the server hands out, and that the CLI speaks https: it refuses a certificate nobody
//! vouches for with a clear error, and succeeds once given the CA (`--ca-cert`,
//! `SWITCHBOARD_CA_CERT`).

mod support;

use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::{Client, Server, add_human, data_dir, run};
use tokio_rustls::rustls;

const PUBLIC_URL: &str = "https://switchboard.example.com/base";

/// A private CA and a server certificate it signed for 127.0.0.1 only.
struct PrivateCa {
    ca_pem: String,
    server_certificate: rustls::pki_types::CertificateDer<'static>,
    server_key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl PrivateCa {
    fn generate() -> PrivateCa {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "switchboard test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().expect("CA key"))
            .expect("CA certificate");
        let server_key = rcgen::KeyPair::generate().expect("server key");
        let server_certificate = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .expect("server params")
            .signed_by(&server_key, &ca)
            .expect("server certificate");
        PrivateCa {
            ca_pem: ca.pem(),
            server_certificate: server_certificate.der().clone(),
            server_key: rustls::pki_types::PrivateKeyDer::Pkcs8(server_key.serialize_der().into()),
        }
    }
}

/// A TLS terminator on 127.0.0.1 forwarding to a plain-http server, counting the connections it
/// took and the handshakes that completed.
struct TlsFront {
    base: String,
    connections: Arc<AtomicUsize>,
    handshakes: Arc<AtomicUsize>,
}

impl TlsFront {
    async fn start(ca: &PrivateCa, backend: SocketAddr) -> TlsFront {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![ca.server_certificate.clone()], ca.server_key.clone_key())
            .expect("server certificate");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let connections = Arc::new(AtomicUsize::new(0));
        let handshakes = Arc::new(AtomicUsize::new(0));
        let (taken, completed) = (connections.clone(), handshakes.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                taken.fetch_add(1, Ordering::SeqCst);
                let (acceptor, completed) = (acceptor.clone(), completed.clone());
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(stream).await else { return };
                    completed.fetch_add(1, Ordering::SeqCst);
                    if let Ok(mut upstream) = tokio::net::TcpStream::connect(backend).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut upstream).await;
                    }
                });
            }
        });
        TlsFront { base: format!("https://{address}"), connections, handshakes }
    }
}

/// `switchboard ARGS` off the async runtime (the TLS front runs on it meanwhile).
async fn cli(args: Vec<String>, env: Vec<(String, String)>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        run(&args, &env)
    })
    .await
    .expect("CLI run")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

#[tokio::test]
async fn public_url_is_the_base_of_the_mcp_url_on_vend_and_the_ingest_url_on_webhook_create() {
    let database = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &database.url, "--public-url", PUBLIC_URL], &[], dir.path());
    let client = Client::new(&server.base);
    let (_, token) = add_human("alice", &["--database-url", &database.url]);

    let endpoint = client.vend(&token, json!({"name": "triage bot", "queues": ["inbox"]})).await;
    let slug = endpoint["slug"].as_str().expect("slug");
    assert_eq!(endpoint["mcp_url"], json!(format!("{PUBLIC_URL}/mcp/{slug}")), "{endpoint}");

    let targets = json!([{"scope": format!("endpoint:{slug}"), "queue": "inbox"}]);
    let (status, hook) = client.post("/api/v1/webhooks", &token, json!({"name": "provider", "targets": targets})).await;
    assert_eq!(status, 201, "{hook}");
    let id = hook["id"].as_str().expect("id");
    assert_eq!(hook["ingest_url"], json!(format!("{PUBLIC_URL}/ingest/{id}")), "{hook}");
}

#[test]
fn serve_refuses_a_public_url_it_cannot_build_urls_on_naming_the_flag() {
    for bad in ["ftp://switchboard.example.com", "https://switchboard.example.com/?tenant=1", "switchboard.example.com"]
    {
        let (code, _, stderr) = run(&["serve", "--public-url", bad], &[]);
        assert_eq!(code, 2, "{bad} was accepted: {stderr}");
        assert!(stderr.contains("--public-url"), "{bad}: {stderr}");
    }
}

#[test]
fn the_cli_refuses_a_url_that_is_neither_http_nor_https_as_a_usage_error() {
    let env = [("SWITCHBOARD_URL", "ftp://127.0.0.1:1"), ("SWITCHBOARD_TOKEN", "sbh_unused")];
    let (code, _, stderr) = run(&["token", "list"], &env);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--url") && stderr.contains("https://"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_over_https_refuses_an_unknown_ca_and_succeeds_when_given_it() {
    let database = engine::testing::empty_database().await;
    let dir = data_dir();
    let server = Server::start(&["--database-url", &database.url], &[], dir.path());
    let (_, token) = add_human("alice", &["--database-url", &database.url]);
    let ca = PrivateCa::generate();
    let ca_file = dir.path().join("private-ca.pem");
    std::fs::write(&ca_file, &ca.ca_pem).expect("write CA");
    let ca_path = ca_file.to_str().expect("utf-8 path").to_string();
    let backend: SocketAddr = server.base.trim_start_matches("http://").parse().expect("server address");
    let front = TlsFront::start(&ca, backend).await;
    let env = vec![("SWITCHBOARD_URL".to_string(), front.base.clone()), ("SWITCHBOARD_TOKEN".to_string(), token)];

    // Not trusted: the handshake is attempted (https is spoken, not refused as usage) and fails
    // on the certificate, with an error that names the fix.
    let (code, stdout, stderr) = cli(strings(&["token", "list", "--json"]), env.clone()).await;
    assert_eq!(code, 1, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stderr.contains("TLS") && stderr.contains("UnknownIssuer") && stderr.contains("--ca-cert"), "{stderr}");
    assert!(front.connections.load(Ordering::SeqCst) >= 1, "the CLI never connected");
    assert_eq!(front.handshakes.load(Ordering::SeqCst), 0, "an untrusted certificate must not complete a handshake");

    // Given the CA by flag, then by environment: the same command goes through the TLS front.
    let (code, stdout, stderr) = cli(strings(&["token", "list", "--json", "--ca-cert", &ca_path]), env.clone()).await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    let tokens: Value = serde_json::from_str(&stdout).expect("token list --json prints JSON");
    assert!(tokens.is_object() || tokens.is_array(), "{tokens}");
    let mut with_env = env.clone();
    with_env.push(("SWITCHBOARD_CA_CERT".to_string(), ca_path.clone()));
    let (code, _, stderr) = cli(strings(&["token", "list", "--json"]), with_env).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(front.handshakes.load(Ordering::SeqCst) >= 2);

    // The CA does not make its certificate good for another name: `localhost` is not 127.0.0.1.
    let port = front.base.rsplit(':').next().expect("port");
    let mut by_name = env.clone();
    by_name[0].1 = format!("https://localhost:{port}");
    let (code, _, stderr) = cli(strings(&["token", "list", "--ca-cert", &ca_path]), by_name).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("TLS") && stderr.contains("not valid for name"), "{stderr}");
}
