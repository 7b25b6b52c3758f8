//! The connection layer: one server, a Sentinel-watched primary, or a Redis Cluster,
//! behind one [`Conn`] that every call goes through.
//!
//! - **One server** (`redis://`): multiplexed connections to the URL's server.
//! - **Sentinel** (`redis+sentinel://`): every new connection asks the sentinels
//!   which server is the primary (`SENTINEL MASTERS`, then `ROLE` on that server,
//!   both through the driver's [`SentinelClient`]) and connects there. A call that
//!   finds its connection broken, timed out, or on a server that is no longer the
//!   primary (`READONLY`) makes the store forget all of its connections, so the next
//!   calls ask the sentinels again and follow the failover.
//! - **Cluster** (`redis+cluster://`): the driver's cluster client, which keeps the
//!   slot map and one connection per node, refreshing the map on `MOVED` and after a
//!   node's connection breaks. Every command of a store is routed to the primary
//!   that owns its prefix's slot (the slot of `{prefix}`), so `WAIT` goes to that
//!   primary alone, on the connection that carried the write. The client's own
//!   retries are off: it would send a call again after a connection broke mid-way,
//!   when it may have been applied (a claim applied twice strands its first batch
//!   until the leases expire). A call answered `MOVED` (not applied) is sent once
//!   more after the map is refreshed; anything else answers the caller, classified.

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{
    AsyncConnectionConfig, Client, Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, FromRedisValue,
    ProtocolVersion, RedisConnectionInfo, RedisError, RedisResult, Value,
};
use tenure_core::{Error, Result};

use crate::config::Topology;

/// What a store connects to, built once from its URL.
pub(crate) enum Target {
    /// One server.
    Node(Client),
    /// The primary the sentinels name.
    Sentinel(tokio::sync::Mutex<SentinelClient>),
    /// A Redis Cluster, and the login of its nodes (for the pub/sub listener's own
    /// connection).
    Cluster(redis::cluster::ClusterClient, RedisConnectionInfo),
}

/// One multiplexed connection of a store.
#[derive(Clone)]
pub(crate) enum Conn {
    /// To one server (also the Sentinel-named primary).
    Node(MultiplexedConnection),
    /// To a cluster: one connection per node inside.
    Cluster(ClusterConnection),
}

/// The cluster slot of `key` (CRC16/XMODEM of its hash tag, modulo 16384), as Redis
/// Cluster computes it.
pub(crate) fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            rest.iter()
                .position(|b| *b == b'}')
                .filter(|close| *close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(bytes);
    let mut crc: u16 = 0;
    for b in tagged {
        crc ^= u16::from(*b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

fn tcp(host: &str, port: u16, redis: &RedisConnectionInfo) -> ConnectionInfo {
    ConnectionInfo {
        addr: ConnectionAddr::Tcp(host.to_owned(), port),
        redis: redis.clone(),
    }
}

impl Target {
    /// Builds the client for `topology`; sends nothing.
    pub(crate) fn new(
        topology: &Topology,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> Result<Target> {
        let invalid = |e: RedisError| Error::invalid("url", e.to_string());
        Ok(match topology {
            Topology::Node(url) => Target::Node(Client::open(url.as_str()).map_err(invalid)?),
            Topology::Sentinel {
                sentinels,
                master,
                node,
                sentinel,
            } => {
                let infos = sentinels
                    .iter()
                    .map(|(h, p)| tcp(h, *p, sentinel))
                    .collect::<Vec<_>>();
                let client = SentinelClient::build(
                    infos,
                    master.clone(),
                    Some(SentinelNodeConnectionInfo {
                        tls_mode: None,
                        redis_connection_info: Some(node.clone()),
                    }),
                    SentinelServerType::Master,
                )
                .map_err(invalid)?;
                Target::Sentinel(tokio::sync::Mutex::new(client))
            }
            Topology::Cluster { nodes, node } => {
                let infos = nodes.iter().map(|(h, p)| tcp(h, *p, node));
                let client = ClusterClientBuilder::new(infos)
                    .retries(0)
                    .connection_timeout(connect_timeout)
                    .response_timeout(response_timeout)
                    .build()
                    .map_err(invalid)?;
                Target::Cluster(client, node.clone())
            }
        })
    }

    /// True when one broken connection means every connection should be replaced:
    /// behind Sentinel the primary may have moved, and connections left to the old
    /// one would keep writing there.
    pub(crate) fn forgets_all_on_failure(&self) -> bool {
        matches!(self, Target::Sentinel(_))
    }

    /// The client of the primary now: the URL's server, or the one the sentinels
    /// name (asked now, within `timeout`).
    async fn primary(&self, timeout: Duration) -> RedisResult<Client> {
        match self {
            Target::Node(c) => Ok(c.clone()),
            Target::Sentinel(s) => {
                let ask = async { s.lock().await.async_get_client().await };
                match tokio::time::timeout(timeout, ask).await {
                    Ok(answer) => answer,
                    Err(_) => Err(timed_out("asking the sentinels for the primary")),
                }
            }
            Target::Cluster(..) => Err(RedisError::from((
                ErrorKind::ClientError,
                "a cluster has no single primary",
            ))),
        }
    }

    /// Opens one connection.
    pub(crate) async fn open(
        &self,
        config: &AsyncConnectionConfig,
        timeout: Duration,
    ) -> RedisResult<Conn> {
        match self {
            Target::Cluster(c, _) => {
                let open = c.get_async_connection();
                match tokio::time::timeout(timeout, open).await {
                    Ok(conn) => conn.map(Conn::Cluster),
                    Err(_) => Err(timed_out("connecting to the cluster")),
                }
            }
            _ => {
                let client = self.primary(timeout).await?;
                client
                    .get_multiplexed_async_connection_with_config(config)
                    .await
                    .map(Conn::Node)
            }
        }
    }

    /// A RESP3 client of the server that carries `slot`'s sharded pub/sub: the
    /// primary (asked now), or the cluster primary owning the slot.
    pub(crate) async fn pubsub_node(&self, slot: u16, timeout: Duration) -> RedisResult<Client> {
        let info = match self {
            Target::Cluster(c, login) => {
                let mut conn = match tokio::time::timeout(timeout, c.get_async_connection()).await {
                    Ok(conn) => conn?,
                    Err(_) => return Err(timed_out("connecting to the cluster")),
                };
                let shards: Value = conn
                    .route_command(
                        &redis::cmd("CLUSTER").arg("SLOTS").clone(),
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
                    )
                    .await?;
                let (host, port) = slot_owner(&shards, slot).ok_or_else(|| {
                    RedisError::from((ErrorKind::ClusterDown, "no primary owns the slot"))
                })?;
                tcp(&host, port, login)
            }
            _ => self.primary(timeout).await?.get_connection_info().clone(),
        };
        let mut info = info;
        info.redis.protocol = ProtocolVersion::RESP3;
        Client::open(info)
    }
}

/// The primary's `(host, port)` for `slot` in a `CLUSTER SLOTS` answer.
fn slot_owner(answer: &Value, slot: u16) -> Option<(String, u16)> {
    let Value::Array(ranges) = answer else {
        return None;
    };
    ranges.iter().find_map(|range| {
        let Value::Array(fields) = range else {
            return None;
        };
        let (start, end) = (
            i64::from_redis_value(fields.first()?).ok()?,
            i64::from_redis_value(fields.get(1)?).ok()?,
        );
        if !(start..=end).contains(&i64::from(slot)) {
            return None;
        }
        let Value::Array(primary) = fields.get(2)? else {
            return None;
        };
        let host = String::from_redis_value(primary.first()?).ok()?;
        let port = u16::try_from(i64::from_redis_value(primary.get(1)?).ok()?).ok()?;
        Some((host, port))
    })
}

fn timed_out(what: &str) -> RedisError {
    RedisError::from(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("timed out {what}"),
    ))
}

impl Conn {
    /// Sends `cmd`: on one server as it is; on a cluster to the primary owning
    /// `slot`, once more after a `MOVED` (which the cluster client answers by
    /// refreshing its slot map before the next request).
    pub(crate) async fn query<T: FromRedisValue>(
        &mut self,
        cmd: &Cmd,
        slot: u16,
    ) -> RedisResult<T> {
        match self {
            Conn::Node(c) => cmd.query_async(c).await,
            Conn::Cluster(c) => {
                let route = || {
                    RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
                        slot,
                        SlotAddr::Master,
                    )))
                };
                let value = match c.route_command(cmd, route()).await {
                    Err(e) if e.kind() == ErrorKind::Moved => c.route_command(cmd, route()).await,
                    other => other,
                }?;
                T::from_owned_redis_value(value)
            }
        }
    }
}
