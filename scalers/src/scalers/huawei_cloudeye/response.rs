//! The answers `huawei-cloudeye` reads: IAM's version document, service and endpoint lists
//! (Keystone v3's shapes, which Huawei IAM keeps) and Cloud Eye's batch query of metric data.
//! Messages say what is wrong in keda-rs' words, never quoting the answer.

use super::MAX_LIST_ENTRIES;
use crate::remote::{AtMost, First, json_error};

/// The most versions, and links of a version, read from a version document (a real one has
/// two or three).
const MAX_VERSIONS: usize = 64;

/// The `(id, type)` of each service of a page, and the next page's URL.
pub type ServicesPage = (Vec<(String, String)>, Option<String>);

/// One page of `GET /v3/services`: `(id, type)` of each service and the next page's URL.
///
/// # Errors
/// Not `{"services": [...]}`.
pub fn services_page(body: &[u8]) -> Result<ServicesPage, String> {
    #[derive(serde::Deserialize)]
    struct Page {
        services: AtMost<Service, MAX_LIST_ENTRIES>,
        #[serde(default)]
        links: Option<Links>,
    }
    #[derive(serde::Deserialize)]
    struct Service {
        #[serde(default)]
        id: String,
        #[serde(default, rename = "type")]
        type_: String,
    }
    let page: Page = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the IAM service list is not {{\"services\": [...]}}: {}",
            json_error(&e)
        )
    })?;
    Ok((
        page.services
            .0
            .into_iter()
            .map(|s| (s.id, s.type_))
            .collect(),
        page.links.and_then(|l| l.next).filter(|n| !n.is_empty()),
    ))
}

/// An endpoint of IAM's endpoint list.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub struct Endpoint {
    /// The service it belongs to.
    #[serde(default)]
    pub service_id: String,
    /// `public`, `internal` or `admin`.
    #[serde(default)]
    pub interface: String,
    /// Its URL (may hold `$(tenant_id)s`).
    #[serde(default)]
    pub url: String,
}

/// The `links` of a Keystone list.
#[derive(serde::Deserialize)]
struct Links {
    #[serde(default)]
    next: Option<String>,
}

/// One page of `GET /v3/endpoints`: its endpoints and the next page's URL.
///
/// # Errors
/// Not `{"endpoints": [...]}`.
pub fn endpoints_page(body: &[u8]) -> Result<(Vec<Endpoint>, Option<String>), String> {
    #[derive(serde::Deserialize)]
    struct Page {
        endpoints: AtMost<Endpoint, MAX_LIST_ENTRIES>,
        #[serde(default)]
        links: Option<Links>,
    }
    let page: Page = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the IAM endpoint list is not {{\"endpoints\": [...]}}: {}",
            json_error(&e)
        )
    })?;
    Ok((
        page.endpoints.0,
        page.links.and_then(|l| l.next).filter(|n| !n.is_empty()),
    ))
}

/// gophercloud's `ChooseVersion` over a version document (`{"versions": {"values": [{"id",
/// "status", "links": [{"href", "rel"}]}]}}`): the `self` link of the version whose link is
/// `identity` itself, else of the highest of v3 and v2.0 whose status is current, supported
/// or stable. Links are returned with a trailing `/`.
///
/// # Errors
/// Not a version document, no usable version, or the chosen version has no link.
pub fn choose_version(body: &[u8], identity: &str) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Document {
        versions: Values,
    }
    #[derive(serde::Deserialize)]
    struct Values {
        #[serde(default = "no_versions")]
        values: AtMost<Version, MAX_VERSIONS>,
    }
    fn no_versions() -> AtMost<Version, MAX_VERSIONS> {
        AtMost(Vec::new())
    }
    #[derive(serde::Deserialize)]
    struct Version {
        #[serde(default)]
        id: String,
        #[serde(default)]
        status: String,
        #[serde(default = "no_links")]
        links: AtMost<Link, MAX_VERSIONS>,
    }
    fn no_links() -> AtMost<Link, MAX_VERSIONS> {
        AtMost(Vec::new())
    }
    #[derive(serde::Deserialize)]
    struct Link {
        #[serde(default)]
        href: String,
        #[serde(default)]
        rel: String,
    }
    let document: Document = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the identity endpoint's version document is not {{\"versions\": {{\"values\": [...]}}}}: {}",
            json_error(&e)
        )
    })?;
    let normalize = |href: &str| {
        if href.is_empty() || href.ends_with('/') {
            href.to_string()
        } else {
            format!("{href}/")
        }
    };
    let mut highest: Option<(u8, String)> = None;
    for version in &document.versions.values.0 {
        let href = version
            .links
            .0
            .iter()
            .rev()
            .find(|l| l.rel == "self")
            .map(|l| normalize(&l.href))
            .unwrap_or_default();
        for (id, priority) in [("v2.0", 20), ("v3", 30)] {
            if !version.id.contains(id) {
                continue;
            }
            if !href.is_empty() && href == identity {
                return Ok(href);
            }
            let good = matches!(
                version.status.to_ascii_lowercase().as_str(),
                "current" | "supported" | "stable"
            );
            if good && highest.as_ref().is_none_or(|(p, _)| priority > *p) {
                highest = Some((priority, href.clone()));
            }
        }
    }
    match highest {
        None => Err("the identity endpoint offers no supported version (v3 or v2.0)".into()),
        Some((_, href)) if href.is_empty() => {
            Err("the identity endpoint's chosen version has no link".into())
        }
        Some((_, href)) => Ok(href),
    }
}

/// KEDA's reading of Cloud Eye's batch query answer (`{"metrics": [{"datapoints":
/// [{"<filter>": 1.5, "timestamp": ...}], ...}]}`): the `filter` field of the first datapoint
/// of the first metric.
///
/// # Errors
/// Not that shape, no metric, no datapoint (KEDA: "metric Data not received"), or the field is
/// not a finite number.
pub fn first_datapoint(body: &[u8], filter: &str) -> Result<f64, String> {
    // Only the first metric and its first datapoint are made, and of the datapoint only the
    // four values a filter names: the rest of the answer is read and dropped.
    #[derive(serde::Deserialize)]
    struct Answer {
        metrics: First<Metric>,
    }
    #[derive(serde::Deserialize)]
    struct Metric {
        #[serde(default)]
        datapoints: Option<First<Point>>,
    }
    #[derive(serde::Deserialize)]
    struct Point {
        #[serde(default)]
        average: Datum,
        #[serde(default)]
        max: Datum,
        #[serde(default)]
        min: Datum,
        #[serde(default)]
        sum: Datum,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Cloud Eye answer is not {{\"metrics\": [...]}}: {}",
            json_error(&e)
        )
    })?;
    let metric = answer
        .metrics
        .0
        .ok_or("the Cloud Eye answer holds no metric")?;
    let point = metric
        .datapoints
        .and_then(|d| d.0)
        .ok_or("Cloud Eye returned no datapoint for the metric in the collection time")?;
    let datum = match filter {
        "average" => point.average,
        "max" => point.max,
        "min" => point.min,
        "sum" => point.sum,
        _ => Datum::Absent,
    };
    match datum {
        Datum::Number(n) => n
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("the datapoint's \"{filter}\" is not a finite number")),
        Datum::Other => Err(format!("the datapoint's \"{filter}\" is not a number")),
        Datum::Absent => Err(format!("the datapoint has no \"{filter}\" value")),
    }
}

/// A datapoint's value as far as it is read: a number, something else (read and dropped), or
/// no such field.
#[derive(Debug, Default)]
enum Datum {
    #[default]
    Absent,
    Number(serde_json::Number),
    Other,
}

impl<'de> serde::Deserialize<'de> for Datum {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Value;

        impl<'de> serde::de::Visitor<'de> for Value {
            type Value = Datum;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_i64<E>(self, v: i64) -> Result<Datum, E> {
                Ok(Datum::Number(v.into()))
            }

            fn visit_u64<E>(self, v: u64) -> Result<Datum, E> {
                Ok(Datum::Number(v.into()))
            }

            fn visit_f64<E>(self, v: f64) -> Result<Datum, E> {
                Ok(serde_json::Number::from_f64(v).map_or(Datum::Other, Datum::Number))
            }

            fn visit_bool<E>(self, _: bool) -> Result<Datum, E> {
                Ok(Datum::Other)
            }

            fn visit_str<E>(self, _: &str) -> Result<Datum, E> {
                Ok(Datum::Other)
            }

            fn visit_unit<E>(self) -> Result<Datum, E> {
                Ok(Datum::Other)
            }

            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Datum, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Datum::Other)
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Datum, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Datum::Other)
            }
        }

        deserializer.deserialize_any(Value)
    }
}

/// The error code of a Huawei Cloud error answer: API Gateway's `error_code`
/// (`{"error_code": "APIGW.0301", "error_msg": ...}`) or Cloud Eye's `details.code`
/// (`{"details": {"code": "ces.0014", "details": ...}}`).
pub fn error_code(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = crate::remote::from_json(body).ok()?;
    let code = value
        .get("error_code")
        .or_else(|| value.get("details").and_then(|d| d.get("code")))?;
    code.as_str().map(str::to_string)
}
