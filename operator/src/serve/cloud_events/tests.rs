use super::*;

fn spec(yaml: &str) -> CloudEventSourceSpec {
    serde_yaml::from_str(yaml).expect("spec parses")
}

/// What a hostile sink's answers carry.
const MARKER: &str = "SECRET-MARKER-5e1b";

/// A sink on loopback answering `500` with [`MARKER`] in the body and the media type; and a
/// loopback address nobody listens on. Returns both base URLs.
async fn hostile_sink() -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let refused = closed.local_addr().expect("addr");
    drop(closed);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // The head, then the JSON body (the events here are small: one read).
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let body = format!("<html>token={MARKER}</html>");
                let answer = format!(
                    "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/{MARKER}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    (base, format!("http://{refused}"))
}

/// Log lines, as the operator's subscriber would write them (level and target first).
#[derive(Clone, Default)]
struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().expect("lock"))
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// Issue 30, finding 5, for CloudEvent sinks: a `CloudEventSource`'s sink is a URL its
/// author chose, so what it answers (a body, a media type) and what the HTTP client's
/// error chain holds (the URL with its query and credentials, the library's text) must not
/// reach the operator's logs at info or warn level: those show the status code, the body's
/// size and the kind of failure, as the scalers' errors do. The answer is logged at debug
/// level on target `keda_scalers::remote` only.
#[tokio::test]
async fn a_hostile_sinks_answers_are_not_logged_above_debug() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (sink, nobody) = hostile_sink().await;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let (outcomes, _outcomes_rx) = mpsc::channel(ATTEMPTS as usize * 2);
    let metrics = EmitterMetrics::default();
    // (case, sink URL, the kind of failure the warning names, the answer at debug level)
    for (case, uri, kind, answer_at_debug) in [
        (
            "refused",
            format!("{nobody}/events?token={MARKER}"),
            "connection refused",
            false,
        ),
        (
            "500",
            format!("{sink}/events"),
            "answered HTTP 500 Internal Server Error (37 bytes)",
            true,
        ),
    ] {
        let worker = Worker {
            http: reqwest::Client::new(),
            uri,
            cluster_name: "kind".to_string(),
            source: "/kind/keda/keda".to_string(),
            name: "team/hostile".to_string(),
            key: WorkerKey {
                uid: "uid".to_string(),
                generation: 1,
            },
            first_retry: Duration::from_millis(1),
            metrics: metrics.clone(),
            outcomes: outcomes.clone(),
        };
        let event = Emitted {
            event_type: CloudEventType::ScaledObjectFailed,
            object_type: "scaledobject".to_string(),
            namespace: "team".to_string(),
            name: "hostile".to_string(),
            reason: "ScaledObjectCheckFailed".to_string(),
            message: "failed".to_string(),
            time: jiff::Timestamp::now(),
        };
        assert!(!worker.deliver(&event).await, "{case}: not delivered");
        let lines = captured.lines();
        let warnings: Vec<&String> = lines
            .iter()
            .filter(|l| l.contains("sending a CloudEvent failed"))
            .collect();
        for line in &lines {
            assert!(
                line.starts_with("DEBUG") || !line.contains(MARKER),
                "{case}: logged above debug level: {line}"
            );
        }
        assert_eq!(warnings.len(), ATTEMPTS as usize, "{case}: {lines:#?}");
        assert!(
            warnings.iter().all(|l| l.contains(kind)),
            "{case}: the warnings name the kind of failure ({kind}): {lines:#?}"
        );
        if answer_at_debug {
            assert!(
                lines
                    .iter()
                    .any(|l| l.starts_with("DEBUG keda_scalers::remote") && l.contains(MARKER)),
                "{case}: the answer is at debug level, for the operator's administrator: {lines:#?}"
            );
        }
        captured.0.lock().expect("lock").clear();
    }
}

#[test]
fn the_active_condition_says_why_a_source_sends_nothing() {
    let good = spec("destination: {http: {uri: 'http://sink'}}");
    let active = desired_active(&good, false);
    assert_eq!(
        (active.status.as_str(), active.reason.as_deref()),
        ("True", Some("CloudEventSourceActive"))
    );
    let failed = desired_active(&good, true);
    assert_eq!(
        (
            failed.status.as_str(),
            failed.reason.as_deref(),
            failed.message.as_deref()
        ),
        (
            "False",
            Some("CloudEventSourceFailed"),
            Some("Failed to send events to the configured destination")
        )
    );
    let azure = desired_active(
        &spec("destination: {azureEventGridTopic: {endpoint: 'https://t'}}"),
        false,
    );
    assert_eq!(azure.status, "False");
    assert_eq!(azure.reason.as_deref(), Some("CloudEventSourceInvalid"));
    assert!(
        azure
            .message
            .as_deref()
            .is_some_and(|m| m.contains("spec.destination.azureEventGridTopic")),
        "{azure:?}"
    );
}
