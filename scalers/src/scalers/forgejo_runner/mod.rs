//! `forgejo-runner`: scales on the number of Forgejo Actions jobs waiting for a runner with the
//! given labels (`GET /api/v1/.../actions/runners/jobs?labels=...`). Compatible with KEDA's
//! `forgejo-runner` trigger (`pkg/scalers/forgejo_runner_scaler.go`).
//!
//! The scope is KEDA's: `owner` and `repo` together name a repository, else `org` an
//! organization, else `global: true` the whole instance (an admin token), else the token's
//! user. The target is one job per replica, as in KEDA; active iff a job waits.

use http::HeaderValue;
use http::header::{AUTHORIZATION, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH_ENV, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const TOKEN: Param = Param::required("token").order(AUTH_ENV).secret();
const ADDRESS: Param = Param::required("address");
const LABELS: Param = Param::required("labels");
const GLOBAL: Param = Param::optional("global").default("false");
const OWNER: Param = Param::optional("owner");
const ORG: Param = Param::optional("org");
const REPO: Param = Param::optional("repo");

/// The parameters of `forgejo-runner`.
pub const PARAMS: &[Param] = &[TOKEN, ADDRESS, LABELS, GLOBAL, OWNER, ORG, REPO];

/// KEDA's fixed target: one waiting job per replica.
pub const JOBS_PER_REPLICA: f64 = 1.0;

/// Whose jobs are counted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// `owner` and `repo`: `/api/v1/repos/{owner}/{repo}/actions/runners/jobs`.
    Repo {
        /// The repository's owner.
        owner: String,
        /// The repository.
        repo: String,
    },
    /// `org`: `/api/v1/orgs/{org}/actions/runners/jobs`.
    Org(String),
    /// `global: true`: `/api/v1/admin/runners/jobs`.
    Global,
    /// None of the above: `/api/v1/user/actions/runners/jobs`.
    User,
}

impl Scope {
    /// The path segments after the address's own path.
    pub fn segments(&self) -> Vec<&str> {
        match self {
            Self::Repo { owner, repo } => vec![
                "api", "v1", "repos", owner, repo, "actions", "runners", "jobs",
            ],
            Self::Org(org) => vec!["api", "v1", "orgs", org, "actions", "runners", "jobs"],
            Self::Global => vec!["api", "v1", "admin", "runners", "jobs"],
            Self::User => vec!["api", "v1", "user", "actions", "runners", "jobs"],
        }
    }
}

/// The parsed trigger.
///
/// KEDA takes `address` as written and fails at every fetch when it is no URL: so here the
/// trigger builds and every read fails naming the parameter (as `prometheus` does).
#[derive(Clone, Debug)]
pub struct ForgejoRunnerConfig {
    /// The jobs URL and the client key, or why `address` cannot be used.
    pub request: Result<ForgejoRequest, MetadataError>,
    /// `labels` as written (comma-separated runner labels).
    pub labels: String,
    /// Whose jobs are counted.
    pub scope: Scope,
    /// `s<index>-forgejo`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

/// A usable `address`.
#[derive(Clone, Debug)]
pub struct ForgejoRequest {
    /// The jobs URL with its `labels` query.
    pub url: url::Url,
    /// The pooled client's key: the server, `Authorization: token <token>`, the timeout.
    pub client: HttpClientKey,
}

impl ForgejoRunnerConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `token` (TriggerAuthentication or `tokenFromEnv`), `address` or `labels` missing, or
    /// `global` not a boolean.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let token: Secret = p.get(&TOKEN)?;
            let address: String = p.get(&ADDRESS)?;
            let labels: String = p.get(&LABELS)?;
            let global: bool = p.get(&GLOBAL)?;
            let owner: Option<String> = p.get_opt(&OWNER)?;
            let org: Option<String> = p.get_opt(&ORG)?;
            let repo: Option<String> = p.get_opt(&REPO)?;
            // KEDA's order: owner and repo, then org, then global, then the token's user.
            let scope = match (owner, repo, org) {
                (Some(owner), Some(repo), _) => Scope::Repo { owner, repo },
                (_, _, Some(org)) => Scope::Org(org),
                _ if global => Scope::Global,
                _ => Scope::User,
            };
            let value = format!("token {}", token.expose());
            if HeaderValue::from_str(&value).is_err() {
                return Err(p.rule(format!(
                    "parameter \"{}\" holds characters an HTTP header cannot carry",
                    TOKEN.name
                )));
            }
            let auth = HttpAuth {
                modes: vec![AuthMode::Custom],
                custom: Some((AUTHORIZATION, Secret::new(value))),
                ..HttpAuth::default()
            };
            let request =
                parse_http_url(p, &ADDRESS, address.trim_end_matches('/')).map(|server| {
                    ForgejoRequest {
                        url: jobs_url(&server, &scope, &labels),
                        client: HttpClientKey {
                            origin: http_client::origin(&server),
                            auth,
                            timeout: ctx.global_http_timeout,
                        },
                    }
                });
            Ok(Self {
                request,
                labels,
                scope,
                metric_name: ctx.metric_name("forgejo"),
                metric_type,
            })
        })?)
    }
}

/// `server`'s path, then `scope`'s segments (each percent-encoded, so a name cannot leave its
/// segment), then `?labels=`.
pub fn jobs_url(server: &url::Url, scope: &Scope, labels: &str) -> url::Url {
    let mut url = server.clone();
    url.set_query(None);
    url.set_fragment(None);
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.pop_if_empty().extend(scope.segments());
    }
    url.query_pairs_mut().append_pair("labels", labels);
    url
}

/// The number of jobs in a jobs answer: a JSON array of `ActionRunJob` objects (`null` is
/// none, as Go reads it).
///
/// # Errors
/// The body is not a JSON array of objects.
pub fn job_count(body: &[u8]) -> Result<usize, String> {
    let jobs: Option<Vec<serde_json::Map<String, serde_json::Value>>> =
        crate::remote::from_json(body)
            .map_err(|e| format!("the Forgejo answer is not a JSON list of jobs: {e}"))?;
    Ok(jobs.map_or(0, |jobs| jobs.len()))
}

/// A `forgejo-runner` scaler.
pub type ForgejoRunnerScaler = Pooled<ForgejoRunnerConfig>;

impl HttpApi for ForgejoRunnerConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        ForgejoRunnerConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.request
            .as_ref()
            .map(|r| r.client.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, JOBS_PER_REPLICA),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        static NO_HEADERS: std::sync::LazyLock<HeaderMap> =
            std::sync::LazyLock::new(HeaderMap::new);
        let request = self.request.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::get(request.url.clone(), &NO_HEADERS))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "Forgejo runner jobs for labels `{}` on address {}",
            self.labels,
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let jobs = job_count(body)?;
        #[allow(clippy::cast_precision_loss)]
        let value = jobs as f64;
        Ok(MetricsAndActivity::single(metric_name, value, 0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> ScalerContext {
        ScalerContext {
            metadata: metadata
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            auth_params: auth
                .iter()
                .map(|(k, v)| (k.to_string(), Secret::new(*v)))
                .collect(),
            ..ScalerContext::new("forgejo-runner", 1)
        }
    }

    const BASE: &[(&str, &str)] = &[
        ("address", "https://code.example.org/forgejo/"),
        ("labels", "docker,ubuntu-22.04"),
    ];

    #[test]
    fn the_scope_follows_keda_order() {
        let rows: &[(&[(&str, &str)], &str)] = &[
            (
                &[
                    ("owner", "a"),
                    ("repo", "r b"),
                    ("org", "o"),
                    ("global", "true"),
                ],
                "https://code.example.org/forgejo/api/v1/repos/a/r%20b/actions/runners/jobs?labels=docker%2Cubuntu-22.04",
            ),
            (
                &[("owner", "a"), ("org", "o"), ("global", "true")],
                "https://code.example.org/forgejo/api/v1/orgs/o/actions/runners/jobs?labels=docker%2Cubuntu-22.04",
            ),
            (
                &[("repo", "r"), ("global", "true")],
                "https://code.example.org/forgejo/api/v1/admin/runners/jobs?labels=docker%2Cubuntu-22.04",
            ),
            (
                &[],
                "https://code.example.org/forgejo/api/v1/user/actions/runners/jobs?labels=docker%2Cubuntu-22.04",
            ),
            (
                &[("org", "../admin")],
                "https://code.example.org/forgejo/api/v1/orgs/..%2Fadmin/actions/runners/jobs?labels=docker%2Cubuntu-22.04",
            ),
        ];
        for (i, (extra, url)) in rows.iter().enumerate() {
            let mut metadata = BASE.to_vec();
            metadata.extend_from_slice(extra);
            let config =
                ForgejoRunnerConfig::parse(&ctx(&metadata, &[("token", "t0k")])).expect("valid");
            let request = config.request.expect("usable address");
            assert_eq!(request.url.as_str(), *url, "row {i}");
            assert_eq!(request.client.origin, "https://code.example.org:443");
            assert_eq!(config.metric_name, "s1-forgejo");
        }
    }

    #[test]
    fn errors_name_the_parameter_and_never_the_token() {
        let err = ForgejoRunnerConfig::parse(&ctx(BASE, &[])).expect_err("no token");
        assert!(err.to_string().contains("\"token\""), "{err}");
        let err = ForgejoRunnerConfig::parse(&ctx(&BASE[..1], &[("token", "t")])).expect_err("x");
        assert!(err.to_string().contains("\"labels\""), "{err}");
        let mut metadata = BASE.to_vec();
        metadata.push(("global", "yes"));
        let err = ForgejoRunnerConfig::parse(&ctx(&metadata, &[("token", "t")])).expect_err("x");
        assert!(err.to_string().contains("\"global\""), "{err}");
        let err =
            ForgejoRunnerConfig::parse(&ctx(BASE, &[("token", "se\ncret")])).expect_err("newline");
        assert!(err.to_string().contains("\"token\""), "{err}");
        assert!(!err.to_string().contains("se\ncret"), "{err}");
        // An address that is not a URL builds and fails at reads, naming it.
        let config = ForgejoRunnerConfig::parse(&ctx(
            &[("address", "code.example.org"), ("labels", "x")],
            &[("token", "t")],
        ))
        .expect("builds");
        let err = config.request.expect_err("unusable");
        assert!(err.to_string().contains("\"address\""), "{err}");
    }

    #[test]
    fn the_answer_is_a_list_of_jobs() {
        assert_eq!(job_count(b"[]"), Ok(0));
        assert_eq!(job_count(b"null"), Ok(0));
        assert_eq!(
            job_count(br#"[{"id":1,"runs_on":["docker"],"status":"waiting"},{"id":2}]"#),
            Ok(2)
        );
        assert!(job_count(b"{\"message\":\"x\"}").is_err());
        assert!(job_count(b"[1]").is_err());
        assert!(job_count(b"").is_err());
    }
}
