//! The columns kube-apiserver prints for the built-in kinds memkube serves, and their cells
//! (Kubernetes' `pkg/printers/internalversion/printers.go`; the aggregator's for APIServices;
//! the default `NAME`, `CREATED AT` for kinds without a printer).
//!
//! memkube stores what clients write, without the API server's defaulting; where a printer
//! reads a field the API server would have defaulted (a port's `protocol`, a Service's `type`)
//! the default is printed.

use jiff::Timestamp;
use serde_json::{Value, json};

mod events;
mod hpa;
mod pod;
mod workloads;

use super::Column;
use super::format::{age, labels};

use events::{core_event, event_columns, events_event};
use hpa::{hpa, hpa_columns};
use pod::{pod, pod_columns};
use workloads::{
    cron_job, cron_job_columns, deployment, deployment_columns, job, job_columns, replica_set,
    replica_set_columns, stateful_set, stateful_set_columns,
};

/// Writes a kind's column definitions.
type Columns = fn() -> Vec<Column>;
/// Writes one object's cells at a time.
type Cells = fn(&Value, Timestamp) -> Vec<Value>;

/// A built-in kind's columns and the function that writes one object's cells.
pub(crate) struct Printer {
    pub columns: Columns,
    pub cells: Cells,
}

/// The printer of `group`/`plural`; the default one for kinds without their own.
pub(crate) fn printer(group: &str, plural: &str) -> Printer {
    let (columns, cells): (Columns, Cells) = match (group, plural) {
        ("", "pods") => (pod_columns, pod),
        ("", "services") => (service_columns, service),
        ("", "endpoints") => (endpoints_columns, endpoints),
        ("", "namespaces") => (namespace_columns, namespace),
        ("", "secrets") => (secret_columns, secret),
        ("", "configmaps") => (config_map_columns, config_map),
        ("", "serviceaccounts") => (service_account_columns, service_account),
        ("", "events") => (event_columns, core_event),
        ("events.k8s.io", "events") => (event_columns, events_event),
        ("apps", "deployments") => (deployment_columns, deployment),
        ("apps", "replicasets") => (replica_set_columns, replica_set),
        ("apps", "statefulsets") => (stateful_set_columns, stateful_set),
        ("batch", "jobs") => (job_columns, job),
        ("batch", "cronjobs") => (cron_job_columns, cron_job),
        ("autoscaling", "horizontalpodautoscalers") => (hpa_columns, hpa),
        ("discovery.k8s.io", "endpointslices") => (endpoint_slice_columns, endpoint_slice),
        ("coordination.k8s.io", "leases") => (lease_columns, lease),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            (webhook_columns, webhook)
        }
        ("apiregistration.k8s.io", "apiservices") => (api_service_columns, api_service),
        _ => (default_columns, default_cells),
    };
    Printer { columns, cells }
}

pub(super) fn col(name: &str, type_: &str, priority: i64, description: &str) -> Column {
    Column {
        name: name.to_string(),
        type_: type_.to_string(),
        format: if name == "Name" { "name" } else { "" }.to_string(),
        description: description.to_string(),
        priority,
    }
}

pub(super) fn name_col() -> Column {
    col(
        "Name",
        "string",
        0,
        "The object's name, unique within its namespace.",
    )
}

pub(super) fn age_col() -> Column {
    col("Age", "string", 0, "Time since the object was created.")
}

pub(super) fn text<'v>(obj: &'v Value, pointer: &str) -> &'v str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

pub(super) fn int(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

pub(super) fn len(obj: &Value, pointer: &str) -> i64 {
    let n = match obj.pointer(pointer) {
        Some(Value::Array(a)) => a.len(),
        Some(Value::Object(m)) => m.len(),
        _ => 0,
    };
    i64::try_from(n).unwrap_or(i64::MAX)
}

pub(super) fn items<'v>(obj: &'v Value, pointer: &str) -> &'v [Value] {
    obj.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

pub(super) fn name(obj: &Value) -> Value {
    json!(text(obj, "/metadata/name"))
}

pub(super) fn created(obj: &Value, now: Timestamp) -> Value {
    json!(age(
        obj.pointer("/metadata/creationTimestamp")
            .and_then(Value::as_str),
        now
    ))
}

pub(super) fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".to_string()
    } else {
        s.to_string()
    }
}

/// Container names and images of a pod template, comma separated.
pub(super) fn containers(obj: &Value, template_spec: &str) -> (Value, Value) {
    let list = items(obj, &format!("{template_spec}/containers"));
    let names: Vec<&str> = list.iter().map(|c| text(c, "/name")).collect();
    let images: Vec<&str> = list.iter().map(|c| text(c, "/image")).collect();
    (json!(names.join(",")), json!(images.join(",")))
}

pub(super) fn condition<'v>(obj: &'v Value, pointer: &str, type_: &str) -> Option<&'v Value> {
    items(obj, pointer)
        .iter()
        .find(|c| text(c, "/type") == type_)
}

pub(super) fn condition_true(obj: &Value, pointer: &str, type_: &str) -> bool {
    condition(obj, pointer, type_).is_some_and(|c| text(c, "/status") == "True")
}

// --- the default table (kinds without a printer) ---

fn default_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Created At", "date", 0, "When the object was created."),
    ]
}

fn default_cells(obj: &Value, _now: Timestamp) -> Vec<Value> {
    let created = text(obj, "/metadata/creationTimestamp")
        .parse::<Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    vec![name(obj), json!(created)]
}

fn service_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Type", "string", 0, "The Service's type."),
        col("Cluster-IP", "string", 0, "The Service's cluster IP."),
        col("External-IP", "string", 0, "The Service's external IPs."),
        col("Port(s)", "string", 0, "The Service's ports."),
        age_col(),
        col("Selector", "string", 1, "The pods the Service selects."),
    ]
}

fn service(obj: &Value, now: Timestamp) -> Vec<Value> {
    let type_ = match text(obj, "/spec/type") {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = items(obj, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or_default();
    let external: Vec<&str> = items(obj, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let external_ip = match type_ {
        "ClusterIP" | "NodePort" if !external.is_empty() => external.join(","),
        "ClusterIP" | "NodePort" => "<none>".to_string(),
        "LoadBalancer" => {
            let mut ips: Vec<&str> = items(obj, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| match text(i, "/ip") {
                    "" => text(i, "/hostname"),
                    ip => ip,
                })
                .filter(|s| !s.is_empty())
                .collect();
            ips.extend(external);
            if ips.is_empty() {
                "<pending>".to_string()
            } else {
                ips.join(",")
            }
        }
        "ExternalName" => text(obj, "/spec/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = items(obj, "/spec/ports")
        .iter()
        .map(|p| {
            let protocol = match text(p, "/protocol") {
                "" => "TCP",
                proto => proto,
            };
            match int(p, "/nodePort") {
                0 => format!("{}/{protocol}", int(p, "/port")),
                node => format!("{}:{node}/{protocol}", int(p, "/port")),
            }
        })
        .collect();
    vec![
        name(obj),
        json!(type_),
        json!(or_none(cluster_ip)),
        json!(external_ip),
        json!(or_none(&ports.join(","))),
        created(obj, now),
        json!(labels(obj.pointer("/spec/selector"))),
    ]
}

fn endpoints_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Endpoints",
            "string",
            0,
            "The endpoints' addresses and ports.",
        ),
        age_col(),
    ]
}

/// Up to three entries, then `+ N more...`; `unset` when there are none.
fn at_most_three(list: Vec<String>, count: usize, unset: &str) -> String {
    let shown: Vec<String> = list.into_iter().take(3).collect();
    if count > 3 {
        format!("{} + {} more...", shown.join(","), count - 3)
    } else if shown.is_empty() {
        unset.to_string()
    } else {
        shown.join(",")
    }
}

fn endpoints(obj: &Value, now: Timestamp) -> Vec<Value> {
    let mut list = Vec::new();
    let mut count = 0;
    for subset in items(obj, "/subsets") {
        let addresses = items(subset, "/addresses");
        let ports = items(subset, "/ports");
        if ports.is_empty() {
            count += addresses.len();
            list.extend(addresses.iter().map(|a| text(a, "/ip").to_string()));
        }
        for port in ports {
            count += addresses.len();
            list.extend(addresses.iter().map(|a| {
                let ip = text(a, "/ip");
                if ip.contains(':') {
                    format!("[{ip}]:{}", int(port, "/port"))
                } else {
                    format!("{ip}:{}", int(port, "/port"))
                }
            }));
        }
    }
    let text = if items(obj, "/subsets").is_empty() {
        "<none>".to_string()
    } else {
        at_most_three(list, count, "")
    };
    vec![name(obj), json!(text), created(obj, now)]
}

fn namespace_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Status", "string", 0, "The namespace's phase."),
        age_col(),
    ]
}

fn namespace(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(obj),
        json!(text(obj, "/status/phase")),
        created(obj, now),
    ]
}

fn secret_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Type", "string", 0, "The Secret's type."),
        col("Data", "string", 0, "How many keys the Secret holds."),
        age_col(),
    ]
}

fn secret(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(obj),
        json!(text(obj, "/type")),
        json!(len(obj, "/data")),
        created(obj, now),
    ]
}

fn config_map_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Data", "string", 0, "How many keys the ConfigMap holds."),
        age_col(),
    ]
}

fn config_map(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(obj),
        json!(len(obj, "/data").saturating_add(len(obj, "/binaryData"))),
        created(obj, now),
    ]
}

fn service_account_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Secrets",
            "string",
            0,
            "How many Secrets the account lists.",
        ),
        age_col(),
    ]
}

fn service_account(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(obj), json!(len(obj, "/secrets")), created(obj, now)]
}

fn endpoint_slice_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("AddressType", "string", 0, "IPv4, IPv6 or FQDN."),
        col("Ports", "string", 0, "The slice's ports."),
        col("Endpoints", "string", 0, "The slice's addresses."),
        age_col(),
    ]
}

fn endpoint_slice(obj: &Value, now: Timestamp) -> Vec<Value> {
    let ports: Vec<String> = items(obj, "/ports")
        .iter()
        .map(
            |p| match (p.get("port").and_then(Value::as_i64), text(p, "/name")) {
                (Some(port), _) => port.to_string(),
                (None, "") => "*".to_string(),
                (None, name) => name.to_string(),
            },
        )
        .collect();
    let port_count = ports.len();
    let addresses: Vec<String> = items(obj, "/endpoints")
        .iter()
        .flat_map(|e| items(e, "/addresses").iter())
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect();
    let address_count = addresses.len();
    vec![
        name(obj),
        json!(text(obj, "/addressType")),
        json!(at_most_three(ports, port_count, "<unset>")),
        json!(at_most_three(addresses, address_count, "<unset>")),
        created(obj, now),
    ]
}

fn lease_columns() -> Vec<Column> {
    vec![
        name_col(),
        col("Holder", "string", 0, "Who holds the lease."),
        age_col(),
    ]
}

fn lease(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(obj),
        json!(text(obj, "/spec/holderIdentity")),
        created(obj, now),
    ]
}

fn webhook_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Webhooks",
            "integer",
            0,
            "How many webhooks the configuration registers.",
        ),
        age_col(),
    ]
}

fn webhook(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(obj), json!(len(obj, "/webhooks")), created(obj, now)]
}

fn api_service_columns() -> Vec<Column> {
    vec![
        name_col(),
        col(
            "Service",
            "string",
            0,
            "The Service behind the API, or Local.",
        ),
        col("Available", "string", 0, "Whether the API is available."),
        age_col(),
    ]
}

fn api_service(obj: &Value, now: Timestamp) -> Vec<Value> {
    let service = match obj.pointer("/spec/service") {
        Some(s) if !s.is_null() => format!("{}/{}", text(s, "/namespace"), text(s, "/name")),
        _ => "Local".to_string(),
    };
    let available = match condition(obj, "/status/conditions", "Available") {
        None => "Unknown".to_string(),
        Some(c) if text(c, "/status") == "True" => "True".to_string(),
        Some(c) if !text(c, "/reason").is_empty() => {
            format!("{} ({})", text(c, "/status"), text(c, "/reason"))
        }
        Some(c) => text(c, "/status").to_string(),
    };
    vec![
        name(obj),
        json!(service),
        json!(available),
        created(obj, now),
    ]
}
