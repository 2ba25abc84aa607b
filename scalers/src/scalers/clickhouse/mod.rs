//! `clickhouse`: scales on the number a ClickHouse SQL query returns (first column of the first
//! row). Compatible with KEDA's `clickhouse` trigger (`pkg/scalers/clickhouse_scaler.go`): the
//! same parameters, the connection given as a `connectionString` (a `clickhouse://` DSN of
//! `clickhouse-go`) or as `host`, `port`, `username`, `password` and `database`.
//!
//! KEDA speaks ClickHouse's native protocol; keda-rs speaks its HTTP interface
//! (<https://clickhouse.com/docs/interfaces/http>) through the shared HTTP client: the query
//! is the body of a `POST` to `/?database=<database>&default_format=JSONCompact`, the user and
//! password go in Basic authentication, and the answer is read in the `JSONCompact` format
//! (<https://clickhouse.com/docs/interfaces/formats/JSONCompact>). The native port a DSN names
//! is mapped onto the HTTP interface's ([`http_port`]).

pub mod dsn;
pub mod response;

use std::borrow::Cow;

use http::StatusCode;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::{AUTH, AUTH_ENV, METADATA_AUTH, METADATA_AUTH_ENV, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::remote::{Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::scalers::rabbitmq::config::KedaDuration;
use crate::secret::Secret;
use crate::tls::TlsSettings;

use self::dsn::{Endpoint, Target};

const CONNECTION_STRING: Param = Param::optional("connectionString").order(AUTH_ENV).secret();
const HOST: Param = Param::optional("host").order(METADATA_AUTH);
const PORT: Param = Param::optional("port").order(METADATA_AUTH);
const USERNAME: Param = Param::optional("username").order(METADATA_AUTH_ENV);
const PASSWORD: Param = Param::optional("password").order(AUTH_ENV).secret();
const DATABASE: Param = Param::optional("database").order(METADATA_AUTH);
const QUERY: Param = Param::required("query");
const TARGET_QUERY_VALUE: Param = Param::required("targetQueryValue");
const ACTIVATION_TARGET_QUERY_VALUE: Param =
    Param::optional("activationTargetQueryValue").default("0");
const MAX_IDLE_CONNS: Param = Param::optional("maxIdleConns").order(METADATA_AUTH);
const MAX_OPEN_CONNS: Param = Param::optional("maxOpenConns").order(METADATA_AUTH);
const CONN_MAX_LIFETIME: Param = Param::optional("connMaxLifetime").order(METADATA_AUTH);
const TLS: Param = Param::optional("tls").order(AUTH).default("false");
const CERT: Param = Param::optional("cert").order(AUTH).secret();
const KEY: Param = Param::optional("key").order(AUTH).secret();
const KEY_PASSWORD: Param = Param::optional("keyPassword").order(AUTH).secret();
const CA: Param = Param::optional("ca").order(AUTH).secret();
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").order(AUTH).default("false");
/// keda-rs' own: the port of the HTTP interface when it is not the usual one for the native
/// port given.
const HTTP_PORT: Param = Param::optional("httpPort")
    .order(METADATA_AUTH)
    .range(1.0, 65535.0);

/// The parameters of `clickhouse`.
pub const PARAMS: &[Param] = &[
    CONNECTION_STRING,
    HOST,
    PORT,
    USERNAME,
    PASSWORD,
    DATABASE,
    QUERY,
    TARGET_QUERY_VALUE,
    ACTIVATION_TARGET_QUERY_VALUE,
    MAX_IDLE_CONNS,
    MAX_OPEN_CONNS,
    CONN_MAX_LIFETIME,
    TLS,
    CERT,
    KEY,
    KEY_PASSWORD,
    CA,
    UNSAFE_SSL,
    HTTP_PORT,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct ClickHouseConfig {
    /// The request URL and the client key, or why the connection parameters cannot be used
    /// (every read fails with it, as KEDA fails when it connects).
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// `query`, sent as the body.
    pub query: String,
    /// The target (0 when the trigger feeds `scalingModifiers`).
    pub target: f64,
    /// Active iff the value is above this.
    pub activation: f64,
    /// `s<index>-clickhouse`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

/// The port of ClickHouse's HTTP interface for a native-protocol `port`: 9000 (plain) is
/// served over HTTP on 8123, 9440 (TLS) over HTTPS on 8443, ClickHouse's defaults. Any other
/// native port has no known HTTP counterpart: `None` (the trigger must give `httpPort`).
pub fn http_port(native_port: u16) -> Option<u16> {
    match native_port {
        9000 => Some(8123),
        9440 => Some(8443),
        _ => None,
    }
}

impl ClickHouseConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// A missing `query` or `targetQueryValue`, `targetQueryValue` 0 (unless the trigger feeds
    /// `scalingModifiers`), neither `connectionString` nor `host`, `cert` without `key` or the
    /// reverse with `tls`, a malformed number or duration (KEDA's rules).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let connection_string: Option<Secret> = p.get_opt(&CONNECTION_STRING)?;
            let host: Option<String> = p.get_opt(&HOST)?;
            let port: Option<String> = p.get_opt(&PORT)?;
            let username: Option<String> = p.get_opt(&USERNAME)?;
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let database: Option<String> = p.get_opt(&DATABASE)?;
            let query: String = p.get(&QUERY)?;
            let target: f64 = p.get(&TARGET_QUERY_VALUE)?;
            let activation: f64 = p.get(&ACTIVATION_TARGET_QUERY_VALUE)?;
            // Pool sizes of Go's database/sql: parsed as KEDA does, the shared HTTP client's
            // own bounds apply instead.
            let _: Option<i64> = p.get_opt(&MAX_IDLE_CONNS)?;
            let _: Option<i64> = p.get_opt(&MAX_OPEN_CONNS)?;
            let _: Option<KedaDuration> = p.get_opt(&CONN_MAX_LIFETIME)?;
            let tls: bool = p.get(&TLS)?;
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            let http_port: Option<u16> = p.get_opt(&HTTP_PORT)?;
            if target == 0.0 && !ctx.as_metric_source {
                return Err(p.rule(
                    "parameter \"targetQueryValue\" is required when not using scaler as metric source (it must not be 0)",
                ));
            }
            let cert: Option<Secret> = p.get_opt(&CERT)?;
            let key: Option<Secret> = p.get_opt(&KEY)?;
            let key_password: Option<Secret> = p.get_opt(&KEY_PASSWORD)?;
            let ca: Option<Secret> = p.get_opt(&CA)?;
            if tls && cert.is_some() != key.is_some() {
                return Err(p.rule("both cert and key must be provided when TLS is enabled"));
            }
            let target_of = match connection_string {
                Some(dsn) => Ok(dsn::parse(p, &CONNECTION_STRING, dsn.expose())),
                None => {
                    let Some(host) = host else {
                        return Err(p.rule("either connectionString or host must be set"));
                    };
                    Ok(dsn::from_parts(
                        p,
                        &host,
                        port.as_deref().unwrap_or("9000"),
                        username.unwrap_or_else(|| "default".into()),
                        password.unwrap_or_else(|| Secret::new("")),
                        database.unwrap_or_else(|| "default".into()),
                    ))
                }
            }?;
            let endpoint = target_of.and_then(|target| {
                let mut tls_settings = TlsSettings {
                    insecure: target.skip_verify,
                    ..TlsSettings::default()
                };
                if tls {
                    tls_settings.insecure |= unsafe_ssl;
                    tls_settings.ca = ca.clone();
                    tls_settings.client = crate::tls::client_identity(
                        cert.clone(),
                        key.clone(),
                        key_password.clone(),
                    )
                    .map_err(|e| p.rule(e.to_string()))?;
                }
                let url = request_url(p, &target, tls, http_port)?;
                let auth = HttpAuth {
                    modes: vec![AuthMode::Basic],
                    basic: Some((target.username.clone(), target.password.clone())),
                    tls: tls_settings,
                    ..HttpAuth::default()
                };
                let key = HttpClientKey {
                    origin: http_client::origin(&url),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                Ok((url, key))
            });
            let mut headers = HeaderMap::new();
            headers.insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Ok(Self {
                endpoint,
                query,
                target: if ctx.as_metric_source { 0.0 } else { target },
                activation,
                metric_name: ctx.metric_name("clickhouse"),
                metric_type,
                headers,
            })
        })?)
    }
}

/// The URL of the query: `http(s)://<host>:<http port><http_path>?database=<db>&<settings>&default_format=JSONCompact`.
fn request_url(
    p: &crate::metadata::MetadataParser<'_>,
    target: &Target,
    tls: bool,
    http_port: Option<u16>,
) -> Result<url::Url, MetadataError> {
    let secure = tls || target.secure;
    let (scheme, port) = match target.endpoint {
        Endpoint::Native(native) => {
            let port = match http_port.or_else(|| http_port_of(native, secure)) {
                Some(port) => port,
                None => {
                    return Err(p.rule(format!(
                        "parameter \"{}\": port {} is not one of ClickHouse's native ports (9000, 9440 with TLS), so its HTTP interface's port is unknown; give it in parameter \"httpPort\"",
                        target.param,
                        native.unwrap_or_default()
                    )));
                }
            };
            (if secure { "https" } else { "http" }, port)
        }
        Endpoint::Http { https, port } => {
            let scheme = if https || tls { "https" } else { "http" };
            let default = if scheme == "https" { 443 } else { 80 };
            (scheme, http_port.or(port).unwrap_or(default))
        }
    };
    let host = if target.host.contains(':') && !target.host.starts_with('[') {
        format!("[{}]", target.host)
    } else {
        target.host.clone()
    };
    let mut url = url::Url::parse(&format!("{scheme}://{host}:{port}/")).map_err(|e| {
        p.rule(format!(
            "parameter \"{}\": the host is not valid in a URL ({e})",
            target.param
        ))
    })?;
    url.set_path(&target.http_path);
    {
        let mut query = url.query_pairs_mut();
        if !target.database.is_empty() {
            query.append_pair("database", &target.database);
        }
        for (name, value) in &target.settings {
            query.append_pair(name, value);
        }
        query.append_pair("default_format", "JSONCompact");
    }
    Ok(url)
}

/// The HTTP port of native `port`: [`http_port`]; without a port the native default of the
/// transport (9000, 9440 with TLS) maps the same way.
fn http_port_of(native: Option<u16>, secure: bool) -> Option<u16> {
    match native {
        Some(port) => http_port(port),
        None if secure => Some(8443),
        None => Some(8123),
    }
}

/// A `clickhouse` scaler.
pub type ClickHouseScaler = Pooled<ClickHouseConfig>;

impl HttpApi for ClickHouseConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        ClickHouseConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.endpoint
            .as_ref()
            .map(|(_, key)| key.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.target),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        Ok(ApiRequest::post(
            url.clone(),
            Cow::Borrowed(&self.headers),
            self.query.clone(),
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!("clickhouse query on {}", describe_url(&request.url))
    }

    fn error_answer(&self, status: StatusCode, body: &[u8]) -> Option<Failure> {
        let code = response::error_code(body)?;
        Some(Failure::new(
            Kind::Server {
                system: "ClickHouse",
                code: Some(format!("Code {code} (HTTP {})", status.as_u16())),
            },
            Some(String::from_utf8_lossy(body).into_owned()),
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        Ok(MetricsAndActivity::single(
            metric_name,
            response::first_value(body)?,
            self.activation,
        ))
    }
}

#[cfg(test)]
mod tests;
