//! moto, the AWS emulator, for the aws-* scaler tests: the shared server `scripts/services.sh`
//! runs on 127.0.0.1:5000 (no authentication: any key is accepted), and servers of the tests'
//! own that check signatures and IAM permissions the way AWS does (`INITIAL_NO_AUTH_ACTION_COUNT`:
//! the first requests, which create the IAM user, its key and a role, are not checked; every
//! later one is, with botocore's Signature Version 4), stopped when dropped.
//!
//! The tests drive moto through keda-rs' own AWS client (`keda_scalers::aws`), so the requests
//! that set up a queue are signed the same way as the scaler's.

use std::process::Stdio;
use std::time::Duration;

use keda_scalers::aws::client::{AwsClient, AwsClientKey, Input, Protocol, SQS, Service, Signer};
use keda_scalers::aws::{AwsError, Credentials};
use keda_scalers::{Clock, Secret};

/// The shared server.
pub const MOTO: &str = "http://127.0.0.1:5000";
/// The region the tests use.
pub const REGION: &str = "eu-west-1";
/// moto's default account.
pub const ACCOUNT: &str = "123456789012";

/// IAM over its query protocol (moto routes a request by its credential scope).
pub const IAM: Service = Service {
    signing_name: "iam",
    endpoint_prefix: "iam",
    protocol: Protocol::Query {
        version: "2010-05-08",
    },
    display: "IAM",
};

/// Credentials the shared server accepts (it checks none).
pub fn any_credentials() -> Credentials {
    Credentials {
        access_key_id: "AKIAKEDARSTEST".into(),
        secret_access_key: Secret::new("keda-rs-test-secret-key"),
        session_token: None,
    }
}

/// Checks that the shared server answers, or skips (fails under `CI=true`).
pub async fn shared_or_skip(test: &str) -> Option<()> {
    let attempt = async {
        let stream = tokio::net::TcpStream::connect("127.0.0.1:5000").await?;
        drop(stream);
        Ok::<_, std::io::Error>(())
    };
    crate::common::service_or_skip(test, &format!("moto at {MOTO}"), attempt).await
}

/// A client of `service` at `endpoint` signing with `credentials`.
pub fn client(service: Service, endpoint: &str, credentials: Credentials) -> AwsClient {
    AwsClient::new(AwsClientKey {
        service,
        region: if service == IAM {
            "us-east-1".into()
        } else {
            REGION.into()
        },
        endpoint: url::Url::parse(endpoint).expect("endpoint"),
        signer: Signer::Static(credentials),
        timeout: Duration::from_secs(10),
    })
    .expect("client")
}

/// Calls a JSON operation and returns the answer.
pub async fn json(
    client: &AwsClient,
    operation: &str,
    request: serde_json::Value,
) -> Result<serde_json::Value, AwsError> {
    let body = client
        .call(operation, &Input::Json(&request), &Clock::system())
        .await?;
    Ok(serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null))
}

/// Calls a query operation and returns the XML answer.
pub async fn query(
    client: &AwsClient,
    operation: &str,
    params: &[(&str, &str)],
) -> Result<String, AwsError> {
    let body = client
        .call(operation, &Input::Query(params), &Clock::system())
        .await?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Creates queue `name` (with `attributes`) on the server at `endpoint` and returns its URL.
pub async fn create_queue(
    endpoint: &str,
    credentials: Credentials,
    name: &str,
    attributes: serde_json::Value,
) -> String {
    let sqs = client(SQS, endpoint, credentials);
    let answer = json(
        &sqs,
        "CreateQueue",
        serde_json::json!({"QueueName": name, "Attributes": attributes}),
    )
    .await
    .unwrap_or_else(|e| panic!("CreateQueue {name}: {e}"));
    answer["QueueUrl"]
        .as_str()
        .unwrap_or_else(|| panic!("CreateQueue answered {answer}"))
        .to_string()
}

/// Sends `count` messages, each delayed by `delay_seconds`.
pub async fn send(sqs: &AwsClient, queue_url: &str, count: usize, delay_seconds: u32) {
    for i in 0..count {
        json(
            sqs,
            "SendMessage",
            serde_json::json!({
                "QueueUrl": queue_url,
                "MessageBody": format!("message {i}"),
                "DelaySeconds": delay_seconds,
            }),
        )
        .await
        .unwrap_or_else(|e| panic!("SendMessage: {e}"));
    }
}

/// Receives up to `count` messages (they stay in flight for 10 minutes) and returns how many.
pub async fn receive(sqs: &AwsClient, queue_url: &str, count: usize) -> usize {
    let answer = json(
        sqs,
        "ReceiveMessage",
        serde_json::json!({
            "QueueUrl": queue_url,
            "MaxNumberOfMessages": count,
            "VisibilityTimeout": 600,
        }),
    )
    .await
    .unwrap_or_else(|e| panic!("ReceiveMessage: {e}"));
    answer["Messages"].as_array().map_or(0, Vec::len)
}

/// A moto server of the test's own that authenticates every request after the first
/// `unauthenticated` ones.
pub struct OwnMoto {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    child: tokio::process::Child,
}

impl Drop for OwnMoto {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// Starts a server on a free loopback port, or skips (fails under `CI=true`) when the
/// `moto_server` binary is missing.
pub async fn own_or_skip(test: &str, unauthenticated: usize) -> Option<OwnMoto> {
    let attempt = async {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = tokio::process::Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", unauthenticated.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let own = OwnMoto {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        };
        // moto takes a few seconds to start on a loaded machine.
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(own);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(std::io::Error::other(format!(
            "moto_server did not listen on 127.0.0.1:{port} within 30 s"
        )))
    };
    // Not `service_or_skip`: starting takes longer than its 3 s.
    match attempt.await {
        Ok(own) => Some(own),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: moto_server is required in CI: {e}")
        }
        Err(e) => {
            eprintln!("skipping {test}: no moto_server ({e})");
            None
        }
    }
}

/// The text of the first `<name>` element of an XML answer.
pub fn xml_field(xml: &str, name: &str) -> String {
    let doc = roxmltree::Document::parse(xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    doc.descendants()
        .find(|n| n.has_tag_name(name))
        .and_then(|n| n.text())
        .unwrap_or_else(|| panic!("no {name} in {xml}"))
        .to_string()
}

/// What [`iam_setup`] created.
pub struct IamSetup {
    /// The user's access key.
    pub user: Credentials,
    /// A role the user may assume, allowed everything.
    pub role_arn: String,
}

/// Five unauthenticated IAM calls: a user allowed `user_actions` (e.g. `["*"]`), its access
/// key, and a role it may assume, allowed everything.
pub async fn iam_setup(endpoint: &str, user_actions: &[&str]) -> IamSetup {
    let iam = client(IAM, endpoint, any_credentials());
    let allow = |actions: &[&str]| {
        serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}],
        })
        .to_string()
    };
    let user_policy = allow(user_actions);
    let allow_all = allow(&["*"]);
    let trust = format!(
        r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"AWS":"arn:aws:iam::{ACCOUNT}:user/keda"}},"Action":"sts:AssumeRole"}}]}}"#
    );
    let call = |operation: &'static str, params: Vec<(&'static str, String)>| {
        let iam = &iam;
        async move {
            let params: Vec<(&str, &str)> = params.iter().map(|(k, v)| (*k, v.as_str())).collect();
            query(iam, operation, &params)
                .await
                .unwrap_or_else(|e| panic!("{operation}: {e}"))
        }
    };
    call("CreateUser", vec![("UserName", "keda".into())]).await;
    call(
        "PutUserPolicy",
        vec![
            ("UserName", "keda".into()),
            ("PolicyName", "user".into()),
            ("PolicyDocument", user_policy),
        ],
    )
    .await;
    let key = call("CreateAccessKey", vec![("UserName", "keda".into())]).await;
    let role = call(
        "CreateRole",
        vec![
            ("RoleName", "keda-reader".into()),
            ("AssumeRolePolicyDocument", trust),
        ],
    )
    .await;
    call(
        "PutRolePolicy",
        vec![
            ("RoleName", "keda-reader".into()),
            ("PolicyName", "all".into()),
            ("PolicyDocument", allow_all),
        ],
    )
    .await;
    IamSetup {
        user: Credentials {
            access_key_id: xml_field(&key, "AccessKeyId"),
            secret_access_key: Secret::new(xml_field(&key, "SecretAccessKey")),
            session_token: None,
        },
        role_arn: xml_field(&role, "Arn"),
    }
}
