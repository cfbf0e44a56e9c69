//! `hayate serve --ha-etcd ...`: a node of an etcd-coordinated cluster (docs/design.md 8.7),
//! and `hayate status`.

use std::path::PathBuf;
use std::sync::Arc;

use hayate::error::{CliError, CliResult, Context};
use hayate_engine::Database;
use hayate_server::ha::{Coordinator, HaConfig, Role, RoleEnd};
use hayate_server::replication::{Identity, Primary};
use hayate_sql::Cluster;

use super::{
    close_database, database_config, open_cluster, open_database, serve_until, Served, Settings,
};

/// A node of an etcd-coordinated cluster: choose a role (take the leader key, or follow the
/// primary it names, seeding an empty data directory from it), serve, and start over when
/// the role ends (the lease ran out, the data must be seeded again) until a signal.
pub(super) fn run_ha(settings: &Settings, ha: HaConfig) -> CliResult<()> {
    let data_dir = settings.data_dir.clone();
    let coordinator = Coordinator::start(ha.clone())
        .map_err(|error| CliError::new(format!("{error} (is etcd running at {}?)", ha.etcd)))?;
    eprintln!(
        "hayate: node {} of cluster {} (etcd {}, lease {} s)",
        ha.node,
        ha.cluster,
        ha.etcd,
        ha.ttl.as_secs()
    );
    let listen: std::net::SocketAddr = ha.replication.parse().expect("a socket address");
    // A signal stops the node also while it waits for a role (etcd unreachable, no primary)
    // or seeds itself, not only while it serves.
    let signalled = coordinator.clone();
    std::thread::Builder::new()
        .name("hayate-signals".into())
        .spawn(move || {
            if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                runtime.block_on(super::shutdown_signal());
                signalled.request_shutdown();
            }
        })
        .context(|| "starting the signal thread".into())?;
    let result = loop {
        let has_data = data_dir.join(hayate_engine::CONTROL_FILE).exists();
        let role = match coordinator.choose_role(has_data) {
            Ok(role) => role,
            Err(_) if coordinator.shutting_down() => break Ok(()),
            Err(error) => break Err(CliError::new(format!("choosing a role: {error}"))),
        };
        if let Role::Standby { primary } = &role {
            if !has_data {
                eprintln!(
                    "hayate: seeding {} from the primary at {primary}",
                    data_dir.display()
                );
                if let Err(error) = hayate_server::replication::seed_from(
                    primary,
                    &data_dir,
                    &ha.node,
                    &settings.replication_auth,
                ) {
                    eprintln!("hayate: seeding failed ({error}); trying again");
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    continue;
                }
            }
        }
        let standby = matches!(role, Role::Standby { .. });
        let db = open_database(settings, standby)?;
        // A primary's epoch starts here: opening the SQL catalog may write already.
        let log_end_at_open = db.log_end_lsn();
        let cluster = open_cluster(&db)?;
        let mut identity = match Identity::load_or_new(&data_dir) {
            Ok(identity) => identity,
            Err(error) => break Err(CliError::new(format!("reading the identity: {error}"))),
        };
        if let Role::Primary { epoch } = role {
            if epoch > identity.current().number {
                identity.begin_epoch(epoch, log_end_at_open);
            }
        }
        if !standby {
            identity
                .store(&data_dir)
                .context(|| format!("writing the identity in {}", data_dir.display()))?;
        }
        eprintln!(
            "hayate: {} (epoch {})",
            match &role {
                Role::Primary { .. } => "primary".to_string(),
                Role::Standby { primary } => format!("standby of {primary}"),
            },
            identity.current().number
        );
        let primary_slot = Arc::new(parking_lot::Mutex::new(None));
        let restart = Arc::new(tokio::sync::Notify::new());
        let watcher = {
            let policy = settings.replication_policy;
            let auth = settings.replication_auth.clone();
            let (coordinator, db, cluster, primary_slot, restart, data_dir, node) = (
                coordinator.clone(),
                db.clone(),
                cluster.clone(),
                primary_slot.clone(),
                restart.clone(),
                data_dir.clone(),
                ha.node.clone(),
            );
            std::thread::Builder::new()
                .name("hayate-ha-watch".into())
                .spawn(move || {
                    let end = watch_role(WatchedNode {
                        coordinator: &coordinator,
                        role,
                        db: &db,
                        cluster: &cluster,
                        primary_slot: &primary_slot,
                        listen,
                        identity,
                        dir: data_dir,
                        node,
                        policy,
                        auth,
                    });
                    if end != RoleEnd::Stopped {
                        restart.notify_one();
                    }
                    end
                })
                .context(|| "starting the HA watcher".into())?
        };
        let served = serve_until(settings, cluster, &primary_slot, Some(restart));
        coordinator.request_stop();
        let end = watcher.join().unwrap_or(RoleEnd::Stopped);
        if let Some(primary) = primary_slot.lock().take() {
            primary.stop();
        }
        close_database(db)?;
        match served {
            Ok(Served::Restart) => {}
            Ok(Served::Signal) => break Ok(()),
            Err(error) => break Err(error),
        }
        coordinator.resume();
        let reseed = match end {
            RoleEnd::Reseed(why) => Some(why),
            RoleEnd::Rewind { fork, why } => rewind(settings, fork, &why),
            _ => None,
        };
        if let Some(why) = reseed {
            eprintln!("hayate: this node's data must be seeded again: {why}");
            for file in [hayate_engine::CONTROL_FILE, "identity"] {
                let _ = std::fs::remove_file(data_dir.join(file));
            }
        }
    };
    coordinator.resign();
    result
}

/// Cuts this node's log back to `fork`, where its primary's log left it (the commits past it
/// here were never acknowledged), so that it follows from there with its data kept. Returns
/// why it must be seeded again instead, if the rewind cannot be done (a checkpoint of this
/// node covers part of the tail).
fn rewind(settings: &Settings, fork: u64, why: &str) -> Option<String> {
    eprintln!("hayate: this node's log forked from its primary's: {why}");
    match Database::rewind(&settings.data_dir, &database_config(settings, true), fork) {
        Ok(report) => {
            eprintln!(
                "hayate: rewound the log from position {} to the fork point {} (recovery \
                 starts from checkpoint {}); following the primary from there",
                report.old_end_lsn, report.end_lsn, report.checkpoint_id
            );
            None
        }
        Err(error) => Some(format!("rewinding to position {fork}: {error}")),
    }
}

/// What the HA watcher runs a role with.
struct WatchedNode<'a> {
    coordinator: &'a Arc<Coordinator>,
    role: Role,
    db: &'a Database,
    cluster: &'a Arc<Cluster>,
    primary_slot: &'a parking_lot::Mutex<Option<Arc<Primary>>>,
    listen: std::net::SocketAddr,
    identity: Identity,
    dir: PathBuf,
    node: String,
    policy: hayate_server::replication::ReplicationPolicy,
    auth: hayate_server::replication::ReplicationAuth,
}

/// Runs the node's role until it ends: a standby until promoted, then (or from the start) a
/// primary until its lease runs out.
fn watch_role(node: WatchedNode<'_>) -> RoleEnd {
    use hayate_server::replication::{Standby, StandbyConfig};
    let coordinator = node.coordinator;
    let primary = match node.role {
        Role::Standby { primary } => {
            // The primary this node becomes if promoted, installed before its first write.
            let successor = match Primary::prepare(
                node.db.clone(),
                node.listen,
                Some(coordinator.sync_gate()),
                node.auth.clone(),
            ) {
                Ok(successor) => successor,
                Err(error) => {
                    log::error!("ha: listening for standbys on {}: {error}", node.listen);
                    return RoleEnd::LostLease;
                }
            };
            successor.set_policy(node.policy);
            let config = StandbyConfig {
                primary,
                dir: node.dir.clone(),
                name: node.node.clone(),
                successor: Some(successor.clone()),
                auth: node.auth.clone(),
                peer_timeout: node.policy.peer_timeout,
            };
            let standby = match Standby::start(node.db.clone(), node.cluster.clone(), config) {
                Ok(standby) => standby,
                Err(error) => return RoleEnd::Reseed(format!("starting the standby: {error}")),
            };
            let end = coordinator.watch_standby(&standby);
            standby.stop();
            match end {
                RoleEnd::Promoted(_) => successor,
                other => return other,
            }
        }
        Role::Primary { .. } => match Primary::start(
            node.db.clone(),
            node.listen,
            node.identity,
            Some(coordinator.sync_gate()),
            node.auth.clone(),
        ) {
            Ok(primary) => {
                primary.set_policy(node.policy);
                primary
            }
            Err(error) => {
                log::error!("ha: listening for standbys on {}: {error}", node.listen);
                return RoleEnd::LostLease;
            }
        },
    };
    *node.primary_slot.lock() = Some(primary.clone());
    node.cluster
        .set_replication_source(Some(primary.stat_source()));
    let end = coordinator.watch_primary(&primary);
    node.cluster.set_replication_source(None);
    end
}

/// `hayate status`: the cluster as etcd sees it.
pub fn status(etcd: &str, cluster: &str, json: bool) -> CliResult<()> {
    let status = Coordinator::status(etcd, cluster)
        .map_err(|error| CliError::new(format!("{error} (is etcd running at {etcd}?)")))?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&status).expect("serializable")
        );
        return Ok(());
    }
    println!("cluster {cluster} (etcd {etcd})");
    match &status.leader {
        Some(leader) => println!(
            "primary: {} (epoch {}), clients {}, standbys connect to {}",
            leader.node, leader.epoch, leader.client, leader.replication
        ),
        None => println!("primary: none (no node holds the leader key)"),
    }
    match &status.sync {
        Some(sync) => println!(
            "synchronous set (epoch {}): {}{}",
            sync.epoch,
            sync.primary,
            sync.standby
                .as_ref()
                .map_or(" alone: commits wait for a standby".into(), |s| format!(
                    ", {s}"
                ))
        ),
        None => println!("synchronous set: none yet (a new cluster)"),
    }
    let primary_end = status
        .members
        .iter()
        .find(|member| member.role == "primary")
        .map(|member| member.log_end);
    println!(
        "{:<12} {:<9} {:<22} {:>14} {:>14} {:>12}",
        "node", "role", "client", "log end", "applied", "lag (bytes)"
    );
    for member in &status.members {
        let lag = primary_end.map_or("-".to_string(), |end| {
            end.saturating_sub(member.applied).to_string()
        });
        println!(
            "{:<12} {:<9} {:<22} {:>14} {:>14} {:>12}",
            member.node, member.role, member.client, member.log_end, member.applied, lag
        );
    }
    Ok(())
}
