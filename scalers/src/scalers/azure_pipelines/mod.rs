//! `azure-pipelines`: the jobs of an Azure Pipelines agent pool waiting for an agent (KEDA's
//! `azure_pipelines_scaler.go`), through the Azure DevOps REST API with a personal access
//! token (HTTP basic authentication, an empty user name).
//!
//! Each poll GETs `<organizationURL>/_apis/distributedtask/pools/<poolID>/jobrequests`
//! (`?$top=<jobsToFetch>`; without `$top` when `parent` is set; `?completedRequestCount=0`
//! with `fetchUnfinishedJobsOnly`) and counts the job requests neither finished (`result`) nor
//! received by an agent (`receiveTime`) that the trigger can run: all of them; with `demands`
//! those whose demands match (KEDA's three matching modes, `Agent.Version` ignored); with
//! `parent` those whose `matchedAgents` include the parent agent template. `poolName` is
//! resolved to its ID (`/_apis/distributedtask/pools?poolName=`) on the first read and kept.
//! Active iff the count is above `activationTargetPipelinesQueueLength`.
//!
//! Azure AD (podIdentity `azure-workload`) is not supported for azure-pipelines yet.

pub mod response;

use std::sync::Mutex;

use async_trait::async_trait;
use http::StatusCode;
use http::header::HeaderMap;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::{Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const ORGANIZATION_URL: Param =
    Param::required("organizationURL").order(&[Source::Env, Source::Auth, Source::Metadata]);
const PERSONAL_ACCESS_TOKEN: Param = Param::optional("personalAccessToken")
    .order(&[Source::Auth, Source::Env])
    .secret();
const PARENT: Param = Param::optional("parent");
const DEMANDS: Param = Param::optional("demands");
const POOL_NAME: Param = Param::optional("poolName");
const POOL_ID: Param = Param::optional("poolID");
const TARGET: Param = Param::optional("targetPipelinesQueueLength").default("1");
const ACTIVATION: Param = Param::optional("activationTargetPipelinesQueueLength").default("0");
const JOBS_TO_FETCH: Param = Param::optional("jobsToFetch").default("250");
const FETCH_UNFINISHED_JOBS_ONLY: Param =
    Param::optional("fetchUnfinishedJobsOnly").default("false");
const REQUIRE_ALL_DEMANDS: Param = Param::optional("requireAllDemands").default("false");
const REQUIRE_ALL_DEMANDS_AND_IGNORE_OTHERS: Param =
    Param::optional("requireAllDemandsAndIgnoreOthers").default("false");
const CASE_INSENSITIVE_DEMANDS: Param =
    Param::optional("caseInsensitiveDemandsProcessing").default("false");

/// The parameters of `azure-pipelines`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    ORGANIZATION_URL,
    PERSONAL_ACCESS_TOKEN,
    PARENT,
    DEMANDS,
    POOL_NAME,
    POOL_ID,
    TARGET,
    ACTIVATION,
    JOBS_TO_FETCH,
    FETCH_UNFINISHED_JOBS_ONLY,
    REQUIRE_ALL_DEMANDS,
    REQUIRE_ALL_DEMANDS_AND_IGNORE_OTHERS,
    CASE_INSENSITIVE_DEMANDS,
];

/// Which jobs a trigger can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Matching {
    /// Every queued job.
    All,
    /// Jobs whose demands match `demands` (split on `,`, as written).
    Demands {
        /// The trigger's demands.
        demands: Vec<String>,
        /// `requireAllDemands`.
        require_all: bool,
        /// `requireAllDemandsAndIgnoreOthers`.
        require_all_ignore_others: bool,
        /// `caseInsensitiveDemandsProcessing`.
        case_insensitive: bool,
    },
    /// Jobs whose matched agents include this parent template.
    Parent(String),
}

/// The agent pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pool {
    /// `poolID`.
    Id(i64),
    /// `poolName`, resolved on the first read.
    Name(String),
}

/// The parsed trigger.
#[derive(Debug)]
pub struct PipelinesConfig {
    /// `organizationURL` without a trailing `/`, or why it cannot be used.
    organization: Result<url::Url, MetadataError>,
    /// The pool.
    pub pool: Pool,
    /// The pool's ID once `poolName` was resolved.
    resolved: Mutex<Option<i64>>,
    /// Which jobs count.
    pub matching: Matching,
    /// `jobsToFetch`.
    pub jobs_to_fetch: i64,
    /// `fetchUnfinishedJobsOnly`.
    pub unfinished_only: bool,
    /// `targetPipelinesQueueLength`.
    pub target: i64,
    /// `activationTargetPipelinesQueueLength`.
    pub activation: i64,
    client: Result<HttpClientKey, MetadataError>,
    headers: HeaderMap,
    /// `s<index>-azure-pipelines-<poolID or poolName>`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
}

impl PipelinesConfig {
    /// Parses the trigger as KEDA does.
    ///
    /// # Errors
    /// Both `jobsToFetch` and `fetchUnfinishedJobsOnly` (or `parent`), a malformed number or
    /// boolean, no organization name in `organizationURL`, no `personalAccessToken` (Azure AD
    /// is not supported for azure-pipelines yet), neither `poolName` nor `poolID`.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        let given = |name: &str| ctx.metadata.get(name).is_some_and(|v| !v.is_empty());
        Ok(ctx.parse(|p| {
            if given("jobsToFetch") && given("fetchUnfinishedJobsOnly") {
                return Err(p.rule(
                    "cannot specify both jobsToFetch and fetchUnfinishedJobsOnly at the same time",
                ));
            }
            if given("jobsToFetch") && given("parent") {
                return Err(p.rule("cannot specify both jobsToFetch and parent at the same time"));
            }
            let organization: String = p.get(&ORGANIZATION_URL)?;
            let token: Option<Secret> = p.get_opt(&PERSONAL_ACCESS_TOKEN)?;
            let parent: Option<String> = p.get_opt(&PARENT)?;
            let demands: Option<String> = p.get_opt(&DEMANDS)?;
            let pool_name: Option<String> = p.get_opt(&POOL_NAME)?;
            let pool_id: i64 = p.get_opt(&POOL_ID)?.unwrap_or(0);
            let target: i64 = p.get(&TARGET)?;
            let activation: i64 = p.get(&ACTIVATION)?;
            let jobs_to_fetch: i64 = p.get(&JOBS_TO_FETCH)?;
            let unfinished_only: bool = p.get(&FETCH_UNFINISHED_JOBS_ONLY)?;
            let require_all: bool = p.get(&REQUIRE_ALL_DEMANDS)?;
            let require_all_ignore_others: bool = p.get(&REQUIRE_ALL_DEMANDS_AND_IGNORE_OTHERS)?;
            let case_insensitive: bool = p.get(&CASE_INSENSITIVE_DEMANDS)?;
            let name = organization.rsplit('/').next().unwrap_or_default();
            if name.is_empty() {
                return Err(p.rule("failed to extract organization name from organizationURL"));
            }
            let Some(token) = token else {
                return Err(p.rule(
                    "no personalAccessToken given or PodIdentity provider configured (Azure AD \
                     (podIdentity azure-workload) is not supported for azure-pipelines yet; use \
                     a personal access token)",
                ));
            };
            let token = Secret::new(token.expose().trim_end_matches('\n'));
            let pool = match (pool_name, pool_id) {
                (Some(name), _) => Pool::Name(name),
                (None, id) if id != 0 => Pool::Id(id),
                _ => return Err(p.rule("no poolName or poolID given")),
            };
            let matching = match (parent, demands) {
                (Some(parent), _) => Matching::Parent(parent),
                (None, Some(demands)) => Matching::Demands {
                    demands: demands.split(',').map(str::to_string).collect(),
                    require_all,
                    require_all_ignore_others,
                    case_insensitive,
                },
                (None, None) => Matching::All,
            };
            // KEDA only trips over a URL that is not one when it fetches.
            let organization = parse_http_url(p, &ORGANIZATION_URL, &organization).map(|mut u| {
                u.set_query(None);
                u.set_fragment(None);
                if let Ok(mut segments) = u.path_segments_mut() {
                    segments.pop_if_empty();
                }
                u
            });
            let client = organization.clone().map(|url| HttpClientKey {
                origin: http_client::origin(&url),
                auth: HttpAuth {
                    modes: vec![AuthMode::Basic],
                    basic: Some((String::new(), token)),
                    ..HttpAuth::default()
                },
                timeout: ctx.global_http_timeout,
            });
            let metric = match &pool {
                Pool::Id(id) => id.to_string(),
                // KEDA names the metric after the ID it resolved when the scaler was made;
                // the name is resolved at the first read here, so it names the metric
                // (whitespace made `-`).
                Pool::Name(name) => name.replace(char::is_whitespace, "-"),
            };
            Ok(Self {
                organization,
                pool,
                resolved: Mutex::new(None),
                matching,
                jobs_to_fetch,
                unfinished_only,
                target,
                activation,
                client,
                headers: HeaderMap::new(),
                metric_name: ctx.metric_name(&format!("azure-pipelines-{metric}")),
                metric_type,
            })
        })?)
    }

    /// `<organizationURL>/_apis/distributedtask/<segments>` with `query`.
    fn url(&self, segments: &[&str], query: Option<&str>) -> Result<url::Url, MetadataError> {
        let mut url = self.organization.clone()?;
        if let Ok(mut path) = url.path_segments_mut() {
            path.extend(["_apis", "distributedtask"]).extend(segments);
        }
        url.set_query(query);
        Ok(url)
    }

    /// The job requests of pool `id`, as KEDA asks for them.
    fn jobs_request(&self, id: i64) -> Result<ApiRequest<'_>, MetadataError> {
        let id = id.to_string();
        let query = if self.unfinished_only {
            Some("completedRequestCount=0".to_string())
        } else if matches!(self.matching, Matching::Parent(_)) {
            None
        } else {
            Some(format!("$top={}", self.jobs_to_fetch))
        };
        let url = self.url(&["pools", &id, "jobrequests"], query.as_deref())?;
        Ok(ApiRequest::get(url, &self.headers))
    }

    /// The pool's ID: `poolID`, or `poolName` resolved (once).
    async fn pool_id(&self, call: &HttpCall<'_>) -> Result<i64, ScalerError> {
        let name = match &self.pool {
            Pool::Id(id) => return Ok(*id),
            Pool::Name(name) => name,
        };
        if let Some(id) = *self
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            return Ok(id);
        }
        let query = format!(
            "poolName={}",
            percent_encoding::utf8_percent_encode(name, percent_encoding::NON_ALPHANUMERIC)
        );
        let url = self
            .url(&["pools"], Some(&query))
            .map_err(ScalerError::Metadata)?;
        let body = call.send(self, ApiRequest::get(url, &self.headers)).await?;
        let id = response::pool_id(&body, name).map_err(|why| call.read.unexpected(why))?;
        *self
            .resolved
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(id);
        Ok(id)
    }

    #[allow(clippy::cast_precision_loss)]
    fn report(&self, count: i64, metric_name: &str) -> MetricsAndActivity {
        MetricsAndActivity {
            values: vec![crate::scaler::MetricValue::new(metric_name, count as f64)],
            active: count > self.activation,
        }
    }
}

/// An `azure-pipelines` scaler.
pub type PipelinesScaler = Pooled<PipelinesConfig>;

#[async_trait]
impl HttpApi for PipelinesConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        PipelinesConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.client.clone()
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// The job requests' request of a pool given by ID (by name it is resolved first, in
    /// `fetch`).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let id = match &self.pool {
            Pool::Id(id) => *id,
            Pool::Name(_) => self
                .resolved
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or(0),
        };
        self.jobs_request(id)
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        let pool = match &self.pool {
            Pool::Id(id) => format!("pool {id} (poolID)"),
            Pool::Name(name) => format!("pool \"{name}\" (poolName)"),
        };
        format!(
            "Azure DevOps GET for {pool} at {} (organizationURL)",
            describe_url(&request.url)
        )
    }

    /// Azure DevOps' refusals of the token (401, 403), an unknown pool (404) and its rate
    /// limit (429), named; its own text is never shown.
    fn error_answer(&self, status: StatusCode, body: &[u8]) -> Option<Failure> {
        let code = match status.as_u16() {
            401 => "unauthorized (HTTP 401): check personalAccessToken".to_string(),
            403 => "forbidden (HTTP 403): personalAccessToken needs the Agent Pools (read) scope"
                .to_string(),
            404 => "not found (HTTP 404): check organizationURL and the pool".to_string(),
            429 => "rate limited (HTTP 429): Azure DevOps delays or blocks this token's requests"
                .to_string(),
            _ => return None,
        };
        Some(Failure::new(
            Kind::Server {
                system: "Azure DevOps",
                code: Some(code),
            },
            Some(String::from_utf8_lossy(body).into_owned()),
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let count = response::queued_jobs(body, &self.matching)?;
        Ok(self.report(count, metric_name))
    }

    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let id = self.pool_id(call).await?;
        let request = self.jobs_request(id).map_err(ScalerError::Metadata)?;
        let body = call.send(self, request).await?;
        self.read(&body, metric_name)
            .map_err(|why| call.read.unexpected(why))
    }
}

#[cfg(test)]
mod tests;
