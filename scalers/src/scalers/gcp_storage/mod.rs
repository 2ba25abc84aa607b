//! `gcp-storage`: scales on the number of non-empty objects in a Cloud Storage bucket (under a
//! prefix, up to `maxBucketItemsToScan`), listed page by page with the JSON API's
//! [`objects.list`](https://cloud.google.com/storage/docs/json_api/v1/objects/list), as KEDA's
//! `gcp-storage` trigger does through the Go client (`pkg/scalers/gcp_storage_scaler.go`).
//!
//! Every trigger with the same service account key and timeout shares one client (its token
//! and its connections to Cloud Storage).

use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::context::ScalerContext;
use crate::error::{ScalerError, Source};
use crate::gcp::{self, GcpClient, GcpKey, KeySource};
use crate::http_client::describe_url;
use crate::metadata::Param;
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{KeyedSource, Pooled, ReadCtx};
use crate::scaler::MetricsAndActivity;

const METADATA: &[Source] = &[Source::Metadata];

/// Cloud Storage's host.
pub const HOST: &str = "storage.googleapis.com";
/// The scopes the Go storage client asks for (`ScopeFullControl` and `cloud-platform`).
pub const SCOPES: &[&str] = &[
    "https://www.googleapis.com/auth/devstorage.full_control",
    "https://www.googleapis.com/auth/cloud-platform",
];
/// The most pages one read lists (a bucket of empty objects would otherwise be listed to its
/// end): 1,000 pages of up to 1,000 objects.
pub const MAX_PAGES: usize = 1000;
/// The fields asked for: what counting needs (the Go client's `SetAttrSelection(["Size"])`).
pub const FIELDS: &str = "items(name,size),prefixes,nextPageToken";

const BUCKET_NAME: Param = Param::required("bucketName").order(METADATA);
const TARGET_OBJECT_COUNT: Param = Param::optional("targetObjectCount")
    .order(METADATA)
    .default("100");
const ACTIVATION_TARGET_OBJECT_COUNT: Param = Param::optional("activationTargetObjectCount")
    .order(METADATA)
    .default("0");
const MAX_BUCKET_ITEMS_TO_SCAN: Param = Param::optional("maxBucketItemsToScan")
    .order(METADATA)
    .default("1000");
const BLOB_DELIMITER: Param = Param::optional("blobDelimiter").order(METADATA);
const BLOB_PREFIX: Param = Param::optional("blobPrefix").order(METADATA);

/// The parameters of `gcp-storage`.
pub const PARAMS: &[Param] = &[
    BUCKET_NAME,
    TARGET_OBJECT_COUNT,
    ACTIVATION_TARGET_OBJECT_COUNT,
    MAX_BUCKET_ITEMS_TO_SCAN,
    BLOB_DELIMITER,
    BLOB_PREFIX,
    gcp::APPLICATION_CREDENTIALS,
    gcp::CREDENTIALS,
    gcp::CREDENTIALS_FROM_ENV_FILE,
];

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct StorageConfig {
    /// `bucketName`.
    pub bucket: String,
    /// `targetObjectCount`.
    pub target: i64,
    /// `activationTargetObjectCount`.
    pub activation: i64,
    /// `maxBucketItemsToScan`.
    pub max_items: i64,
    /// `blobDelimiter`.
    pub delimiter: Option<String>,
    /// `blobPrefix`.
    pub prefix: Option<String>,
    /// `s<index>-gcp-storage-<bucketName>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub target_type: MetricTargetType,
    /// The client's key.
    pub key: GcpKey,
    /// Cloud Storage's base URL.
    pub base: url::Url,
}

impl StorageConfig {
    /// Parses the trigger as KEDA's `parseGcsMetadata`.
    ///
    /// # Errors
    /// `bucketName` missing; `targetObjectCount` or `maxBucketItemsToScan` not positive;
    /// `activationTargetObjectCount` negative; a malformed number; no credentials.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let target_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let bucket: String = p.get(&BUCKET_NAME)?;
            let target: i64 = p.get(&TARGET_OBJECT_COUNT)?;
            let activation: i64 = p.get(&ACTIVATION_TARGET_OBJECT_COUNT)?;
            let max_items: i64 = p.get(&MAX_BUCKET_ITEMS_TO_SCAN)?;
            let delimiter: Option<String> = p.get_opt(&BLOB_DELIMITER)?;
            let prefix: Option<String> = p.get_opt(&BLOB_PREFIX)?;
            if target <= 0 {
                return Err(p.rule("targetObjectCount must be a positive number"));
            }
            if activation < 0 {
                return Err(p.rule("activationTargetObjectCount must be a positive number"));
            }
            if max_items <= 0 {
                return Err(p.rule("maxBucketItemsToScan must be a positive number"));
            }
            let key = KeySource::parse(p, ctx)?;
            let base = gcp::api_base(&ctx.vendor_endpoints, HOST).map_err(|e| p.rule(e))?;
            Ok(Self {
                metric_name: ctx.metric_name(&format!("gcp-storage-{bucket}")),
                bucket,
                target,
                activation,
                max_items,
                delimiter,
                prefix,
                target_type,
                key: GcpKey::new(ctx, &base, key, SCOPES),
                base,
            })
        })?)
    }

    /// `GET <base>storage/v1/b/<bucket>/o?...` for page `page_token`.
    pub fn list_url(&self, page_token: Option<&str>) -> Option<url::Url> {
        let mut url = self.base.clone();
        url.path_segments_mut().ok()?.pop_if_empty().extend([
            "storage",
            "v1",
            "b",
            &self.bucket,
            "o",
        ]);
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("alt", "json");
            if let Some(d) = &self.delimiter {
                q.append_pair("delimiter", d);
            }
            if let Some(p) = &self.prefix {
                q.append_pair("prefix", p);
            }
            q.append_pair("fields", FIELDS)
                .append_pair("projection", "full")
                .append_pair("versions", "false");
            if let Some(token) = page_token {
                q.append_pair("pageToken", token);
            }
        }
        Some(url)
    }
}

/// One `objects.list` page (`{"items":[{"name":..,"size":"<uint64>"}],"prefixes":[..],
/// "nextPageToken":..}`): the sizes of its objects in order and the next page's token.
///
/// # Errors
/// Not the documented shape (a size that is not a whole number). Messages never quote the
/// answer.
pub fn objects_page(body: &[u8]) -> Result<(Vec<u64>, Option<String>), String> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Page {
        #[serde(default)]
        items: Option<Vec<Item>>,
        #[serde(default)]
        next_page_token: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(default)]
        size: Option<serde_json::Value>,
    }
    let page: Page = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Cloud Storage answer is not an objects list: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let sizes = page
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|item| {
            match item.size {
                None => Some(0),
                Some(serde_json::Value::String(s)) => s.parse::<u64>().ok(),
                Some(serde_json::Value::Number(n)) => n.as_u64(),
                Some(_) => None,
            }
            .ok_or_else(|| {
                "an object's size in the Cloud Storage answer is not a whole number".into()
            })
        })
        .collect::<Result<Vec<u64>, String>>()?;
    Ok((sizes, page.next_page_token.filter(|t| !t.is_empty())))
}

/// A `gcp-storage` scaler.
pub type StorageScaler = Pooled<StorageConfig>;

#[async_trait::async_trait]
impl KeyedSource for StorageConfig {
    type Client = GcpClient;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        StorageConfig::parse(ctx)
    }

    fn key(&self) -> &GcpKey {
        &self.key
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.target_type, self.target),
        )]
    }

    /// KEDA's `getItemCount`: objects of non-zero size, page after page, until
    /// `maxBucketItemsToScan` or the last page; a bucket that does not exist (404) is 0.
    async fn read(
        &self,
        client: &GcpClient,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let operation = format!(
            "Cloud Storage objects.list of bucket {} on {}",
            self.bucket,
            describe_url(&self.base)
        );
        let mut count: i64 = 0;
        let mut token: Option<String> = None;
        'pages: for _ in 0..MAX_PAGES {
            let url = self
                .list_url(token.as_deref())
                .ok_or_else(|| read.unexpected("the Cloud Storage URL cannot be formed"))?;
            let Some(body) = client.call_or_missing(read, &operation, url, None).await? else {
                // Go's ErrBucketNotExist: KEDA counts 0.
                count = 0;
                break;
            };
            let (sizes, next) = objects_page(&body).map_err(|why| read.unexpected(why))?;
            for size in sizes {
                if count >= self.max_items {
                    break 'pages;
                }
                if size != 0 {
                    count += 1;
                }
            }
            match next {
                Some(next) if count < self.max_items => token = Some(next),
                _ => break,
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let (value, activation) = (count as f64, self.activation as f64);
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(metadata: &[(&str, &str)]) -> Result<StorageConfig, ScalerError> {
        let mut all = vec![("bucketName", "my-bucket"), ("credentialsFromEnv", "C")];
        all.extend_from_slice(metadata);
        StorageConfig::parse(&test_context("gcp-storage", 0, &all, &[("C", "{}")], &[]))
    }

    #[test]
    fn parameters_and_the_request_follow_keda() {
        let c = parse(&[("blobPrefix", "in/"), ("blobDelimiter", "/")]).unwrap();
        assert_eq!((c.target, c.activation, c.max_items), (100, 0, 1000));
        assert_eq!(c.metric_name, "s0-gcp-storage-my-bucket");
        let url = c.list_url(Some("t2")).unwrap();
        assert_eq!(url.path(), "/storage/v1/b/my-bucket/o");
        assert_eq!(
            url.query(),
            Some(
                "alt=json&delimiter=%2F&prefix=in%2F&fields=items%28name%2Csize%29%2Cprefixes%2CnextPageToken&projection=full&versions=false&pageToken=t2"
            )
        );
        let err = |m: &[(&str, &str)]| parse(m).unwrap_err().to_string();
        assert!(
            err(&[("targetObjectCount", "0")])
                .contains("targetObjectCount must be a positive number")
        );
        assert!(
            err(&[("activationTargetObjectCount", "-1")]).contains("activationTargetObjectCount")
        );
        assert!(err(&[("maxBucketItemsToScan", "0")]).contains("maxBucketItemsToScan"));
    }

    #[test]
    fn pages_give_sizes_and_the_next_token() {
        let page = br#"{"kind":"storage#objects","nextPageToken":"n","prefixes":["a/"],"items":[{"name":"x","size":"10"},{"name":"d/","size":"0"}]}"#;
        assert_eq!(objects_page(page).unwrap(), (vec![10, 0], Some("n".into())));
        assert_eq!(objects_page(b"{}").unwrap(), (vec![], None));
        assert!(objects_page(br#"{"items":[{"size":"-1"}]}"#).is_err());
        assert!(objects_page(b"[").is_err());
    }
}
