//! `hashiCorpVault`: parameters read from HashiCorp Vault (or OpenBao, which serves the same
//! API), as KEDA's `pkg/scaling/resolver/hashicorpvault_handler.go` reads them.
//!
//! The Vault HTTP API endpoints used:
//! - `POST /v1/auth/<mount>/login` with `{"jwt", "role"}` (`authentication: kubernetes`), whose
//!   `auth.client_token` is the token of the reads;
//! - `GET /v1/<path>` for KV secrets: version 1 answers the pairs in `data`, version 2 (path
//!   `<mount>/data/<name>`) in `data.data`; with `type` unset the answer decides, as in KEDA;
//! - `POST /v1/<path>` with the `pkiData` fields for `type: pki` (e.g. `pki/issue/<role>`),
//!   whose `data` holds `certificate`, `private_key`, `issuing_ca` and `ca_chain` (joined with
//!   newlines).
//!
//! Every request carries `X-Vault-Token` and, with `namespace` set, `X-Vault-Namespace`.
//! Secrets with the same path, type and `pkiData` are fetched once (one certificate for all the
//! parameters that name it).

use std::collections::BTreeMap;
use std::time::Duration;

use keda_api::trigger_authentication::{HashiCorpVault, VaultPkiData, VaultSecret};
use keda_scalers::Secret;
use serde_json::{Map, Value, json};

use super::error::VaultProblem;

/// `authentication: token`.
pub const AUTH_TOKEN: &str = "token";
/// `authentication: kubernetes`.
pub const AUTH_KUBERNETES: &str = "kubernetes";
/// KEDA's default `credential.serviceAccount`: the operator's own projected token.
pub const DEFAULT_SERVICE_ACCOUNT_TOKEN_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/token";
/// The audience of the token KEDA requests for `credential.serviceAccountName`.
const KUBERNETES_AUDIENCE: &str = "https://kubernetes.default.svc";
/// The lifetime of that token (the API server's minimum): it is used once, for the login.
const LOGIN_TOKEN_EXPIRY: Duration = Duration::from_secs(600);
/// How long one request to Vault may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of a Vault answer that is read.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// Secret engine of one `secrets` entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Engine {
    /// `type` unset: KV, version told by the answer.
    Generic,
    /// `type: secret`: KV version 1.
    KvV1,
    /// `type: secretV2`: KV version 2.
    KvV2,
    /// `type: pki`: a certificate issued by a PKI engine.
    Pki,
}

fn engine(entry: &VaultSecret) -> Result<Engine, VaultProblem> {
    match entry.type_.as_deref().map(str::trim) {
        None | Some("") => Ok(Engine::Generic),
        Some("secret") => Ok(Engine::KvV1),
        Some("secretV2") => Ok(Engine::KvV2),
        Some("pki") => Ok(Engine::Pki),
        Some(other) => Err(VaultProblem::UnknownType {
            parameter: entry.parameter.clone(),
            type_: other.to_string(),
        }),
    }
}

/// Where a `kubernetes` login gets its service account token.
pub(super) enum Jwt {
    /// `credential.serviceAccountName`: a token requested from the API server.
    Requested(String),
    /// `credential.serviceAccount`: a file of the operator's.
    File(String),
}

/// How to log in, checked before any request.
pub(super) enum Login {
    /// `authentication: token`.
    Token(Secret),
    /// `authentication: kubernetes`.
    Kubernetes {
        mount: String,
        role: String,
        jwt: Jwt,
    },
}

/// The checked `hashiCorpVault` block: where Vault is and how to log in.
pub(super) struct Plan {
    address: url::Url,
    namespace: Option<String>,
    pub(super) login: Login,
}

/// Checks `spec` as KEDA does before it talks to Vault.
pub(super) fn plan(spec: &HashiCorpVault) -> Result<Plan, VaultProblem> {
    let address = url::Url::parse(spec.address.trim())
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .ok_or_else(|| VaultProblem::Address {
            address: spec.address.clone(),
        })?;
    let credential = spec.credential.clone().unwrap_or_default();
    let non_empty = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
    };
    let login = match spec.authentication.trim() {
        AUTH_TOKEN => Login::Token(Secret::new(
            non_empty(&credential.token).ok_or(VaultProblem::Missing("credential.token"))?,
        )),
        AUTH_KUBERNETES => {
            let mount = non_empty(&spec.mount).ok_or(VaultProblem::Missing("mount"))?;
            let role = non_empty(&spec.role).ok_or(VaultProblem::Missing("role"))?;
            let jwt = match (
                non_empty(&credential.service_account_name),
                non_empty(&credential.service_account),
            ) {
                (Some(name), _) => Jwt::Requested(name),
                (None, Some(file)) => Jwt::File(file),
                (None, None) => Jwt::File(DEFAULT_SERVICE_ACCOUNT_TOKEN_FILE.to_string()),
            };
            Login::Kubernetes { mount, role, jwt }
        }
        other => {
            return Err(VaultProblem::Authentication {
                authentication: other.to_string(),
            });
        }
    };
    for entry in &spec.secrets {
        engine(entry)?;
        if entry.path.trim().is_empty() || entry.key.trim().is_empty() {
            return Err(VaultProblem::Incomplete {
                parameter: entry.parameter.clone(),
            });
        }
    }
    Ok(Plan {
        address,
        namespace: non_empty(&spec.namespace),
        login,
    })
}

/// The lifetime and audience of the token of `credential.serviceAccountName`.
pub(super) fn login_token_request() -> (Duration, &'static str) {
    (LOGIN_TOKEN_EXPIRY, KUBERNETES_AUDIENCE)
}

/// A client for one resolution.
pub(super) struct Vault {
    http: reqwest::Client,
    address: url::Url,
    namespace: Option<String>,
    token: Option<Secret>,
}

impl Vault {
    pub(super) fn new(plan: &Plan) -> Result<Self, VaultProblem> {
        let http = keda_scalers::http_client::reqwest_client(
            &keda_scalers::tls::TlsSettings::default(),
            REQUEST_TIMEOUT,
        )
        .map_err(|e| VaultProblem::Client(e.to_string()))?;
        Ok(Self {
            http,
            address: plan.address.clone(),
            namespace: plan.namespace.clone(),
            token: match &plan.login {
                Login::Token(token) => Some(token.clone()),
                Login::Kubernetes { .. } => None,
            },
        })
    }

    /// `authentication: kubernetes`: logs in at `auth/<mount>/login` with `jwt`.
    pub(super) async fn login(
        &mut self,
        mount: &str,
        role: &str,
        jwt: &Secret,
    ) -> Result<(), VaultProblem> {
        let path = format!("auth/{}/login", mount.trim_matches('/'));
        let answer = self
            .call(
                reqwest::Method::POST,
                &path,
                Some(json!({"jwt": jwt.expose(), "role": role})),
            )
            .await?;
        let token = answer
            .pointer("/auth/client_token")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| VaultProblem::Answer {
                path: path.clone(),
                reason: "no auth.client_token in the login answer".to_string(),
            })?;
        self.token = Some(Secret::new(token));
        Ok(())
    }

    /// The value of every entry of `secrets`, by parameter, fetching each path once.
    pub(super) async fn read(
        &self,
        secrets: &[VaultSecret],
    ) -> Result<BTreeMap<String, Secret>, VaultProblem> {
        // (engine, path, pkiData as JSON) -> answer
        let mut answers: BTreeMap<(Engine, String, String), Value> = BTreeMap::new();
        let mut values = BTreeMap::new();
        for entry in secrets {
            let engine = engine(entry)?;
            let path = entry.path.trim().trim_start_matches('/').to_string();
            let pki = match engine {
                Engine::Pki => pki_request(entry.pki_data.as_ref()),
                _ => Value::Null,
            };
            let group = (engine, path.clone(), pki.to_string());
            if !answers.contains_key(&group) {
                let answer = match engine {
                    Engine::Pki => self.call(reqwest::Method::POST, &path, Some(pki)).await?,
                    _ => self.call(reqwest::Method::GET, &path, None).await?,
                };
                answers.insert(group.clone(), answer);
            }
            let answer = &answers[&group];
            let value = value_of(engine, entry, answer)?;
            values.insert(entry.parameter.clone(), Secret::new(value));
        }
        Ok(values)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, VaultProblem> {
        let mut url = self.address.clone();
        let base = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{base}/v1/{path}"));
        let mut request = self.http.request(method, url);
        if let Some(token) = &self.token {
            request = request.header("X-Vault-Token", token.expose());
        }
        if let Some(namespace) = &self.namespace {
            request = request.header("X-Vault-Namespace", namespace);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let failed = |reason: String| VaultProblem::Request {
            path: path.to_string(),
            reason,
        };
        let response = request
            .send()
            .await
            .map_err(|e| failed(error_chain(&e.without_url())))?;
        let status = response.status();
        let too_large = || {
            failed(format!(
                "the answer is larger than {MAX_ANSWER_BYTES} bytes"
            ))
        };
        if response
            .content_length()
            .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
        {
            return Err(too_large());
        }
        // Read chunk by chunk and stop past the bound: a server that never ends its answer
        // costs at most MAX_ANSWER_BYTES (plus one chunk) and the request timeout.
        let mut response = response;
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| failed(error_chain(&e.without_url())))?
        {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            return Err(VaultProblem::Status {
                path: path.to_string(),
                status: status.as_u16(),
                errors: vault_errors(&bytes),
            });
        }
        serde_json::from_slice(&bytes).map_err(|_| VaultProblem::Answer {
            path: path.to_string(),
            reason: "the answer is not JSON".to_string(),
        })
    }
}

/// The `pkiData` fields under the names of Vault's PKI API (`common_name`, `alt_names`,
/// `ip_sans`, `uri_sans`, `other_sans`, `ttl`, `format`), the unset ones left out.
fn pki_request(pki: Option<&VaultPkiData>) -> Value {
    let mut body = Map::new();
    if let Some(pki) = pki {
        for (name, value) in [
            ("common_name", &pki.common_name),
            ("alt_names", &pki.alt_names),
            ("ip_sans", &pki.ip_sans),
            ("uri_sans", &pki.uri_sans),
            ("other_sans", &pki.other_sans),
            ("ttl", &pki.ttl),
            ("format", &pki.format),
        ] {
            if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
                body.insert(name.to_string(), Value::String(value.to_string()));
            }
        }
    }
    Value::Object(body)
}

/// The value of `entry.key` in `answer`, read as KEDA's `getSecretValue` reads it.
fn value_of(engine: Engine, entry: &VaultSecret, answer: &Value) -> Result<String, VaultProblem> {
    let data = answer.get("data").unwrap_or(&Value::Null);
    let engine = match engine {
        // KEDA: a `data` object inside `data` means KV version 2.
        Engine::Generic if data.get("data").is_some_and(Value::is_object) => Engine::KvV2,
        Engine::Generic => Engine::KvV1,
        other => other,
    };
    let pairs = match engine {
        Engine::KvV2 => data.get("data").unwrap_or(&Value::Null),
        _ => data,
    };
    let key = entry.key.trim();
    let not_found = || VaultProblem::KeyNotFound {
        parameter: entry.parameter.clone(),
        path: entry.path.trim().to_string(),
        key: key.to_string(),
    };
    match pairs.get(key) {
        None | Some(Value::Null) => Err(not_found()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(items)) if engine == Engine::Pki && key == "ca_chain" => items
            .iter()
            .map(|i| i.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(|chain| chain.join("\n"))
            .ok_or_else(|| VaultProblem::NotText {
                parameter: entry.parameter.clone(),
                key: key.to_string(),
            }),
        Some(_) => Err(VaultProblem::NotText {
            parameter: entry.parameter.clone(),
            key: key.to_string(),
        }),
    }
}

/// Vault's `{"errors": [...]}`, joined; empty when the body has none.
fn vault_errors(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            v.get("errors").and_then(Value::as_array).map(|errors| {
                errors
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|e| e.chars().take(200).collect::<String>())
                    .collect::<Vec<_>>()
                    .join("; ")
            })
        })
        .unwrap_or_default()
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(key: &str, type_: Option<&str>) -> VaultSecret {
        VaultSecret {
            parameter: "p".into(),
            path: "x".into(),
            key: key.into(),
            type_: type_.map(str::to_string),
            pki_data: None,
        }
    }

    #[test]
    fn values_are_read_from_kv_v1_v2_and_pki_answers_as_keda_reads_them() {
        let v1 = json!({"data": {"password": "one"}});
        let v2 = json!({"data": {"data": {"password": "two"}, "metadata": {"version": 3}}});
        let pki = json!({"data": {"certificate": "C", "ca_chain": ["A", "B"]}});
        // (engine, key, answer, value)
        for (engine, key, answer, want) in [
            (Engine::Generic, "password", &v1, "one"),
            (Engine::Generic, "password", &v2, "two"),
            (Engine::KvV1, "password", &v1, "one"),
            (Engine::KvV2, "password", &v2, "two"),
            (Engine::Pki, "certificate", &pki, "C"),
            (Engine::Pki, "ca_chain", &pki, "A\nB"),
        ] {
            assert_eq!(
                value_of(engine, &secret(key, None), answer).as_deref(),
                Ok(want),
                "{engine:?} {key}"
            );
        }
        assert!(matches!(
            value_of(Engine::KvV1, &secret("missing", None), &v1),
            Err(VaultProblem::KeyNotFound { .. })
        ));
        assert!(matches!(
            value_of(Engine::KvV1, &secret("data", None), &v2),
            Err(VaultProblem::NotText { .. })
        ));
    }

    #[test]
    fn the_spec_is_checked_before_any_request() {
        let spec = |yaml: &str| -> HashiCorpVault { serde_yaml::from_str(yaml).expect("spec") };
        let problem = |yaml: &str| match plan(&spec(yaml)) {
            Ok(_) => String::new(),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            problem("{address: 'vault:8200', authentication: token, secrets: []}"),
            "address \"vault:8200\" is not an http:// or https:// URL"
        );
        assert_eq!(
            problem("{address: 'http://v', authentication: token, secrets: []}"),
            "credential.token is required"
        );
        assert_eq!(
            problem("{address: 'http://v', authentication: kubernetes, secrets: [], mount: k}"),
            "role is required"
        );
        assert_eq!(
            problem("{address: 'http://v', authentication: aws, secrets: []}"),
            "authentication \"aws\" is not supported: use token or kubernetes"
        );
        assert_eq!(
            problem(
                "{address: 'http://v', authentication: token, credential: {token: t}, secrets: [{parameter: p, path: x, key: k, type: kv}]}"
            ),
            "secret for parameter \"p\": type \"kv\" is not supported: use secret, secretV2 or pki (or leave it unset)"
        );
        assert!(matches!(
            plan(&spec("{address: 'http://v', authentication: kubernetes, secrets: [], mount: k, role: r}"))
                .map(|p| p.login),
            Ok(Login::Kubernetes { jwt: Jwt::File(f), .. }) if f == DEFAULT_SERVICE_ACCOUNT_TOKEN_FILE
        ));
    }
}
