//! `openstack-swift`: scales on the number of objects in an OpenStack Swift container, read as
//! KEDA's `openstack-swift` trigger reads it (`pkg/scalers/openstack_swift_scaler.go`, through
//! gophercloud's `containers.Get`): `HEAD <swift endpoint>/<containerName>` with a Keystone
//! token, the count in the answer's `X-Container-Object-Count` header. The Swift endpoint is
//! `swiftURL`, or the token's catalog's public `object-store` endpoint in `regionName`.
//!
//! Every trigger with the same `authURL`, credentials and timeout shares one client and one
//! token ([`crate::openstack`]).

use http::Method;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::openstack::{
    self, APP_CREDENTIAL_ID, APP_CREDENTIAL_SECRET, AUTH_URL, CatalogService, Credentials,
    KeystoneClient, KeystoneKey, PASSWORD, PROJECT_ID, USER_ID,
};
use crate::pool::Lease;
use crate::pooled::{Pooled, PooledSource, ReadCtx};
use crate::scaler::MetricsAndActivity;

const SWIFT_URL: Param = Param::optional("swiftURL");
const CONTAINER_NAME: Param = Param::required("containerName");
const OBJECT_COUNT: Param = Param::optional("objectCount").default("2");
const ACTIVATION_OBJECT_COUNT: Param = Param::optional("activationObjectCount").default("0");
const OBJECT_PREFIX: Param = Param::optional("objectPrefix");
const OBJECT_DELIMITER: Param = Param::optional("objectDelimiter");
const OBJECT_LIMIT: Param = Param::optional("objectLimit");
const TIMEOUT: Param = Param::optional("timeout").default("30");
const ONLY_FILES: Param = Param::optional("onlyFiles");
const REGION_NAME: Param = Param::optional("regionName").order(AUTH);

/// The parameters of `openstack-swift`, in KEDA's order.
pub const PARAMS: &[Param] = &[
    SWIFT_URL,
    CONTAINER_NAME,
    OBJECT_COUNT,
    ACTIVATION_OBJECT_COUNT,
    OBJECT_PREFIX,
    OBJECT_DELIMITER,
    OBJECT_LIMIT,
    TIMEOUT,
    ONLY_FILES,
    USER_ID,
    PASSWORD,
    PROJECT_ID,
    AUTH_URL,
    APP_CREDENTIAL_ID,
    APP_CREDENTIAL_SECRET,
    REGION_NAME,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SwiftConfig {
    /// `containerName`.
    pub container: String,
    /// `swiftURL` with a trailing `/`, or `Err` naming it when it is not an http(s) URL (every
    /// read fails); `None`: the catalog's endpoint.
    pub swift_url: Option<Result<url::Url, MetadataError>>,
    /// `regionName` (may be empty).
    pub region: String,
    /// `objectCount`.
    pub target: i64,
    /// `activationObjectCount`.
    pub activation: i64,
    /// `s<index>-openstack-swift-<containerName>[-<objectPrefix>]`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// The client's key.
    pub key: KeystoneKey,
}

impl SwiftConfig {
    /// Parses the trigger as KEDA's `parseOpenstackSwiftMetadata` and `Validate`.
    ///
    /// # Errors
    /// `containerName` or `authURL` missing, a malformed number or `onlyFiles`, `authURL` not
    /// an http(s) URL, incomplete credentials (see [`Credentials::parse`]).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let swift_url: Option<String> = p.get_opt(&SWIFT_URL)?;
            let container: String = p.get(&CONTAINER_NAME)?;
            let target: i64 = p.get(&OBJECT_COUNT)?;
            let activation: i64 = p.get(&ACTIVATION_OBJECT_COUNT)?;
            let prefix: Option<String> = p.get_opt(&OBJECT_PREFIX)?;
            // Parsed as KEDA parses them; KEDA's read uses none of the three.
            let _: Option<String> = p.get_opt(&OBJECT_DELIMITER)?;
            let _: Option<String> = p.get_opt(&OBJECT_LIMIT)?;
            let _: Option<bool> = p.get_opt(&ONLY_FILES)?;
            let timeout: i64 = p.get(&TIMEOUT)?;
            let auth_url: String = p.get(&AUTH_URL)?;
            let credentials = Credentials::parse(p, true)?;
            let region: Option<String> = p.get_opt(&REGION_NAME)?;
            let tokens_url = openstack::tokens_url(p, &auth_url)?;
            let swift_url = swift_url.map(|text| {
                openstack::with_trailing_slash(&text).ok_or_else(|| {
                    p.rule("parameter \"swiftURL\" must be an http:// or https:// URL, such as http://swift:8080/v1/AUTH_<project>")
                })
            });
            let name = match &prefix {
                Some(prefix) => format!("openstack-swift-{container}-{prefix}"),
                None => format!("openstack-swift-{container}"),
            };
            Ok(Self {
                metric_name: ctx.metric_name(&name),
                container,
                swift_url,
                region: region.unwrap_or_default(),
                target,
                activation,
                metric_type,
                key: KeystoneKey {
                    tokens_url,
                    credentials,
                    timeout: openstack::timeout(ctx, timeout),
                },
            })
        })?)
    }

    /// The container's URL on the Swift endpoint of `catalog` (or `swiftURL`).
    ///
    /// # Errors
    /// No public `object-store` endpoint in the catalog for `regionName`.
    pub fn container_url(&self, catalog: &[CatalogService]) -> Result<url::Url, String> {
        let mut url = match &self.swift_url {
            Some(Ok(url)) => url.clone(),
            Some(Err(e)) => return Err(e.to_string()),
            None => openstack::catalog_endpoint(catalog, "object-store", &self.region)?,
        };
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().push(&self.container);
        }
        Ok(url)
    }
}

/// The object count of a container's `HEAD` answer (`X-Container-Object-Count`).
///
/// # Errors
/// The header is missing or not a whole number.
pub fn object_count(header: Option<&str>) -> Result<i64, String> {
    header
        .ok_or("the Swift answer has no X-Container-Object-Count header")?
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| i64::try_from(n).ok())
        .ok_or_else(|| "the Swift answer's X-Container-Object-Count is not a whole number".into())
}

/// An `openstack-swift` scaler.
pub type SwiftScaler = Pooled<SwiftConfig>;

#[async_trait::async_trait]
impl PooledSource for SwiftConfig {
    type Key = KeystoneKey;
    type Client = KeystoneClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SwiftConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<KeystoneKey, MetadataError> {
        if let Some(Err(e)) = &self.swift_url {
            return Err(e.clone());
        }
        Ok(self.key.clone())
    }

    async fn connect(
        ctx: &ScalerContext,
        key: KeystoneKey,
    ) -> Result<Lease<KeystoneKey, KeystoneClient>, ScalerError> {
        openstack::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    async fn read(
        &self,
        client: &KeystoneClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let operation = format!("Swift HEAD of container {}", self.container);
        let answer = client
            .call(read, &operation, Method::HEAD, |catalog| {
                self.container_url(catalog)
            })
            .await?;
        let count = object_count(
            answer
                .headers
                .get("x-container-object-count")
                .and_then(|v| v.to_str().ok()),
        )
        .map_err(|why| read.unexpected(why))?;
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (count as f64, self.activation as f64);
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    const AUTH: &[(&str, &str)] = &[
        ("authURL", "http://keystone:5000/v3"),
        ("userID", "u1"),
        ("password", "pw"),
        ("projectID", "p1"),
    ];

    fn parse(metadata: &[(&str, &str)]) -> Result<SwiftConfig, String> {
        SwiftConfig::parse(&test_context("openstack-swift", 1, metadata, &[], AUTH))
            .map_err(|e| e.to_string())
    }

    /// KEDA's `openstackSwiftMetricIdentifiers` and `testOpenstackSwiftMetadata` cases.
    #[test]
    fn parameters_and_metric_names_follow_keda() {
        let c = parse(&[("containerName", "my-container")]).unwrap();
        assert_eq!((c.target, c.activation), (2, 0));
        assert_eq!(c.metric_name, "s1-openstack-swift-my-container");
        let c = parse(&[
            ("containerName", "my-container"),
            ("objectPrefix", "my-prefix"),
            ("objectCount", "5"),
            ("activationObjectCount", "1"),
        ])
        .unwrap();
        assert_eq!((c.target, c.activation), (5, 1));
        assert_eq!(c.metric_name, "s1-openstack-swift-my-container-my-prefix");
        assert!(parse(&[]).unwrap_err().contains("\"containerName\""));
        assert!(
            parse(&[("containerName", "c"), ("objectCount", "many")])
                .unwrap_err()
                .contains("\"objectCount\"")
        );
        assert!(
            parse(&[("containerName", "c"), ("onlyFiles", "maybe")])
                .unwrap_err()
                .contains("\"onlyFiles\"")
        );
    }

    #[test]
    fn the_container_url_is_swift_url_or_the_catalog_s() {
        let c = parse(&[
            ("containerName", "my container"),
            ("swiftURL", "http://swift:8080/v1/AUTH_p1"),
        ])
        .unwrap();
        assert_eq!(
            c.container_url(&[]).unwrap().as_str(),
            "http://swift:8080/v1/AUTH_p1/my%20container"
        );
        let bad = parse(&[("containerName", "c"), ("swiftURL", "swift:8080")]).unwrap();
        assert!(
            bad.client_key()
                .unwrap_err()
                .to_string()
                .contains("\"swiftURL\"")
        );
        let c = parse(&[("containerName", "c")]).unwrap();
        assert!(c.container_url(&[]).unwrap_err().contains("object-store"));
    }

    #[test]
    fn the_count_is_the_header_s() {
        assert_eq!(object_count(Some("42")), Ok(42));
        assert!(object_count(None).is_err());
        assert!(object_count(Some("-1")).is_err());
        assert!(
            object_count(Some("SECRETSECRET"))
                .unwrap_err()
                .find("SECRET")
                .is_none()
        );
    }
}
