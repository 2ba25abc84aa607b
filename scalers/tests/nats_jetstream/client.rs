//! A minimal NATS client for driving JetStream in tests: the text protocol (CONNECT, SUB, PUB,
//! MSG, PING/PONG) over one TCP connection, enough to call the JetStream API by request/reply,
//! publish, fetch from a pull consumer and acknowledge. Every wait is bounded.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// Bound of every exchange with the server.
const WAIT: Duration = Duration::from_secs(5);
const INBOX: &str = "_INBOX.keda-rs-test";

/// A message delivered to the test's inbox.
pub struct Delivered {
    /// The subject to publish `+ACK` to.
    pub reply: String,
}

/// One connection to a NATS server.
pub struct NatsClient {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    next: u64,
}

impl NatsClient {
    /// Connects to `address` (`host:port`) and subscribes to the test's inbox.
    pub async fn connect(address: &str) -> Result<Self, String> {
        Self::connect_as(address, None).await
    }

    /// [`connect`](Self::connect) with a user name and password.
    pub async fn connect_as(address: &str, user: Option<(&str, &str)>) -> Result<Self, String> {
        let stream = tokio::time::timeout(WAIT, TcpStream::connect(address))
            .await
            .map_err(|_| format!("connecting to {address} timed out"))?
            .map_err(|e| format!("connecting to {address}: {e}"))?;
        let (read, writer) = stream.into_split();
        let mut client = Self {
            reader: BufReader::new(read),
            writer,
            next: 0,
        };
        let info = client.line().await?;
        if !info.starts_with("INFO") {
            return Err(format!("not a NATS server at {address}: {info}"));
        }
        let credentials = user
            .map(|(u, p)| format!(",\"user\":{},\"pass\":{}", json!(u), json!(p)))
            .unwrap_or_default();
        client
            .send(&format!(
                "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":false{credentials}}}\r\nSUB {INBOX}.> 1\r\nPING\r\n"
            ))
            .await?;
        loop {
            let line = client.line().await?;
            if line == "PONG" {
                return Ok(client);
            }
            if line.starts_with("-ERR") {
                return Err(line);
            }
        }
    }

    async fn send(&mut self, text: &str) -> Result<(), String> {
        self.writer
            .write_all(text.as_bytes())
            .await
            .map_err(|e| e.to_string())
    }

    async fn line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        let n = tokio::time::timeout(WAIT, self.reader.read_line(&mut line))
            .await
            .map_err(|_| "no answer from NATS within 5 s".to_string())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("NATS closed the connection".to_string());
        }
        Ok(line.trim_end().to_string())
    }

    fn publish_frame(subject: &str, reply: Option<&str>, payload: &[u8]) -> Vec<u8> {
        let mut frame = match reply {
            Some(reply) => format!("PUB {subject} {reply} {}\r\n", payload.len()),
            None => format!("PUB {subject} {}\r\n", payload.len()),
        }
        .into_bytes();
        frame.extend_from_slice(payload);
        frame.extend_from_slice(b"\r\n");
        frame
    }

    /// The next message for the test's subscription (answering PINGs meanwhile): its subject,
    /// reply subject and payload.
    async fn receive(&mut self) -> Result<(String, Option<String>, Vec<u8>), String> {
        loop {
            let line = self.line().await?;
            if line == "PING" {
                self.send("PONG\r\n").await?;
                continue;
            }
            if line.starts_with("-ERR") {
                return Err(line);
            }
            let Some(rest) = line.strip_prefix("MSG ") else {
                continue;
            };
            // MSG <subject> <sid> [reply-to] <#bytes>
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let size: usize = fields
                .last()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("bad MSG line: {line}"))?;
            let mut payload = vec![0; size + 2];
            tokio::time::timeout(WAIT, self.reader.read_exact(&mut payload))
                .await
                .map_err(|_| "payload timed out".to_string())?
                .map_err(|e| e.to_string())?;
            payload.truncate(size);
            let reply_to = (fields.len() == 4).then(|| fields[2].to_string());
            return Ok((fields[0].to_string(), reply_to, payload));
        }
    }

    /// The next message on the inbox subject `reply`.
    async fn answer(&mut self, reply: &str) -> Result<Vec<u8>, String> {
        loop {
            let (subject, _, payload) = self.receive().await?;
            if subject == reply {
                return Ok(payload);
            }
        }
    }

    fn inbox(&mut self) -> String {
        self.next += 1;
        format!("{INBOX}.{}", self.next)
    }

    /// Publishes `payload` to `subject` and returns the JSON answer.
    pub async fn request(&mut self, subject: &str, payload: &[u8]) -> Result<Value, String> {
        let reply = self.inbox();
        let frame = Self::publish_frame(subject, Some(&reply), payload);
        self.writer
            .write_all(&frame)
            .await
            .map_err(|e| e.to_string())?;
        let answer = self.answer(&reply).await?;
        let value: Value = serde_json::from_slice(&answer)
            .map_err(|e| format!("{subject}: not JSON ({e}): {answer:?}"))?;
        if let Some(error) = value.get("error") {
            return Err(format!("{subject}: {error}"));
        }
        Ok(value)
    }

    /// Calls the JetStream API `$JS.API.<api>` with `body`.
    pub async fn js(&mut self, api: &str, body: Value) -> Result<Value, String> {
        self.request(&format!("$JS.API.{api}"), body.to_string().as_bytes())
            .await
    }

    /// Creates stream `name` on subjects `<name>.>` with `replicas` replicas.
    pub async fn create_stream(&mut self, name: &str, replicas: u8) -> Result<(), String> {
        self.js(
            &format!("STREAM.CREATE.{name}"),
            json!({"name": name, "subjects": [format!("{name}.>")], "num_replicas": replicas}),
        )
        .await
        .map(drop)
    }

    /// Creates the durable pull consumer `name` of `stream` with explicit acks.
    pub async fn create_consumer(
        &mut self,
        stream: &str,
        name: &str,
        replicas: u8,
    ) -> Result<(), String> {
        self.js(
            &format!("CONSUMER.DURABLE.CREATE.{stream}.{name}"),
            json!({"stream_name": stream, "config": {
                "durable_name": name, "ack_policy": "explicit", "num_replicas": replicas}}),
        )
        .await
        .map(drop)
    }

    /// Deletes stream `name` (and its consumers).
    pub async fn delete_stream(&mut self, name: &str) -> Result<(), String> {
        self.js(&format!("STREAM.DELETE.{name}"), json!({}))
            .await
            .map(drop)
    }

    /// Publishes `count` messages to stream `stream`, each acknowledged by JetStream before the
    /// next, so all are stored when this returns.
    pub async fn publish(&mut self, stream: &str, count: usize) -> Result<(), String> {
        for i in 0..count {
            let ack = self
                .request(&format!("{stream}.work"), format!("job {i}").as_bytes())
                .await?;
            if ack.get("seq").is_none() {
                return Err(format!("no publish ack: {ack}"));
            }
        }
        Ok(())
    }

    /// Fetches `count` messages (at least that many must be pending) from the pull consumer,
    /// without acknowledging them.
    pub async fn fetch(
        &mut self,
        stream: &str,
        consumer: &str,
        count: usize,
    ) -> Result<Vec<Delivered>, String> {
        let reply = self.inbox();
        let body = json!({"batch": count}).to_string();
        let frame = Self::publish_frame(
            &format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
            Some(&reply),
            body.as_bytes(),
        );
        self.writer
            .write_all(&frame)
            .await
            .map_err(|e| e.to_string())?;
        let mut delivered = Vec::new();
        // A delivered message keeps its own subject; its reply subject is where to ack it.
        while delivered.len() < count {
            if let (_, Some(ack), _) = self.receive().await?
                && ack.starts_with("$JS.ACK.")
            {
                delivered.push(Delivered { reply: ack });
            }
        }
        Ok(delivered)
    }

    /// Acknowledges a delivered message (and waits until the server confirms it).
    pub async fn ack(&mut self, message: &Delivered) -> Result<(), String> {
        // An ack with a reply subject is confirmed by an empty message.
        let reply = self.inbox();
        let frame = Self::publish_frame(&message.reply, Some(&reply), b"+ACK");
        self.writer
            .write_all(&frame)
            .await
            .map_err(|e| e.to_string())?;
        self.answer(&reply).await.map(drop)
    }
}
