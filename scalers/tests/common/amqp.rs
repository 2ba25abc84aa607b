//! The tests' own AMQP side of the local RabbitMQ (127.0.0.1:5672, guest/guest): declare,
//! publish with confirms, take, delete. Shared by the scaler's tests and the operator's
//! ScaledJob tests, which include this file next to `common/mod.rs` (as `mod common`).

use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};

/// The broker's AMQP address.
pub const AMQP_ADDRESS: &str = "127.0.0.1:5672";

/// A connection and a confirming channel to the local broker.
pub struct AmqpBroker {
    /// The connection (more channels, or close).
    pub connection: Connection,
    /// A channel in confirm mode.
    pub channel: Channel,
}

impl AmqpBroker {
    /// Connects to `vhost` (`/` by default), or skips (fails in CI) without a broker.
    pub async fn connect_or_skip(test: &str, vhost: &str) -> Option<Self> {
        let url = format!(
            "amqp://guest:guest@{AMQP_ADDRESS}/{}",
            keda_scalers::scalers::rabbitmq::url::query_escape(vhost)
        );
        let attempt = Connection::connect(&url, ConnectionProperties::default());
        let service = format!("RabbitMQ at {AMQP_ADDRESS}");
        let connection = crate::common::service_or_skip(test, &service, attempt).await?;
        let channel = connection.create_channel().await.expect("channel");
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .expect("confirm.select");
        Some(Self {
            connection,
            channel,
        })
    }

    /// Declares `queue` (durable defaults).
    pub async fn declare(&self, queue: &str) {
        self.channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .expect("queue.declare");
    }

    /// Publishes `n` messages and waits for the broker's confirms, so a passive declare
    /// afterwards sees them.
    pub async fn publish(&self, queue: &str, n: usize) {
        for i in 0..n {
            self.channel
                .basic_publish(
                    "".into(),
                    queue.into(),
                    BasicPublishOptions::default(),
                    format!("m{i}").as_bytes(),
                    BasicProperties::default(),
                )
                .await
                .expect("publish")
                .await
                .expect("confirm");
        }
    }

    /// Takes (and acknowledges) `n` messages, as `n` consumers starting would.
    pub async fn take(&self, queue: &str, n: usize) {
        for _ in 0..n {
            let got = self
                .channel
                .basic_get(queue.into(), BasicGetOptions { no_ack: true })
                .await
                .expect("basic.get");
            assert!(got.is_some(), "a message to take");
        }
    }

    /// Deletes `queue`.
    pub async fn delete(&self, queue: &str) {
        self.channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await
            .expect("queue.delete");
    }

    /// Closes the connection.
    pub async fn close(self) {
        let _ = self.connection.close(200, "OK".into()).await;
    }
}
