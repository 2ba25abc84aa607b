//! `huawei-cloudeye`: scales on a Huawei Cloud Eye metric, read as KEDA's `huawei-cloudeye`
//! trigger reads it (`pkg/scalers/huawei_cloudeye_scaler.go`, through Huawei's gophercloud
//! v1.0.21), every request signed with the TriggerAuthentication's access key (AK/SK,
//! `SDK-HMAC-SHA256`, [`sign`]):
//!
//! 1. the identity endpoint (`IdentityEndpoint`): used as it is when it ends with `/v3` (or
//!    `/v2.0`), else its version document (`GET <base>`, unsigned) names the newest of the two;
//! 2. IAM's catalog: `GET <identity>/services` and `GET <identity>/endpoints` (pages followed
//!    on the identity endpoint's own server, at most [`MAX_PAGES`] each); the one public
//!    endpoint of service type `cesv1` (its `$(tenant_id)s` made `ProjectID`) is Cloud Eye's,
//!    and without exactly one, `https://ces.<Region>.<Cloud>/V1.0/<ProjectID>/` (gophercloud's
//!    endpoint pattern); kept for [`CATALOG_TTL_SECONDS`] per client;
//! 3. Cloud Eye's "batch query of metric data", `POST <ces>/batch-query-metric-data` with
//!    `{"metrics": [{"namespace", "metric_name", "dimensions": [{"name", "value"}]}], "from",
//!    "to", "period", "filter"}` over the `metricCollectionTime` seconds before the current
//!    minute; the value is the `metricFilter` field of the first datapoint.
//!
//! Every request carries `X-Project-Id`, `Host` and `X-Sdk-Date` and is signed; no operator
//! credential is ever attached. Triggers with the same identity endpoint, project, region,
//! cloud, keys and timeout share one client and one catalog.

pub mod response;
pub mod sign;

#[cfg(test)]
mod tests;

use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Method, StatusCode};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::HttpAuth;
use crate::context::ScalerContext;
use crate::error::{MetadataError, MetadataErrorKind, ScalerError};
use crate::http_client::{
    HttpAnswer, HttpClient, HttpClientKey, VendorEndpoints, describe_url, parse_http_url,
};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Lease;
use crate::pooled::{Pooled, PooledSource, ReadCtx};
use crate::remote::{Classify, Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const NAMESPACE: Param = Param::required("namespace");
const METRIC_NAME: Param = Param::required("metricName");
const DIMENSION_NAME: Param = Param::required("dimensionName");
const DIMENSION_VALUE: Param = Param::required("dimensionValue");
const TARGET_METRIC_VALUE: Param = Param::required("targetMetricValue");
const ACTIVATION_TARGET_METRIC_VALUE: Param =
    Param::optional("activationTargetMetricValue").default("0");
const MIN_METRIC_VALUE: Param = Param::deprecated(
    "minMetricValue",
    "the 'minMetricValue' setting is DEPRECATED and is removed in v2.20; use 'activationTargetMetricValue' instead",
);
const METRIC_COLLECTION_TIME: Param = Param::optional("metricCollectionTime").default("300");
const METRIC_FILTER: Param = Param::optional("metricFilter")
    .default("average")
    .allowed(&["average", "max", "min", "sum"]);
const METRIC_PERIOD: Param = Param::optional("metricPeriod").default("300");
const IDENTITY_ENDPOINT: Param = Param::required("IdentityEndpoint").order(AUTH);
const PROJECT_ID: Param = Param::required("ProjectID").order(AUTH);
const DOMAIN_ID: Param = Param::required("DomainID").order(AUTH);
const REGION: Param = Param::required("Region").order(AUTH);
const DOMAIN: Param = Param::required("Domain").order(AUTH);
const CLOUD: Param = Param::optional("Cloud")
    .order(AUTH)
    .default("myhuaweicloud.com");
const ACCESS_KEY: Param = Param::required("AccessKey").order(AUTH).secret();
const SECRET_KEY: Param = Param::required("SecretKey").order(AUTH).secret();

/// The parameters of `huawei-cloudeye`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    NAMESPACE,
    METRIC_NAME,
    DIMENSION_NAME,
    DIMENSION_VALUE,
    TARGET_METRIC_VALUE,
    ACTIVATION_TARGET_METRIC_VALUE,
    MIN_METRIC_VALUE,
    METRIC_COLLECTION_TIME,
    METRIC_FILTER,
    METRIC_PERIOD,
    IDENTITY_ENDPOINT,
    PROJECT_ID,
    DOMAIN_ID,
    REGION,
    DOMAIN,
    CLOUD,
    ACCESS_KEY,
    SECRET_KEY,
];

/// The most pages of one IAM list read.
pub const MAX_PAGES: usize = 50;

/// The most entries of one IAM list kept over its pages (a real catalog has hundreds): the
/// pages come from the tenant's identity server, and 50 pages of empty entries would otherwise
/// pile up gigabytes. One page is held to it while it is read, so a page of tiny entries is
/// refused before they are made.
pub const MAX_LIST_ENTRIES: usize = 10_000;

/// Appends a page's `items` to `all`, or says the list is too long.
fn append_bounded<T>(all: &mut Vec<T>, items: Vec<T>) -> Result<(), String> {
    if all.len().saturating_add(items.len()) > MAX_LIST_ENTRIES {
        return Err(format!("the list has more than {MAX_LIST_ENTRIES} entries"));
    }
    all.extend(items);
    Ok(())
}

/// How long a client keeps the Cloud Eye endpoint it found in IAM's catalog.
pub const CATALOG_TTL_SECONDS: i64 = 600;

/// The `User-Agent` of every request (signed, as gophercloud signs its own).
pub const USER_AGENT: &str = concat!("keda-rs/", env!("CARGO_PKG_VERSION"));

/// The catalog's service type of Cloud Eye (gophercloud's `NewCESV1`).
pub const CES_SERVICE_TYPE: &str = "cesv1";

/// What triggers share a client by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CloudeyeKey {
    /// The identity endpoint as given, with a trailing `/`.
    pub identity: url::Url,
    /// `ProjectID`.
    pub project_id: String,
    /// `DomainID` (sent as `X-Domain-Id` only without a project, as gophercloud does).
    pub domain_id: String,
    /// `Region`.
    pub region: String,
    /// `Cloud` (gophercloud uses it instead of `Domain` when set, and it defaults).
    pub cloud: String,
    /// `AccessKey`.
    pub access_key: Secret,
    /// `SecretKey`.
    pub secret_key: Secret,
    /// Timeout of one request.
    pub timeout: Duration,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct CloudeyeConfig {
    /// `namespace`.
    pub namespace: String,
    /// `metricName`.
    pub metric: String,
    /// `dimensionName`.
    pub dimension_name: String,
    /// `dimensionValue`.
    pub dimension_value: String,
    /// `targetMetricValue`.
    pub target: f64,
    /// `activationTargetMetricValue`.
    pub activation: f64,
    /// `metricCollectionTime`, seconds.
    pub collection_time: i64,
    /// `metricFilter`.
    pub filter: String,
    /// `metricPeriod`.
    pub period: String,
    /// `s<index>-huawei-cloudeye-<metricName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The client's key, or why `IdentityEndpoint` cannot be used (every read fails with it,
    /// as KEDA's reads do).
    pub key: Result<CloudeyeKey, MetadataError>,
}

impl CloudeyeConfig {
    /// Parses the trigger as KEDA's typed config of `huaweiCloudeyeMetadata`.
    ///
    /// # Errors
    /// A required parameter missing, a malformed number, `minMetricValue` present, a
    /// `metricFilter` not one of average, max, min, sum.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let namespace: String = p.get(&NAMESPACE)?;
            let metric: String = p.get(&METRIC_NAME)?;
            let dimension_name: String = p.get(&DIMENSION_NAME)?;
            let dimension_value: String = p.get(&DIMENSION_VALUE)?;
            let target: f64 = p.get(&TARGET_METRIC_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_METRIC_VALUE)?;
            p.get_opt::<f64>(&MIN_METRIC_VALUE)?;
            let collection_time: i64 = p.get(&METRIC_COLLECTION_TIME)?;
            if collection_time <= 0
                && let Some(found) = p.find(&METRIC_COLLECTION_TIME)?
            {
                // The query's window would be empty or reversed; Cloud Eye refuses it.
                return Err(p.invalid(
                    &METRIC_COLLECTION_TIME,
                    found,
                    "a number of seconds above 0",
                ));
            }
            let filter: String = p.get(&METRIC_FILTER)?;
            let period: String = p.get(&METRIC_PERIOD)?;
            let identity: String = p.get(&IDENTITY_ENDPOINT)?;
            let project_id: String = p.get(&PROJECT_ID)?;
            let domain_id: String = p.get(&DOMAIN_ID)?;
            let region: String = p.get(&REGION)?;
            p.get::<String>(&DOMAIN)?;
            let cloud: String = p.get(&CLOUD)?;
            let access_key: Secret = p.get(&ACCESS_KEY)?;
            let secret_key: Secret = p.get(&SECRET_KEY)?;
            let key = parse_http_url(p, &IDENTITY_ENDPOINT, &identity).map(|mut identity| {
                identity.set_query(None);
                identity.set_fragment(None);
                if !identity.path().ends_with('/') {
                    let path = format!("{}/", identity.path());
                    identity.set_path(&path);
                }
                CloudeyeKey {
                    identity,
                    project_id,
                    domain_id,
                    region,
                    cloud,
                    access_key,
                    secret_key,
                    timeout: ctx.global_http_timeout,
                }
            });
            Ok(Self {
                metric_name: ctx.metric_name(&format!("huawei-cloudeye-{metric}")),
                namespace,
                metric,
                dimension_name,
                dimension_value,
                target,
                activation,
                collection_time,
                filter,
                period,
                metric_type,
                key,
            })
        })?)
    }

    /// The body of the batch query at `now`: KEDA's window, the `metricCollectionTime` seconds
    /// before the start of the current minute, in Unix milliseconds.
    pub fn query(&self, now: jiff::Timestamp) -> String {
        let to = now.as_second().div_euclid(60).saturating_mul(60_000);
        let from = to.saturating_sub(self.collection_time.saturating_mul(1000));
        serde_json::json!({
            "metrics": [{
                "namespace": self.namespace,
                "dimensions": [{"name": self.dimension_name, "value": self.dimension_value}],
                "metric_name": self.metric,
            }],
            "from": from,
            "to": to,
            "period": self.period,
            "filter": self.filter,
        })
        .to_string()
    }
}

/// Error codes of Huawei's API Gateway and Cloud Eye, in keda-rs' words.
const KNOWN_CODES: &[(&str, &str)] = &[
    (
        "APIGW.0301",
        "the AK/SK signature was refused: check AccessKey, SecretKey and the operator's clock",
    ),
    (
        "APIGW.0308",
        "throttled: the API's request rate limit was reached",
    ),
    ("APIGW.0101", "the API does not exist at this endpoint"),
    (
        "ces.0014",
        "Cloud Eye refused a parameter of the query (namespace, metricName, dimensionName, dimensionValue, metricPeriod or metricFilter)",
    ),
];

/// A non-success answer as a failure: its status, and a known Huawei error code in our words.
fn status_failure(answer: HttpAnswer) -> Failure {
    let code = response::error_code(&answer.body);
    let known = code
        .as_deref()
        .and_then(|c| KNOWN_CODES.iter().find(|(k, _)| k.eq_ignore_ascii_case(c)));
    match known {
        Some((code, words)) => Failure::new(
            Kind::Server {
                system: "Huawei Cloud",
                code: Some(format!("{code} (HTTP {}): {words}", answer.status.as_u16())),
            },
            Some(String::from_utf8_lossy(&answer.body).into_owned()),
        ),
        None => answer.into_status_error().classify(),
    }
}

/// One request of a read.
struct Call<'a> {
    /// What it does, for messages.
    operation: &'a str,
    method: Method,
    url: url::Url,
    body: Option<Bytes>,
    /// The statuses that are an answer (gophercloud's `OkCodes`).
    ok: &'a [StatusCode],
    /// Signed with the keys (all but the version document's).
    signed: bool,
    /// A failure drops the cached Cloud Eye endpoint (the Cloud Eye request's).
    forget: bool,
}

/// A cached Cloud Eye endpoint.
struct CachedEndpoint {
    url: url::Url,
    /// Unix seconds when it was found.
    found_at: i64,
}

/// A pooled `huawei-cloudeye` client: one HTTP client for IAM and Cloud Eye, the keys, and
/// the Cloud Eye endpoint last found.
pub struct CloudeyeClient {
    http: HttpClient,
    key: CloudeyeKey,
    vendor_endpoints: VendorEndpoints,
    ces: tokio::sync::Mutex<Option<CachedEndpoint>>,
}

impl CloudeyeClient {
    fn headers(
        &self,
        method: &Method,
        url: &url::Url,
        body: Option<&[u8]>,
        now: jiff::Timestamp,
        signed: bool,
    ) -> HeaderMap {
        let mut pairs: Vec<(String, String)> = vec![
            ("Accept".into(), "application/json".into()),
            ("User-Agent".into(), USER_AGENT.into()),
        ];
        if body.is_some() {
            pairs.push(("Content-Type".into(), "application/json".into()));
        }
        if signed {
            if !self.key.project_id.is_empty() {
                pairs.push(("X-Project-Id".into(), self.key.project_id.clone()));
            } else if !self.key.domain_id.is_empty() {
                pairs.push(("X-Domain-Id".into(), self.key.domain_id.clone()));
            }
            let date = sign::sdk_date(now);
            pairs.push(("Host".into(), crate::aws::sigv4::host_header(url)));
            pairs.push((sign::DATE_HEADER.into(), date.clone()));
            let authorization = sign::Signer {
                access_key: self.key.access_key.expose(),
                secret_key: self.key.secret_key.expose(),
                region: "",
                service: "",
            }
            .authorization(
                &sign::ToSign {
                    method: method.as_str(),
                    url,
                    headers: &pairs,
                    body: body.unwrap_or_default(),
                },
                &date,
            );
            pairs.push(("Authorization".into(), authorization));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            // Names are ours; values are the trigger's IDs and keys: one that is not valid in
            // a header is left out, and the server refuses the request then.
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                headers.insert(name, value);
            }
        }
        headers
    }

    /// Sends `request` and returns the body of an answer with one of its `ok` statuses.
    async fn call(&self, read: ReadCtx<'_>, request: Call<'_>) -> Result<Bytes, ScalerError> {
        let fail = |failure: Failure| ScalerError::Query {
            trigger: read.trigger.clone(),
            operation: request.operation.to_string(),
            source: failure,
        };
        let headers = self.headers(
            &request.method,
            &request.url,
            request.body.as_deref(),
            read.now(),
            request.signed,
        );
        let answer = self
            .http
            .exchange(request.method, request.url, &headers, request.body)
            .await
            .map_err(|e| fail(e.classify()))?;
        if !request.ok.contains(&answer.status) {
            if request.forget && answer.status != StatusCode::TOO_MANY_REQUESTS {
                // Not throttled: the next read asks IAM again, the endpoint may have moved.
                self.forget_endpoint().await;
            }
            return Err(fail(status_failure(answer)));
        }
        Ok(answer.body)
    }

    /// The identity endpoint the catalog is read from (gophercloud's `ChooseVersion`).
    async fn identity(&self, read: ReadCtx<'_>) -> Result<url::Url, ScalerError> {
        let identity = &self.key.identity;
        if identity.path().ends_with("/v3/") || identity.path().ends_with("/v2.0/") {
            return Ok(identity.clone());
        }
        let base = version_base(identity);
        let operation = format!(
            "reading the identity endpoint's versions from {}",
            describe_url(&base)
        );
        let body = self
            .call(
                read,
                Call {
                    operation: &operation,
                    method: Method::GET,
                    url: base,
                    body: None,
                    ok: &[StatusCode::OK, StatusCode::MULTIPLE_CHOICES],
                    signed: false,
                    forget: false,
                },
            )
            .await?;
        let href = response::choose_version(&body, identity.as_str())
            .map_err(|why| answer_error(read, &operation, why))?;
        url::Url::parse(&href)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
            .ok_or_else(|| {
                answer_error(
                    read,
                    &operation,
                    "the chosen version's link is not an http(s) URL".into(),
                )
            })
    }

    /// Every page of an IAM list from `first`, each read by `page`; only pages on `first`'s
    /// own server are followed.
    async fn pages<T>(
        &self,
        read: ReadCtx<'_>,
        what: &str,
        first: url::Url,
        page: impl Fn(&[u8]) -> Result<(Vec<T>, Option<String>), String>,
    ) -> Result<Vec<T>, ScalerError> {
        let origin = crate::http_client::origin(&first);
        let operation = format!("reading IAM's {what} list from {}", describe_url(&first));
        let mut all = Vec::new();
        let mut next = Some(first);
        for _ in 0..MAX_PAGES {
            let Some(url) = next.take() else {
                return Ok(all);
            };
            let body = self
                .call(
                    read,
                    Call {
                        operation: &operation,
                        method: Method::GET,
                        url: url.clone(),
                        body: None,
                        ok: &[StatusCode::OK],
                        signed: true,
                        forget: false,
                    },
                )
                .await?;
            let (items, link) = page(&body).map_err(|why| answer_error(read, &operation, why))?;
            if items.is_empty() {
                return Ok(all);
            }
            append_bounded(&mut all, items).map_err(|why| answer_error(read, &operation, why))?;
            if let Some(link) = link {
                let link = url.join(&link).ok().filter(|l| {
                    matches!(l.scheme(), "http" | "https")
                        && crate::http_client::origin(l) == origin
                });
                next = Some(link.ok_or_else(|| {
                    answer_error(
                        read,
                        &operation,
                        "the next page's link is not on the identity endpoint's server".into(),
                    )
                })?);
            }
        }
        if next.is_some() {
            return Err(answer_error(
                read,
                &operation,
                format!("the list has more than {MAX_PAGES} pages"),
            ));
        }
        Ok(all)
    }

    /// Cloud Eye's endpoint: the cached one while it is fresh, else IAM's catalog's.
    async fn ces_endpoint(&self, read: ReadCtx<'_>) -> Result<url::Url, ScalerError> {
        let now = read.now().as_second();
        let mut cached = self.ces.lock().await;
        if let Some(c) = cached
            .as_ref()
            .filter(|c| now.saturating_sub(c.found_at) < CATALOG_TTL_SECONDS && now >= c.found_at)
        {
            return Ok(c.url.clone());
        }
        let identity = self.identity(read).await?;
        let join = |path: &str| {
            url::Url::parse(&format!("{identity}{path}")).map_err(|_| {
                answer_error(
                    read,
                    "reading IAM's catalog",
                    "the identity endpoint's URL cannot be extended".into(),
                )
            })
        };
        let services = self
            .pages(read, "service", join("services")?, response::services_page)
            .await?;
        let endpoints = self
            .pages(
                read,
                "endpoint",
                join("endpoints")?,
                response::endpoints_page,
            )
            .await?;
        if endpoints.is_empty() {
            return Err(answer_error(
                read,
                &format!(
                    "reading IAM's endpoint list from {}",
                    describe_url(&identity)
                ),
                "IAM lists no endpoint".into(),
            ));
        }
        let url = ces_url(&self.key, &services, &endpoints, &self.vendor_endpoints)
            .map_err(|e| ScalerError::Metadata(e.in_trigger(read.trigger)))?;
        *cached = Some(CachedEndpoint {
            url: url.clone(),
            found_at: now,
        });
        Ok(url)
    }

    async fn forget_endpoint(&self) {
        *self.ces.lock().await = None;
    }
}

/// An unusable answer of `operation`.
fn answer_error(read: ReadCtx<'_>, operation: &str, why: String) -> ScalerError {
    ScalerError::Query {
        trigger: read.trigger.clone(),
        operation: operation.to_string(),
        source: Failure::answer(why, &[]),
    }
}

/// gophercloud's `NewClient` base: the identity endpoint without its first version segment
/// (`v3`, `v2.0`, ...), with a trailing `/`.
pub fn version_base(identity: &url::Url) -> url::Url {
    let text = identity.as_str();
    let path = identity.path();
    let bytes = path.as_bytes();
    let mut found = None;
    for (i, b) in bytes.iter().enumerate() {
        if *b != b'v' {
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == b'.')
            .count();
        if digits > 0 {
            let mut end = i + 1 + digits;
            if bytes.get(end) == Some(&b'/') {
                end += 1;
            }
            found = path.get(i..end);
            break;
        }
    }
    let Some(version) = found else {
        return identity.clone();
    };
    let base = text.replace(version, "");
    url::Url::parse(&base)
        .ok()
        .map(|mut u| {
            if !u.path().ends_with('/') {
                let p = format!("{}/", u.path());
                u.set_path(&p);
            }
            u
        })
        .unwrap_or_else(|| identity.clone())
}

/// Why Cloud Eye's endpoint cannot be made, naming the parameter.
#[derive(Debug)]
pub struct EndpointError(String);

impl EndpointError {
    fn in_trigger(self, trigger: &crate::error::TriggerId) -> MetadataError {
        MetadataError {
            trigger: trigger.clone(),
            kind: MetadataErrorKind::Rule(self.0),
        }
    }
}

/// gophercloud's `GetEndpointURLForAKSKAuth` for `cesv1`: the one public endpoint of a
/// `cesv1` service in the catalog, else `https://ces.<Region>.<Cloud>/V1.0/<ProjectID>/`
/// (through the process's vendor endpoints, which tests point at their fakes).
///
/// # Errors
/// The catalog's endpoint is not an http(s) URL, or `Region` or `Cloud` cannot be part of a
/// host name.
pub fn ces_url(
    key: &CloudeyeKey,
    services: &[(String, String)],
    endpoints: &[response::Endpoint],
    vendor_endpoints: &VendorEndpoints,
) -> Result<url::Url, EndpointError> {
    let matching: Vec<&response::Endpoint> = endpoints
        .iter()
        .filter(|e| {
            e.interface == "public"
                && services
                    .iter()
                    .find(|(id, _)| *id == e.service_id)
                    .is_some_and(|(_, type_)| type_ == CES_SERVICE_TYPE)
        })
        .collect();
    if let [only] = matching.as_slice() {
        let text = only.url.replace("$(tenant_id)s", &key.project_id);
        return crate::openstack::with_trailing_slash(&text).ok_or_else(|| {
            EndpointError(
                "the cesv1 endpoint of IAM's catalog (parameter \"IdentityEndpoint\") is not an http(s) URL".into(),
            )
        });
    }
    let host_part = |param: &str, value: &str| {
        if !value.is_empty()
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.'))
        {
            Ok(())
        } else {
            Err(EndpointError(format!(
                "parameter \"{param}\" cannot be part of Cloud Eye's host name ces.<Region>.<Cloud>"
            )))
        }
    };
    host_part("Region", &key.region)?;
    host_part("Cloud", &key.cloud)?;
    let mut url =
        url::Url::parse(&format!("https://ces.{}.{}/", key.region, key.cloud)).map_err(|_| {
            EndpointError(
                "parameters \"Region\" and \"Cloud\" do not make a host name ces.<Region>.<Cloud>"
                    .into(),
            )
        })?;
    if let Ok(mut path) = url.path_segments_mut() {
        path.clear().extend(["V1.0", key.project_id.as_str(), ""]);
    }
    Ok(vendor_endpoints.redirect(url))
}

/// A lease on the pooled client of `key`, building it when no trigger holds one. Does not
/// connect: the first read does.
///
/// # Errors
/// The HTTP client cannot be built.
pub async fn lease(
    ctx: &ScalerContext,
    key: CloudeyeKey,
) -> Result<Lease<CloudeyeKey, CloudeyeClient>, ScalerError> {
    let trigger = ctx.trigger_id();
    let vendor_endpoints = ctx.vendor_endpoints.clone();
    ctx.clients
        .pool::<CloudeyeKey, CloudeyeClient>()
        .get_or_connect(key.clone(), || async move {
            let http = HttpClient::new(&HttpClientKey {
                origin: crate::http_client::origin(&key.identity),
                auth: HttpAuth::default(),
                timeout: key.timeout,
            })?;
            Ok::<_, crate::http_client::HttpClientError>(CloudeyeClient {
                http,
                key,
                vendor_endpoints,
                ces: tokio::sync::Mutex::new(None),
            })
        })
        .await
        .map_err(|e| {
            ScalerError::Metadata(MetadataError {
                trigger,
                kind: MetadataErrorKind::Rule(e.to_string()),
            })
        })
}

/// A `huawei-cloudeye` scaler.
pub type CloudeyeScaler = Pooled<CloudeyeConfig>;

#[async_trait::async_trait]
impl PooledSource for CloudeyeConfig {
    type Key = CloudeyeKey;
    type Client = CloudeyeClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        CloudeyeConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<CloudeyeKey, MetadataError> {
        self.key.clone()
    }

    async fn connect(
        ctx: &ScalerContext,
        key: CloudeyeKey,
    ) -> Result<Lease<CloudeyeKey, CloudeyeClient>, ScalerError> {
        lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.target),
        )]
    }

    async fn read(
        &self,
        client: &CloudeyeClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let ces = client.ces_endpoint(read).await?;
        let url = url::Url::parse(&format!("{ces}batch-query-metric-data")).map_err(|_| {
            answer_error(
                read,
                "querying Cloud Eye",
                "Cloud Eye's endpoint cannot be extended".into(),
            )
        })?;
        let operation = format!(
            "Cloud Eye batch query of {}/{} on {}",
            self.namespace,
            self.metric,
            describe_url(&url)
        );
        let body = Bytes::from(self.query(read.now()));
        let answer = client
            .call(
                read,
                Call {
                    operation: &operation,
                    method: Method::POST,
                    url,
                    body: Some(body),
                    ok: &[StatusCode::OK],
                    signed: true,
                    forget: true,
                },
            )
            .await?;
        let value =
            response::first_datapoint(&answer, &self.filter).map_err(|why| read.unexpected(why))?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation,
        ))
    }
}
