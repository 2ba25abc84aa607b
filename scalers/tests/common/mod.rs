//! Shared test helpers: the conformance harness every scaler test goes through, and access to
//! the local services (Redis, RabbitMQ, the Kafka-protocol broker).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use keda_scalers::metric::metric_value_quantity;
use keda_scalers::{BuiltScaler, Clock, Registry, ScalerContext, ScalerError, Secret};

/// Where the test Redis listens.
pub const REDIS_ADDRESS: &str = "127.0.0.1:6379";

/// Where the test Kafka-protocol broker (tansu) listens.
pub const KAFKA_BOOTSTRAP: &str = "127.0.0.1:9092";

/// Runs `attempt` (bounded to 3 s) to reach a local service for `test`. Returns its result, or
/// `None` with a printed reason when the service is not there. With `CI=true` a missing service
/// fails the test instead: CI must not skip.
pub async fn service_or_skip<T, E: std::fmt::Display>(
    test: &str,
    service: &str,
    attempt: impl std::future::Future<Output = Result<T, E>>,
) -> Option<T> {
    let result = tokio::time::timeout(std::time::Duration::from_secs(3), attempt).await;
    let error = match result {
        Ok(Ok(connection)) => return Some(connection),
        Ok(Err(e)) => e.to_string(),
        Err(_) => "timed out".to_string(),
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: {service} is required in CI: {error}");
    }
    eprintln!("skipping {test}: no {service} ({error})");
    None
}

/// A connection to the local Redis for driving the source, or `None` (see
/// [`service_or_skip`]).
pub async fn redis_or_skip(test: &str) -> Option<redis::aio::MultiplexedConnection> {
    let attempt = async {
        let client = redis::Client::open(format!("redis://{REDIS_ADDRESS}/"))?;
        client.get_multiplexed_async_connection().await
    };
    service_or_skip(test, &format!("Redis at {REDIS_ADDRESS}"), attempt).await
}

/// A key name no other test (or concurrent run) uses.
pub fn unique(prefix: &str) -> String {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "keda-rs-test-{prefix}-{}-{nanos}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn docs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs")
}

/// The documentation page of `trigger_type`, plus the pages it links to in `docs/scalers/`
/// (cluster/sentinel variants refer to the main page for shared parameters).
pub fn doc_text(trigger_type: &str) -> String {
    let dir = docs_dir().join("scalers");
    let page = std::fs::read_to_string(dir.join(format!("{trigger_type}.md")))
        .unwrap_or_else(|e| panic!("docs/scalers/{trigger_type}.md: {e}"));
    let mut text = page.clone();
    for link in page.split("](").skip(1) {
        if let Some((file, _)) = link.split_once(".md")
            && let Ok(linked) = std::fs::read_to_string(dir.join(format!("{file}.md")))
        {
            text.push_str(&linked);
        }
    }
    text
}

/// The ```yaml blocks of a markdown text, split into documents.
pub fn yaml_documents(markdown: &str) -> Vec<serde_yaml::Value> {
    let mut docs = Vec::new();
    for block in markdown.split("```yaml").skip(1) {
        let body = block.split("```").next().unwrap_or("");
        for doc in body.split("\n---\n") {
            docs.push(serde_yaml::from_str(doc).unwrap_or_else(|e| panic!("bad YAML: {e}\n{doc}")));
        }
    }
    docs
}

/// The documented example trigger of `trigger_type`: the first trigger of that type in the
/// first ScaledObject of its page, and its index.
pub fn documented_trigger(trigger_type: &str) -> (keda_api::ScaleTrigger, usize) {
    let page = std::fs::read_to_string(docs_dir().join(format!("scalers/{trigger_type}.md")))
        .unwrap_or_else(|e| panic!("docs/scalers/{trigger_type}.md: {e}"));
    let docs = yaml_documents(&page);
    let object = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("ScaledObject"))
        .unwrap_or_else(|| panic!("docs/scalers/{trigger_type}.md has no ScaledObject example"));
    let triggers = object["spec"]["triggers"]
        .as_sequence()
        .expect("spec.triggers is a list");
    let (index, trigger) = triggers
        .iter()
        .enumerate()
        .find(|(_, t)| t["type"].as_str() == Some(trigger_type))
        .unwrap_or_else(|| panic!("the example has no {trigger_type} trigger"));
    let trigger: keda_api::ScaleTrigger =
        serde_yaml::from_value(trigger.clone()).expect("the trigger deserializes as KEDA's");
    (trigger, index)
}

/// Every ScaledObject example (and `triggers:` fragment) on the page of `trigger_type`: each
/// trigger of that type with its index, and the parameters the TriggerAuthentication it names
/// (on the same page) provides. Every ScaledObject and TriggerAuthentication on the page must
/// deserialize as keda-rs' own types.
pub fn documented_examples(
    trigger_type: &str,
) -> Vec<(keda_api::ScaleTrigger, usize, Vec<String>)> {
    let page = std::fs::read_to_string(docs_dir().join(format!("scalers/{trigger_type}.md")))
        .unwrap_or_else(|e| panic!("docs/scalers/{trigger_type}.md: {e}"));
    let docs = yaml_documents(&page);
    let auth_params = |name: &str| -> Vec<String> {
        docs.iter()
            .filter(|d| d["kind"].as_str() == Some("TriggerAuthentication"))
            .filter(|d| d["metadata"]["name"].as_str() == Some(name))
            .flat_map(|d| {
                d["spec"]["secretTargetRef"]
                    .as_sequence()
                    .cloned()
                    .unwrap_or_default()
            })
            .filter_map(|r| r["parameter"].as_str().map(str::to_string))
            .collect()
    };
    for doc in &docs {
        match doc["kind"].as_str() {
            Some("ScaledObject") => {
                let _: keda_api::ScaledObject =
                    serde_yaml::from_value(doc.clone()).unwrap_or_else(|e| {
                        panic!("docs/scalers/{trigger_type}.md: a ScaledObject does not parse: {e}")
                    });
            }
            Some("TriggerAuthentication") => {
                let _: keda_api::TriggerAuthentication = serde_yaml::from_value(doc.clone())
                    .unwrap_or_else(|e| {
                        panic!(
                            "docs/scalers/{trigger_type}.md: a TriggerAuthentication does not parse: {e}"
                        )
                    });
            }
            _ => {}
        }
    }
    let mut examples = Vec::new();
    // Whole ScaledObjects, and fragments that are just a `triggers:` list.
    for triggers in docs.iter().filter_map(|d| {
        if d["kind"].as_str() == Some("ScaledObject") {
            d["spec"]["triggers"].as_sequence()
        } else {
            d["triggers"].as_sequence()
        }
    }) {
        let triggers = triggers.clone();
        for (index, trigger) in triggers.iter().enumerate() {
            if trigger["type"].as_str() != Some(trigger_type) {
                continue;
            }
            let params = match trigger["authenticationRef"]["name"].as_str() {
                Some(name) => {
                    let params = auth_params(name);
                    assert!(
                        !params.is_empty(),
                        "docs/scalers/{trigger_type}.md: TriggerAuthentication {name} is not on the page"
                    );
                    params
                }
                None => Vec::new(),
            };
            let trigger: keda_api::ScaleTrigger = serde_yaml::from_value(trigger.clone())
                .expect("the trigger deserializes as KEDA's");
            examples.push((trigger, index, params));
        }
    }
    examples
}

/// Every parameter the registry declares for `trigger_type` is named (in backticks) in its
/// docs.
pub fn assert_parameters_documented(registry: &Registry, trigger_type: &str) {
    let text = doc_text(trigger_type);
    let factory = registry.get(trigger_type).expect("registered");
    for param in factory.params() {
        for name in param.names() {
            assert!(
                text.contains(&format!("`{name}`")),
                "docs/scalers/{trigger_type}.md does not document parameter `{name}`"
            );
        }
    }
}

/// Every parameter of `trigger_type` with a default has a row in its page's parameter table
/// (a line whose first cell names it) that shows the default as `` `value` `` (for the shared
/// HTTP authentication parameters: a row of docs/authentication.md's table).
pub fn assert_defaults_documented(registry: &Registry, trigger_type: &str) {
    let text = doc_text(trigger_type);
    let factory = registry.get(trigger_type).expect("registered");
    for param in factory.params() {
        let Some(default) = param.default else {
            continue;
        };
        let row = text.lines().find(|line| {
            line.starts_with('|')
                && line
                    .split('|')
                    .nth(1)
                    .is_some_and(|cell| cell.contains(&format!("`{}`", param.name)))
        });
        let row = row.unwrap_or_else(|| {
            panic!(
                "docs/scalers/{trigger_type}.md has no table row for parameter `{}`",
                param.name
            )
        });
        // The shared HTTP authentication block is documented once, in docs/authentication.md.
        let shown = row.contains(&format!("`{default}`"))
            || (row.contains("../authentication.md")
                && std::fs::read_to_string(docs_dir().join("authentication.md"))
                    .expect("docs/authentication.md")
                    .lines()
                    .any(|line| {
                        line.starts_with('|')
                            && line.contains(&format!("`{}`", param.name))
                            && line.contains(&format!("`{default}`"))
                    }));
        assert!(
            shown,
            "docs/scalers/{trigger_type}.md: the row of `{}` does not show its default `{default}`: {row}",
            param.name
        );
    }
}

/// How a test adapts the documented example to the local machine.
#[derive(Default)]
pub struct Setup<'a> {
    /// Metadata entries replacing the documented ones (an empty value removes the entry, which
    /// the parser treats as absent anyway).
    pub metadata: &'a [(&'a str, &'a str)],
    /// The scale target's resolved environment.
    pub env: &'a [(&'a str, &'a str)],
    /// Resolved TriggerAuthentication parameters.
    pub auth: &'a [(&'a str, &'a str)],
    /// A fixed clock.
    pub clock: Option<Clock>,
    /// The cluster view (pods, EndpointSlices) the scaler reads, for the scalers that need one.
    pub cluster: keda_scalers::cluster::ClusterHandle,
    /// Where vendors' fixed hosts (`api.datadoghq.com`, ...) are reached: the test's fake.
    pub vendor_endpoints: keda_scalers::http_client::VendorEndpoints,
}

/// A scaler built from its documented example through the registry, with its metric specs
/// already checked.
pub struct Harness {
    pub built: BuiltScaler,
    pub metric_name: String,
}

/// The conformance helper every scaler test calls: parses the documented example of
/// `trigger_type`, checks its parameters are documented, applies `setup`, builds the scaler
/// through the built-in registry, and checks its metric specs (External metrics named
/// `s<index>-...` with exactly one target quantity; Resource metrics for cpu/memory).
pub async fn conformance(trigger_type: &str, setup: Setup<'_>) -> Harness {
    let registry = Registry::builtin();
    assert_parameters_documented(&registry, trigger_type);
    let (trigger, index) = documented_trigger(trigger_type);
    let mut context = ScalerContext::from_trigger(&trigger, index);
    // The tests' certificates live anywhere (/etc/ssl, temp dirs): KEDA's reach.
    context.trigger_files = keda_scalers::files::TriggerFiles::new("/");
    context.scalable_name = "conformance".into();
    context.scalable_namespace = "default".into();
    for (k, v) in setup.metadata {
        context.metadata.insert(k.to_string(), v.to_string());
    }
    context.resolved_env = setup
        .env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<BTreeMap<_, _>>();
    context.auth_params = setup
        .auth
        .iter()
        .map(|(k, v)| (k.to_string(), Secret::new(*v)))
        .collect();
    if let Some(clock) = setup.clock {
        context.clock = clock;
    }
    context.cluster = setup.cluster;
    context.vendor_endpoints = setup.vendor_endpoints;
    let built = registry
        .build(context.clone())
        .await
        .unwrap_or_else(|e| panic!("{trigger_type}: the documented example does not build: {e}"));
    let specs = built.scaler().metric_specs();
    assert!(!specs.is_empty(), "{trigger_type}: no metric specs");
    let mut metric_name = String::new();
    for spec in &specs {
        match spec.type_.as_str() {
            "External" => {
                let external = spec.external.as_ref().expect("External spec has external");
                let name = &external.metric.name;
                assert!(
                    name.starts_with(&format!("s{index}-")),
                    "{trigger_type}: metric name {name} lacks the s{index}- prefix"
                );
                let t = &external.target;
                let quantities = [t.value.is_some(), t.average_value.is_some()];
                assert_eq!(quantities.iter().filter(|q| **q).count(), 1, "{t:?}");
                assert!(t.type_ == "AverageValue" || t.type_ == "Value", "{t:?}");
                if metric_name.is_empty() {
                    metric_name = name.clone();
                }
            }
            "Resource" => assert!(spec.resource.is_some()),
            "ContainerResource" => assert!(spec.container_resource.is_some()),
            other => panic!("{trigger_type}: unexpected metric type {other}"),
        }
    }
    Harness { built, metric_name }
}

impl Harness {
    /// Asks for the metric and asserts the exact value (and its HPA quantity) and activity.
    pub async fn expect(&self, value: f64, active: bool) {
        let report = self
            .built
            .scaler()
            .metrics_and_activity(&self.metric_name)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.metric_name));
        assert_eq!(report.values.len(), 1, "{report:?}");
        assert_eq!(report.values[0].name, self.metric_name);
        assert_eq!(
            report.values[0].value, value,
            "value of {}",
            self.metric_name
        );
        assert_eq!(report.values[0].quantity(), metric_value_quantity(value));
        assert_eq!(report.active, active, "activity at value {value}");
    }

    /// Asks for the metric and returns the error.
    pub async fn expect_error(&self) -> ScalerError {
        match self
            .built
            .scaler()
            .metrics_and_activity(&self.metric_name)
            .await
        {
            Ok(r) => panic!("expected an error, got {r:?}"),
            Err(e) => e,
        }
    }

    /// Closes the scaler (twice: it must be idempotent); afterwards a query either still
    /// works (stateless scalers) or fails with `Closed`.
    pub async fn close(self) {
        self.built.scaler().close().await;
        self.built.scaler().close().await;
        if let Err(e) = self
            .built
            .scaler()
            .metrics_and_activity(&self.metric_name)
            .await
        {
            assert!(matches!(e, ScalerError::Closed { .. }), "after close: {e}");
        }
    }
}

/// A Redis server of one test's own, on a free loopback port, stopped when dropped: tests that
/// change server-wide settings (`notify-keyspace-events`) or kill clients use it, never the
/// shared one. (Not every test binary that includes this module uses it.)
#[allow(dead_code)]
pub struct OwnRedis {
    /// `127.0.0.1:<port>`.
    pub address: String,
    /// A connection for driving the source and inspecting the server.
    pub connection: redis::aio::MultiplexedConnection,
    _server: tokio::process::Child,
}

#[allow(dead_code)]
impl OwnRedis {
    /// Sets `notify-keyspace-events` (the test's own server only).
    pub async fn set_notifications(&mut self, flags: &str) {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("notify-keyspace-events")
            .arg(flags)
            .query_async(&mut self.connection)
            .await
            .expect("CONFIG SET");
    }

    /// Pub/Sub connections the server holds (`CLIENT LIST TYPE pubsub`).
    pub async fn subscribers(&mut self) -> usize {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut self.connection)
            .await
            .expect("CLIENT LIST");
        list.lines().filter(|l| !l.trim().is_empty()).count()
    }

    /// Waits (at most 10 s) until the server holds `n` Pub/Sub connections; returns the count.
    pub async fn subscribers_become(&mut self, n: usize) -> usize {
        let mut seen = self.subscribers().await;
        for _ in 0..100 {
            if seen == n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            seen = self.subscribers().await;
        }
        seen
    }

    /// The ids of the connections named `name` (`CLIENT SETNAME`).
    pub async fn named(&mut self, name: &str) -> Vec<String> {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut self.connection)
            .await
            .expect("CLIENT LIST");
        let wanted = format!("name={name}");
        list.lines()
            .filter(|l| l.split(' ').any(|field| field == wanted))
            .filter_map(|l| l.split(' ').find_map(|f| f.strip_prefix("id=")))
            .map(str::to_string)
            .collect()
    }

    /// Waits (at most 10 s) until the server holds `n` connections named `name`; returns the
    /// count.
    pub async fn named_become(&mut self, name: &str, n: usize) -> usize {
        let mut seen = self.named(name).await.len();
        for _ in 0..100 {
            if seen == n {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            seen = self.named(name).await.len();
        }
        seen
    }

    /// Kills the connections named `name`; returns how many.
    pub async fn kill_named(&mut self, name: &str) -> usize {
        let mut killed = 0;
        for id in self.named(name).await {
            let n: usize = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(&id)
                .query_async(&mut self.connection)
                .await
                .expect("CLIENT KILL ID");
            killed += n;
        }
        killed
    }

    /// Kills every Pub/Sub connection (`CLIENT KILL TYPE pubsub`); returns how many.
    pub async fn kill_subscribers(&mut self) -> usize {
        redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut self.connection)
            .await
            .expect("CLIENT KILL")
    }
}

/// Starts a Redis server of the test's own with `notify-keyspace-events` set to `flags`, or
/// `None` (see [`service_or_skip`]) when `redis-server` is not installed.
#[allow(dead_code)]
pub async fn own_redis(test: &str, flags: &str) -> Option<OwnRedis> {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let address = format!("127.0.0.1:{port}");
    let attempt = async {
        let server = tokio::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--notify-keyspace-events", flags])
            .stdout(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        let client =
            redis::Client::open(format!("redis://{address}/")).map_err(|e| e.to_string())?;
        loop {
            if let Ok(connection) = client.get_multiplexed_async_connection().await {
                return Ok::<_, String>((server, connection));
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    let (server, connection) = service_or_skip(test, "redis-server", attempt).await?;
    Some(OwnRedis {
        address,
        connection,
        _server: server,
    })
}
