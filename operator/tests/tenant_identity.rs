//! Issue 30, findings 1 and 7: a namespaced TriggerAuthentication must never make the operator
//! send its own service-account token or a file of its own anywhere, nor mint a token for a
//! ServiceAccount the administrator did not opt in. The real resolver against the in-memory API
//! server; the "Vault" is a loopback listener that records what reaches it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use keda_api::identity::{IdentityPolicy, ServiceAccountAllowList};
use keda_api::{ScaleTrigger, ScaledObject};
use keda_operator::resolve::{
    ResolveError, ResolvedTrigger, Resolver, ResolverConfig, ScaleTargetPodSource,
};
use memkube::MemKube;
use serde::de::DeserializeOwned;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const NS: &str = "team";
const WAIT: Duration = Duration::from_secs(10);

fn yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A listener standing in for the address a tenant chose: it records every byte it receives
/// and answers each request `answer`.
struct Listener {
    address: String,
    received: Arc<Mutex<Vec<u8>>>,
    /// Bytes of the answers written (before the peer went away).
    written: Arc<Mutex<usize>>,
}

impl Listener {
    async fn start(answer: Vec<u8>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = format!("http://{}", listener.local_addr().expect("addr"));
        let received = Arc::new(Mutex::new(Vec::new()));
        let written = Arc::new(Mutex::new(0));
        let (r, w) = (Arc::clone(&received), Arc::clone(&written));
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let (r, w, answer) = (Arc::clone(&r), Arc::clone(&w), Arc::clone(&answer));
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    // One read of the request is enough to see what was sent.
                    if let Ok(Ok(n)) =
                        tokio::time::timeout(Duration::from_secs(2), socket.read(&mut buf)).await
                    {
                        r.lock().expect("lock").extend_from_slice(&buf[..n]);
                    }
                    for chunk in answer.chunks(64 * 1024) {
                        if socket.write_all(chunk).await.is_err() {
                            return;
                        }
                        *w.lock().expect("lock") += chunk.len();
                    }
                });
            }
        });
        Self {
            address,
            received,
            written,
        }
    }

    fn received(&self) -> String {
        String::from_utf8_lossy(&self.received.lock().expect("lock")).into_owned()
    }
}

fn forbidden() -> Vec<u8> {
    let body = r#"{"errors":["permission denied"]}"#;
    format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

struct Cluster {
    server: MemKube,
    resolver: Resolver,
}

fn cluster(identity: IdentityPolicy) -> Cluster {
    let server = MemKube::new();
    let crds = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../config/crd");
    server.load_crds_from_dir(crds).expect("CRDs load");
    server.create_namespace(NS).expect("namespace");
    server.create_namespace("keda").expect("namespace");
    let mut config = ResolverConfig::new("keda");
    config.cache_sync_timeout = WAIT;
    config.identity = identity;
    let resolver = Resolver::new(server.client(), config);
    Cluster { server, resolver }
}

fn source() -> ScaleTargetPodSource {
    let so: ScaledObject = yaml(&format!(
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {{name: so, namespace: {NS}}}\nspec:\n  scaleTargetRef: {{name: worker}}\n  triggers: []\n"
    ));
    ScaleTargetPodSource::for_scaled_object(&so)
}

/// Resolves a trigger naming `kind` `auth`, once the resolver's watch has seen it.
async fn resolve(c: &Cluster, kind: &str, auth: &str) -> Result<ResolvedTrigger, ResolveError> {
    let t: ScaleTrigger = yaml(&format!(
        "{{type: prometheus, metadata: {{}}, authenticationRef: {{name: {auth}, kind: {kind}}}}}"
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

fn seed_auth(c: &Cluster, kind: &str, name: &str, spec: &str) {
    let namespace = if kind == "TriggerAuthentication" {
        format!(", namespace: {NS}")
    } else {
        String::new()
    };
    let object = format!(
        "apiVersion: keda.sh/v1alpha1\nkind: {kind}\nmetadata: {{name: {name}{namespace}}}\nspec:\n{spec}"
    );
    if kind == "TriggerAuthentication" {
        c.server
            .seed(&yaml::<keda_api::TriggerAuthentication>(&object))
            .expect("seed");
    } else {
        c.server
            .seed(&yaml::<keda_api::ClusterTriggerAuthentication>(&object))
            .expect("seed");
    }
}

/// A file of the operator's with a recognisable content.
fn operator_file(test: &str) -> (PathBuf, String) {
    let content = format!("operator-secret-{test}-{}", std::process::id());
    let path = std::env::temp_dir().join(format!("keda-rs-{test}-{}", std::process::id()));
    std::fs::write(&path, &content).expect("write");
    (path, content)
}

fn vault_kubernetes(address: &str, credential: &str) -> String {
    format!(
        "  hashiCorpVault:\n    address: {address}\n    authentication: kubernetes\n    mount: k8s\n    role: r\n{credential}    secrets: [{{parameter: password, path: secret/data/x, key: password}}]\n"
    )
}

#[tokio::test]
async fn a_namespaced_trigger_authentication_cannot_send_the_operators_token_or_files_to_vault() {
    let (file, content) = operator_file("vault-file");
    let listener = Listener::start(forbidden()).await;
    let c = cluster(IdentityPolicy::default());
    // A file of the operator's, and the default (the operator's own token).
    seed_auth(
        &c,
        "TriggerAuthentication",
        "file",
        &vault_kubernetes(
            &listener.address,
            &format!("    credential: {{serviceAccount: {}}}\n", file.display()),
        ),
    );
    seed_auth(
        &c,
        "TriggerAuthentication",
        "default",
        &vault_kubernetes(&listener.address, ""),
    );
    for auth in ["file", "default"] {
        let error = match resolve(&c, "TriggerAuthentication", auth).await {
            Ok(r) => panic!("{auth}: the operator's identity must not be lent: {r:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            error.contains("spec.hashiCorpVault.credential.serviceAccount")
                && error.contains("--allow-namespace-vault-operator-identity"),
            "{auth}: {error}"
        );
    }
    assert_eq!(
        listener.received(),
        "",
        "nothing reaches the tenant's address"
    );

    // The administrator's ClusterTriggerAuthentication may use the operator's files.
    seed_auth(
        &c,
        "ClusterTriggerAuthentication",
        "admin",
        &vault_kubernetes(
            &listener.address,
            &format!("    credential: {{serviceAccount: {}}}\n", file.display()),
        ),
    );
    let error = resolve(&c, "ClusterTriggerAuthentication", "admin")
        .await
        .expect_err("the listener refuses the login")
        .to_string();
    assert!(error.contains("HTTP 403"), "{error}");
    assert!(listener.received().contains(&content));
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn with_the_administrators_opt_in_a_namespaced_vault_login_may_use_the_operators_file() {
    let (file, content) = operator_file("vault-opt-in");
    let listener = Listener::start(forbidden()).await;
    let c = cluster(IdentityPolicy {
        allow_namespace_vault_operator_identity: true,
        ..IdentityPolicy::default()
    });
    seed_auth(
        &c,
        "TriggerAuthentication",
        "file",
        &vault_kubernetes(
            &listener.address,
            &format!("    credential: {{serviceAccount: {}}}\n", file.display()),
        ),
    );
    let error = resolve(&c, "TriggerAuthentication", "file")
        .await
        .expect_err("the listener refuses the login")
        .to_string();
    assert!(error.contains("HTTP 403"), "{error}");
    assert!(listener.received().contains(&content));
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn a_vault_answer_is_read_only_up_to_its_bound() {
    // 64 MiB of answer, announced as such.
    let size = 64 * 1024 * 1024;
    let mut answer = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n"
    )
    .into_bytes();
    answer.resize(answer.len() + size, b' ');
    let listener = Listener::start(answer).await;
    let c = cluster(IdentityPolicy::default());
    seed_auth(
        &c,
        "TriggerAuthentication",
        "big",
        &format!(
            "  hashiCorpVault:\n    address: {}\n    authentication: token\n    credential: {{token: t}}\n    secrets: [{{parameter: password, path: secret/data/x, key: password}}]\n",
            listener.address
        ),
    );
    let started = std::time::Instant::now();
    let error = resolve(&c, "TriggerAuthentication", "big")
        .await
        .expect_err("too large")
        .to_string();
    assert!(error.contains("larger than 1048576 bytes"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let written = *listener.written.lock().expect("lock");
    assert!(
        written < 16 * 1024 * 1024,
        "the client stopped reading near the bound, not after {written} bytes"
    );
}

#[tokio::test]
async fn bound_tokens_are_minted_only_for_service_accounts_the_administrator_opted_in() {
    let c = cluster(IdentityPolicy {
        bound_token_service_accounts: ServiceAccountAllowList::parse(&format!("{NS}/reader"))
            .expect("list"),
        ..IdentityPolicy::default()
    });
    for account in ["reader", "admin"] {
        c.server
            .seed(&yaml::<k8s_openapi::api::core::v1::ServiceAccount>(&format!(
                "apiVersion: v1\nkind: ServiceAccount\nmetadata: {{name: {account}, namespace: {NS}}}"
            )))
            .expect("seed");
    }
    let _api = c.server.serve_loopback().await.expect("loopback");
    seed_auth(
        &c,
        "TriggerAuthentication",
        "admin",
        "  boundServiceAccountToken: [{parameter: token, serviceAccountName: admin}]\n",
    );
    seed_auth(
        &c,
        "TriggerAuthentication",
        "reader",
        "  boundServiceAccountToken: [{parameter: token, serviceAccountName: reader}]\n",
    );
    let error = resolve(&c, "TriggerAuthentication", "admin")
        .await
        .expect_err("not opted in")
        .to_string();
    assert!(
        error.contains("spec.boundServiceAccountToken[0].serviceAccountName")
            && error.contains("--bound-token-service-accounts"),
        "{error}"
    );
    assert!(c.server.issued_tokens().is_empty(), "no token was minted");
    let resolved = resolve(&c, "TriggerAuthentication", "reader")
        .await
        .expect("opted in");
    assert!(resolved.auth_params.contains_key("token"));
    let issued = c.server.issued_tokens();
    assert_eq!(issued.len(), 1);
    assert_eq!(issued[0].service_account, "reader");
}

/// Resolves `trigger` (YAML) once the resolver's watch has seen its authentication, and builds
/// its scaler with the operator's own AWS credentials in its environment; `Err` is the build's
/// error, `Ok` the first read's.
async fn build_aws(c: &Cluster, trigger: &str, sts: &str) -> Result<String, String> {
    let t: ScaleTrigger = yaml(trigger);
    let deadline = tokio::time::Instant::now() + WAIT;
    let resolved = loop {
        let mut session = c.resolver.session(source());
        let resolved = session.resolve(&t, 0).await.expect("resolves");
        if t.authentication_ref.is_none()
            || !resolved.auth_params.is_empty()
            || tokio::time::Instant::now() >= deadline
        {
            break resolved;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let mut ctx = keda_scalers::ScalerContext::from_trigger(&t, 0);
    ctx.scalable_name = "so".into();
    ctx.scalable_namespace = NS.into();
    resolved.apply(&mut ctx);
    ctx.process_env = keda_scalers::ProcessEnv::from_pairs(&[
        ("AWS_ACCESS_KEY_ID", "AKIAOPERATOROWN"),
        ("AWS_SECRET_ACCESS_KEY", "operator-own-secret"),
        ("AWS_ENDPOINT_URL_STS", sts),
    ]);
    let built = keda_scalers::Registry::builtin()
        .build(ctx)
        .await
        .map_err(|e| e.to_string())?;
    let read = built
        .scaler()
        .metrics_and_activity("s0-aws-sqs-q")
        .await
        .map(|r| format!("{r:?}"))
        .unwrap_or_else(|e| keda_scalers::error::error_chain(&e));
    built.scaler().close().await;
    Ok(read)
}

/// Issue 33's gap: `identityOwner: operator` (written in the tenant's ScaledObject) and an
/// `awsRoleArn` of a namespaced TriggerAuthentication would make the operator sign with its own
/// AWS credentials on the namespace's behalf, and `awsEndpoint` would send those requests to a
/// server the tenant names. Refused unless the administrator opts in; a role of a
/// ClusterTriggerAuthentication is the administrator's and is assumed.
#[tokio::test]
async fn a_namespaced_trigger_signs_with_the_operators_aws_credentials_only_with_the_opt_in() {
    let listener = Listener::start(forbidden()).await;
    // The operator's own STS endpoint (its environment's AWS_ENDPOINT_URL_STS).
    let sts = Listener::start(forbidden()).await;
    let operator_trigger = format!(
        "{{type: aws-sqs-queue, metadata: {{queueURL: '{0}/000000000000/q', awsRegion: eu-west-1, awsEndpoint: '{0}', identityOwner: operator}}}}",
        listener.address
    );
    let role_trigger = |kind: &str| {
        format!(
            "{{type: aws-sqs-queue, metadata: {{queueURL: 'https://sqs.eu-west-1.amazonaws.com/000000000000/q', awsRegion: eu-west-1}}, authenticationRef: {{name: role, kind: {kind}}}}}"
        )
    };
    let role_auth = "  secretTargetRef: [{parameter: awsRoleArn, name: role, key: arn}]\n";
    let seed_role_secret = |c: &Cluster, namespace: &str| {
        c.server
            .seed(&yaml::<k8s_openapi::api::core::v1::Secret>(&format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: role, namespace: {namespace}}}\nstringData: {{arn: 'arn:aws:iam::000000000000:role/team'}}"
            )))
            .expect("seed");
    };

    // The safe default.
    let c = cluster(IdentityPolicy::default());
    seed_role_secret(&c, NS);
    seed_auth(&c, "TriggerAuthentication", "role", role_auth);
    for (trigger, param) in [
        (operator_trigger.as_str(), "\"identityOwner\""),
        (&role_trigger("TriggerAuthentication"), "\"awsRoleArn\""),
    ] {
        let error = build_aws(&c, trigger, &sts.address)
            .await
            .expect_err("the operator's identity must not be lent");
        assert!(
            error.contains(param) && error.contains("--allow-namespace-aws-operator-identity"),
            "{error}"
        );
        assert!(!error.contains("operator-own-secret"), "{error}");
    }
    assert_eq!(
        listener.received(),
        "",
        "nothing reached the tenant's server"
    );
    assert_eq!(sts.received(), "", "no role was assumed");

    // A ClusterTriggerAuthentication's role is the administrator's: it is assumed at the
    // operator's STS (which refuses here).
    seed_role_secret(&c, "keda");
    seed_auth(&c, "ClusterTriggerAuthentication", "role", role_auth);
    let read = build_aws(
        &c,
        &role_trigger("ClusterTriggerAuthentication"),
        &sts.address,
    )
    .await
    .expect("a ClusterTriggerAuthentication's role builds");
    assert!(read.contains("assuming awsRoleArn"), "{read}");
    assert!(
        sts.received().contains("Action=AssumeRole"),
        "{}",
        sts.received()
    );

    // With the opt-in, KEDA's behaviour: the operator signs, and the request reaches the
    // endpoint the trigger names.
    let c = cluster(IdentityPolicy {
        allow_namespace_aws_operator_identity: true,
        ..IdentityPolicy::default()
    });
    let read = build_aws(&c, &operator_trigger, &sts.address)
        .await
        .expect("builds with the opt-in");
    assert!(read.contains("403"), "{read}");
    let received = listener.received();
    assert!(
        received.contains("Credential=AKIAOPERATOROWN/"),
        "{received}"
    );
    assert!(!received.contains("operator-own-secret"), "{received}");
}
