//! A throwaway Redis Cluster made by `redis-cli --cluster create` over
//! [`TempRedis`] nodes on free loopback ports (each with its cluster bus port free).

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use super::servers::{ask, eventually, free_port, have, info_field, TempRedis};

/// A Redis Cluster of `primaries` primaries with `replicas` replicas each, made by
/// `redis-cli --cluster create`.
pub struct TempCluster {
    /// The nodes by port.
    pub nodes: HashMap<u16, TempRedis>,
    /// The node ports in start order.
    pub ports: Vec<u16>,
}

impl TempCluster {
    /// Starts the nodes (`--cluster-node-timeout` as given) and creates the
    /// cluster; waits until every node reports `cluster_state:ok` and every replica
    /// is linked. `None` (after printing why) without `redis-server` or `redis-cli`.
    pub async fn start(
        primaries: usize,
        replicas: usize,
        node_timeout: Duration,
        args: &[&str],
    ) -> Option<TempCluster> {
        if !have("redis-server") || !have("redis-cli") {
            return None;
        }
        let timeout = node_timeout.as_millis().to_string();
        let mut node_args: Vec<&str> = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout,
        ];
        node_args.extend(args);
        let mut nodes = HashMap::new();
        let mut ports = Vec::new();
        for _ in 0..primaries * (1 + replicas) {
            let port = free_port(true);
            nodes.insert(port, TempRedis::data_node(port, &node_args).await);
            ports.push(port);
        }
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for p in &ports {
            create.arg(format!("127.0.0.1:{p}"));
        }
        let out = create
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli runs");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = TempCluster { nodes, ports };
        cluster.wait_healthy().await;
        Some(cluster)
    }

    /// Waits until every running node reports `cluster_state:ok`, every replica is
    /// linked, and all of them agree on the primaries.
    pub async fn wait_healthy(&self) {
        let ports: Vec<u16> = self.nodes.keys().copied().collect();
        eventually(Duration::from_secs(60), "the cluster to be healthy", || {
            let ports = ports.clone();
            async move {
                for p in &ports {
                    let info: String = ask(*p, redis::cmd("CLUSTER").arg("INFO")).await?;
                    if !info.contains("cluster_state:ok") {
                        return None;
                    }
                    if info_field(*p, "replication", "role").await?.as_str() == "slave"
                        && info_field(*p, "replication", "master_link_status")
                            .await?
                            .as_str()
                            != "up"
                    {
                        return None;
                    }
                }
                Some(())
            }
        })
        .await;
    }

    /// `redis+cluster://` naming every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The port of the primary serving `slot`, as the first node that answers
    /// `CLUSTER SLOTS` sees it.
    pub async fn primary_of(&self, slot: u16) -> Option<u16> {
        for p in &self.ports {
            if self.nodes.get(p).is_none_or(|n| n.pid().is_none()) {
                continue;
            }
            let Some(ranges) =
                ask::<Vec<redis::Value>>(*p, redis::cmd("CLUSTER").arg("SLOTS")).await
            else {
                continue;
            };
            for range in ranges {
                let redis::Value::Array(f) = range else {
                    continue;
                };
                let start: i64 = redis::from_redis_value(&f[0]).ok()?;
                let end: i64 = redis::from_redis_value(&f[1]).ok()?;
                if (start..=end).contains(&i64::from(slot)) {
                    let redis::Value::Array(primary) = &f[2] else {
                        return None;
                    };
                    let port: i64 = redis::from_redis_value(&primary[1]).ok()?;
                    return u16::try_from(port).ok();
                }
            }
        }
        None
    }

    /// The cluster slot of `key`, as the server on any node computes it.
    pub async fn keyslot(&self, key: &str) -> u16 {
        let port = self.ports[0];
        ask(port, redis::cmd("CLUSTER").arg("KEYSLOT").arg(key))
            .await
            .expect("CLUSTER KEYSLOT")
    }

    /// The ports of the replicas of the primary on `port`.
    pub async fn replicas_of(&self, port: u16) -> Vec<u16> {
        let mut out = Vec::new();
        for (p, n) in &self.nodes {
            if n.pid().is_none() || *p == port {
                continue;
            }
            if info_field(*p, "replication", "master_port")
                .await
                .as_deref()
                == Some(&port.to_string())
            {
                out.push(*p);
            }
        }
        out
    }

    /// The node on `port`.
    pub fn node(&mut self, port: u16) -> &mut TempRedis {
        self.nodes.get_mut(&port).expect("a node of the cluster")
    }
}
