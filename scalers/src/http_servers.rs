//! The pooled client of a trigger that names several servers of one service (the addresses
//! of an Elasticsearch or OpenSearch cluster, the brokers of a Solace HA group): the one pooled
//! [`HttpClient`] of each server and its credentials, shared with every other trigger on that
//! server, and a position the reads fail over from. Triggers naming the same servers with the
//! same credentials share it, position included.

use std::sync::atomic::AtomicUsize;

use crate::context::ScalerContext;
use crate::error::ScalerError;
use crate::http_client::{self, HttpClient, HttpClientKey};
use crate::pool::Lease;

/// The key of [`Servers`]: the key of each server's client, in the trigger's order.
pub type ServersKey = Vec<HttpClientKey>;

/// The clients of several servers, in the order of their key.
pub struct Servers {
    clients: Vec<Lease<HttpClientKey, HttpClient>>,
    position: AtomicUsize,
}

impl Servers {
    /// The client of the server at `index` (the key's order).
    pub fn get(&self, index: usize) -> Option<&HttpClient> {
        self.clients.get(index).map(|lease| &**lease)
    }

    /// How many servers.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Where the reads start: the next server of a round robin, or the one that answered
    /// last (each source says which).
    pub fn position(&self) -> &AtomicUsize {
        &self.position
    }
}

/// A lease on the clients of `key`, leasing each server's client if no trigger holds them.
/// Does not connect.
///
/// # Errors
/// A server's client cannot be built (TLS material, named by parameter).
pub async fn lease(
    ctx: &ScalerContext,
    key: ServersKey,
) -> Result<Lease<ServersKey, Servers>, ScalerError> {
    ctx.clients
        .pool::<ServersKey, Servers>()
        .get_or_connect(key.clone(), || async {
            let mut clients = Vec::with_capacity(key.len());
            for server in key {
                clients.push(http_client::lease(ctx, server).await?);
            }
            Ok(Servers {
                clients,
                position: AtomicUsize::new(0),
            })
        })
        .await
}
