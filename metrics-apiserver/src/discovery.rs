//! Discovery and OpenAPI documents: what the aggregator and clients read to learn that this
//! server serves `external.metrics.k8s.io/v1beta1`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, GroupVersionForDiscovery,
};
use keda_api::external_metrics::{GROUP, GROUP_VERSION, LIST_KIND, VERSION};
use serde_json::{Value, json};

/// The placeholder resource advertised in the resource list. Metric names are not known in
/// advance, and an empty list makes clients warn, so like KEDA (custom-metrics-apiserver's
/// default provider) one placeholder is listed.
pub const PLACEHOLDER_RESOURCE: &str = "externalmetric";

/// The path of the OpenAPI v3 document of the group version.
pub const OPENAPI_V3_GROUP_PATH: &str = "/openapi/v3/apis/external.metrics.k8s.io/v1beta1";

fn group_version() -> GroupVersionForDiscovery {
    GroupVersionForDiscovery {
        group_version: GROUP_VERSION.to_string(),
        version: VERSION.to_string(),
    }
}

/// `GET /apis/external.metrics.k8s.io`.
pub fn api_group() -> APIGroup {
    APIGroup {
        name: GROUP.to_string(),
        preferred_version: Some(group_version()),
        server_address_by_client_cidrs: None,
        versions: vec![group_version()],
    }
}

/// `GET /apis`.
pub fn api_group_list() -> APIGroupList {
    APIGroupList {
        groups: vec![api_group()],
    }
}

/// `GET /apis/external.metrics.k8s.io/v1beta1`.
pub fn api_resource_list() -> APIResourceList {
    APIResourceList {
        group_version: GROUP_VERSION.to_string(),
        resources: vec![APIResource {
            name: PLACEHOLDER_RESOURCE.to_string(),
            singular_name: String::new(),
            namespaced: true,
            kind: LIST_KIND.to_string(),
            verbs: vec!["get".to_string()],
            ..APIResource::default()
        }],
    }
}

fn schemas(prefix: &str) -> Value {
    let reference = |name: &str| json!({ "$ref": format!("{prefix}{name}") });
    json!({
        "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList": {
            "description": "ExternalMetricValueList is a list of values for a given metric for some set labels",
            "type": "object",
            "required": ["items"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "items": {
                    "type": "array",
                    "items": reference("io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue")
                }
            },
            "x-kubernetes-group-version-kind": [
                {"group": GROUP, "version": VERSION, "kind": LIST_KIND}
            ]
        },
        "io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValue": {
            "description": "ExternalMetricValue is a metric value for external metric",
            "type": "object",
            "required": ["metricName", "metricLabels", "timestamp", "value"],
            "properties": {
                "metricName": {"type": "string"},
                "metricLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                "timestamp": {"type": "string", "format": "date-time"},
                "window": {"type": "integer", "format": "int64"},
                "value": {"type": "string"}
            }
        }
    })
}

fn metric_operation(list_ref: Value) -> Value {
    json!({
        "get": {
            "description": "the values of one external metric of a ScaledObject",
            "operationId": "readExternalMetricValue",
            "tags": ["external_metrics"],
            "produces": ["application/json"],
            "parameters": [
                {"name": "namespace", "in": "path", "required": true, "type": "string"},
                {"name": "metric", "in": "path", "required": true, "type": "string"},
                {"name": "labelSelector", "in": "query", "required": true, "type": "string",
                 "description": "must contain scaledobject.keda.sh/name=<ScaledObject name>"}
            ],
            "responses": {"200": {"description": "OK", "schema": list_ref}}
        }
    })
}

/// `GET /openapi/v2`: a Swagger 2.0 document of the metric endpoint.
pub fn openapi_v2() -> Value {
    let list = json!({"$ref": "#/definitions/io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList"});
    json!({
        "swagger": "2.0",
        "info": {"title": "keda-rs metrics-apiserver", "version": VERSION},
        "paths": {
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}": metric_operation(list)
        },
        "definitions": schemas("#/definitions/")
    })
}

/// `GET /openapi/v3`: the index of group-version documents.
pub fn openapi_v3_index() -> Value {
    json!({
        "paths": {
            "apis/external.metrics.k8s.io/v1beta1": {"serverRelativeURL": OPENAPI_V3_GROUP_PATH}
        }
    })
}

/// `GET /openapi/v3/apis/external.metrics.k8s.io/v1beta1`: an OpenAPI 3.0 document.
pub fn openapi_v3_group() -> Value {
    let list = json!({"$ref": "#/components/schemas/io.k8s.metrics.pkg.apis.external_metrics.v1beta1.ExternalMetricValueList"});
    json!({
        "openapi": "3.0.0",
        "info": {"title": "keda-rs metrics-apiserver", "version": VERSION},
        "paths": {
            "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{metric}": {
                "get": {
                    "description": "the values of one external metric of a ScaledObject",
                    "operationId": "readExternalMetricValue",
                    "parameters": [
                        {"name": "namespace", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "metric", "in": "path", "required": true, "schema": {"type": "string"}},
                        {"name": "labelSelector", "in": "query", "required": true, "schema": {"type": "string"}}
                    ],
                    "responses": {
                        "200": {"description": "OK", "content": {"application/json": {"schema": list}}}
                    }
                }
            }
        },
        "components": {"schemas": schemas("#/components/schemas/")}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resource_list_advertises_one_placeholder_so_clients_do_not_warn() {
        let json = serde_json::to_value(api_resource_list()).expect("serializes");
        assert_eq!(json["kind"], "APIResourceList");
        assert_eq!(json["groupVersion"], "external.metrics.k8s.io/v1beta1");
        assert_eq!(json["resources"][0]["name"], "externalmetric");
        assert_eq!(json["resources"][0]["namespaced"], true);
    }

    #[test]
    fn the_group_prefers_v1beta1() {
        let json = serde_json::to_value(api_group_list()).expect("serializes");
        assert_eq!(json["kind"], "APIGroupList");
        assert_eq!(json["groups"][0]["name"], "external.metrics.k8s.io");
        assert_eq!(json["groups"][0]["preferredVersion"]["version"], "v1beta1");
    }

    #[test]
    fn openapi_documents_reference_only_schemas_they_define() {
        for (doc, prefix, section) in [
            (openapi_v2(), "#/definitions/", "definitions"),
            (openapi_v3_group(), "#/components/schemas/", "components"),
        ] {
            let text = doc.to_string();
            for reference in text.split("\"$ref\":\"").skip(1) {
                let target = reference.split('"').next().unwrap_or("");
                let name = target.strip_prefix(prefix).expect("local reference");
                let defined = if section == "definitions" {
                    &doc["definitions"][name]
                } else {
                    &doc["components"]["schemas"][name]
                };
                assert!(defined.is_object(), "{target} is not defined");
            }
        }
    }
}
