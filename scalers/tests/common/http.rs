//! The tests' own HTTP(S) servers on loopback: a handler per request, every request recorded,
//! connections counted; TLS material from a CA generated at test time (rcgen). Included by the
//! test binaries of HTTP-based scalers next to `common/mod.rs`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use http::{HeaderMap, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `GET`, ...
    pub method: String,
    /// Path and query.
    pub uri: String,
    /// The request headers.
    pub headers: HeaderMap,
    /// The request body, as text (lossy).
    pub body: String,
}

impl Recorded {
    /// The decoded value of query parameter `name`.
    pub fn query(&self, name: &str) -> Option<String> {
        let url = url::Url::parse(&format!("http://x{}", self.uri)).ok()?;
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    }

    /// The value of header `name` as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }
}

/// What a handler answers: status, content type, body.
pub type Answer = (StatusCode, &'static str, String);

/// A request handler.
pub type Handler = Arc<dyn Fn(Recorded) -> BoxFuture<'static, Answer> + Send + Sync>;

/// A handler from a synchronous function.
pub fn handler(f: impl Fn(&Recorded) -> Answer + Send + Sync + 'static) -> Handler {
    let f = Arc::new(f);
    Arc::new(move |request| {
        let answer = f(&request);
        Box::pin(async move { answer })
    })
}

/// A server on a free loopback port, stopped when dropped.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http` or `https`.
    pub scheme: &'static str,
    requests: Arc<Mutex<Vec<Recorded>>>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// A plain HTTP server.
    pub async fn start(handler: Handler) -> Self {
        Self::serve(handler, None).await
    }

    /// A plain HTTP server on `addr` (e.g. `127.0.0.2:<port>`: every 127.x.y.z address is on
    /// the loopback interface, so several servers can share one port number).
    ///
    /// # Errors
    /// The address cannot be bound (in use).
    pub async fn start_at(handler: Handler, addr: SocketAddr) -> std::io::Result<Self> {
        Ok(Self::serve_on(
            handler,
            None,
            TcpListener::bind(addr).await?,
        ))
    }

    /// An HTTPS server with `tls`.
    pub async fn start_tls(handler: Handler, tls: Arc<rustls::ServerConfig>) -> Self {
        Self::serve(handler, Some(tokio_rustls::TlsAcceptor::from(tls))).await
    }

    async fn serve(handler: Handler, tls: Option<tokio_rustls::TlsAcceptor>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        Self::serve_on(handler, tls, listener)
    }

    fn serve_on(
        handler: Handler,
        tls: Option<tokio_rustls::TlsAcceptor>,
        listener: TcpListener,
    ) -> Self {
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let scheme = if tls.is_some() { "https" } else { "http" };
        let task = {
            let requests = Arc::clone(&requests);
            let connections = Arc::clone(&connections);
            tokio::spawn(async move {
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    connections.fetch_add(1, Ordering::SeqCst);
                    let handler = Arc::clone(&handler);
                    let requests = Arc::clone(&requests);
                    let tls = tls.clone();
                    tokio::spawn(async move {
                        let service = service_fn(move |request: hyper::Request<Incoming>| {
                            let requests = Arc::clone(&requests);
                            let handler = Arc::clone(&handler);
                            async move {
                                use http_body_util::BodyExt;
                                let (parts, body) = request.into_parts();
                                let body = body
                                    .collect()
                                    .await
                                    .map(|b| b.to_bytes())
                                    .unwrap_or_default();
                                let recorded = Recorded {
                                    method: parts.method.to_string(),
                                    uri: parts
                                        .uri
                                        .path_and_query()
                                        .map(|p| p.to_string())
                                        .unwrap_or_default(),
                                    headers: parts.headers.clone(),
                                    body: String::from_utf8_lossy(&body).into_owned(),
                                };
                                requests.lock().expect("requests").push(recorded.clone());
                                let (status, content_type, body) = handler(recorded).await;
                                let response = hyper::Response::builder()
                                    .status(status)
                                    .header("content-type", content_type)
                                    .body(Full::new(Bytes::from(body)))
                                    .expect("response");
                                Ok::<_, Infallible>(response)
                            }
                        });
                        let builder = hyper::server::conn::http1::Builder::new();
                        match tls {
                            Some(acceptor) => {
                                // Handshake failures (a client without a certificate, an
                                // untrusted CA) just end the connection.
                                if let Ok(stream) = acceptor.accept(stream).await {
                                    let _ = builder
                                        .serve_connection(TokioIo::new(stream), service)
                                        .await;
                                }
                            }
                            None => {
                                let _ = builder
                                    .serve_connection(TokioIo::new(stream), service)
                                    .await;
                            }
                        }
                    });
                }
            })
        };
        Self {
            addr,
            scheme,
            requests,
            connections,
            task,
        }
    }

    /// `scheme://127.0.0.1:port<path>`.
    pub fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("requests").clone()
    }

    /// The last request.
    pub fn last_request(&self) -> Recorded {
        self.requests().pop().expect("a request was made")
    }

    /// How many TCP connections were accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A CA generated at test time, issuing server and client certificates.
pub struct TestCa(CertifiedIssuer<'static, KeyPair>);

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Self(CertifiedIssuer::self_signed(params, KeyPair::generate().expect("key")).expect("CA"))
    }

    /// The CA certificate as PEM.
    pub fn pem(&self) -> String {
        self.0.as_ref().pem()
    }

    /// A certificate and key (PEM) for `hosts` (names or IP addresses) with `usage`.
    pub fn issue(&self, hosts: &[&str], usage: ExtendedKeyUsagePurpose) -> (String, String) {
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
                .expect("params");
        params.extended_key_usages = vec![usage];
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.0).expect("signed");
        (cert.pem(), key.serialize_pem())
    }

    /// A client certificate and key (PEM).
    pub fn client(&self, name: &str) -> (String, String) {
        self.issue(&[name], ExtendedKeyUsagePurpose::ClientAuth)
    }

    /// A server configuration for 127.0.0.1 and localhost, requiring a client certificate of
    /// this CA when `client_auth`.
    pub fn server_config(&self, client_auth: bool) -> Arc<rustls::ServerConfig> {
        let (cert, key) = self.issue(
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .expect("versions");
        let builder = if client_auth {
            let mut roots = rustls::RootCertStore::empty();
            roots
                .add(CertificateDer::from_pem_slice(self.pem().as_bytes()).expect("CA"))
                .expect("root");
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .expect("verifier");
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let config = builder
            .with_single_cert(
                vec![CertificateDer::from_pem_slice(cert.as_bytes()).expect("cert")],
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key"),
            )
            .expect("server config");
        Arc::new(config)
    }
}

/// The tests' own client for driving servers (rustls on ring, like the scalers').
pub fn client() -> reqwest::Client {
    keda_scalers::http_client::reqwest_client(
        &keda_scalers::tls::TlsSettings::default(),
        std::time::Duration::from_secs(10),
    )
    .expect("client")
}
